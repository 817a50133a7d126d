/**
 * Spark to Arrow: one rank's partition written into Arrow vectors from a per-task allocator, as the
 * {@code io.npugather.block.LocalBlock} it sends.
 *
 * <p>{@link io.npugather.spark.arrow.write.PartitionWriter} takes rows ({@link
 * io.npugather.spark.arrow.write.FixedWidthRowWriter}: fixed-width columns and arrays of them
 * straight from {@code UnsafeRow} memory, Spark's own field writers for the rest), columnar batches
 * ({@link io.npugather.spark.arrow.write.ColumnarBatchWriter}: buffer-wise appends for Arrow
 * vectors, typed column copies for Spark's primitive vectors) or the batches of a DataFrame in
 * Spark's cache ({@link io.npugather.spark.arrow.write.CachedBatchColumns}: primitive columns and
 * arrays of fixed-width elements straight from the cached bytes). Every path gives the same buffers
 * as Spark's {@code ArrowWriter}.
 */
package io.npugather.spark.arrow.write;
