/**
 * Arrow conversion for the all-gather of a DataFrame, on the block model of {@code
 * io.npugather.block}: {@code write} turns one rank's partition into the Arrow block it sends,
 * {@code read} turns every rank's received block back into Spark columnar batches and rows without
 * copying. Neither knows the other; both decide by the one type model here, {@link
 * io.npugather.spark.arrow.FixedWidthType} (the fixed-width Spark types read and written at buffer
 * addresses, their Arrow vectors and widths), with {@link io.npugather.spark.arrow.ArrowBitmaps}
 * for the bits of Arrow bitmaps and {@link io.npugather.spark.arrow.ArrowBackedColumn} for Spark
 * columns that read an Arrow vector in place.
 *
 * <p>Everything is allocated from the allocators passed in: a task's child allocator of {@code
 * io.npugather.spark.memory.GatherMemory}, which serves large buffers from memory kept mapped for
 * the next gather.
 */
package io.npugather.spark.arrow;
