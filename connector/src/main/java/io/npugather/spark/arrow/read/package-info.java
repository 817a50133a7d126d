/**
 * Arrow to Spark: every rank's gathered block as Spark columnar batches and rows, without copying.
 *
 * <p>{@link io.npugather.spark.arrow.read.GatheredPartitions#wrap} rebuilds the peers' vectors over
 * slices of the receive buffer ({@code io.npugather.block.ReceivedBlocks}) and serves the own rank
 * from its block's vectors, each rank as a {@code ColumnarBatch} after an int source-rank column:
 * {@link io.npugather.spark.arrow.read.FixedWidthArrowColumn} (unchecked loads at the buffers'
 * addresses) for fixed-width columns and arrays of them, {@link
 * io.npugather.spark.arrow.read.SharedArrowColumn} (Spark's {@code ArrowColumnVector}, left open
 * when closed) for the rest. For row consumers, {@link io.npugather.spark.arrow.read.GatheredRows}
 * writes the batches' rows as Spark {@code UnsafeRow}s straight from the buffers.
 */
package io.npugather.spark.arrow.read;
