package io.npugather.spark;

import io.npugather.Tensor;
import java.io.Serializable;

/**
 * What {@link NpuGather#onRanks} runs on every rank, inside its barrier task, once the ranks have
 * all-gathered their tensors. Serializable: it is shipped to the executors with its captures.
 *
 * @param <T> the result sent back to the driver (Serializable, or null)
 */
@FunctionalInterface
public interface RankFunction<T> extends Serializable {
  /**
   * Runs on rank {@code rank} with {@code gathered} = {@code [rankSize, rows, features]}: every
   * rank's tensor, stacked in rank order, in the wire dtype of the run (float32 unless float16 or
   * bfloat16 was asked for; {@link io.npugather.HalfFloats#toFloat32} widens it back).
   *
   * <p>{@code gathered} belongs to the task and is closed when this returns: read it here, do not
   * close it, and do not return it or its buffer. Memory this function allocates itself it must
   * release before returning.
   *
   * @return the rank's result, collected on the driver at index {@code rank}
   */
  T apply(int rank, Tensor gathered) throws Exception;
}
