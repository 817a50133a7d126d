/**
 * Arrow conversion for the all-gather of a DataFrame: one rank's partition into Arrow buffers to
 * send, and every rank's received block back into Spark columnar batches without copying.
 *
 * <h2>Sending side</h2>
 *
 * {@link io.npugather.spark.arrow.PartitionBuffers} writes a partition into Arrow vectors from a
 * per-task allocator, from rows ({@link io.npugather.spark.arrow.FixedWidthRowWriter}: fixed-width
 * columns and arrays of them straight from {@code UnsafeRow} memory, Spark's own field writers
 * for the rest; the same bytes as Spark's {@code ArrowWriter}) or from columnar batches
 * (buffer-wise appends for Arrow vectors, typed column copies for Spark's primitive vectors) or
 * from the batches of a DataFrame in Spark's cache ({@link
 * io.npugather.spark.arrow.CachedBatchColumns}: primitive columns and arrays of fixed-width
 * elements straight from the cached bytes). Its
 * segment list (addresses and lengths, built once) points straight at the vectors' buffers, with
 * padding segments that keep every buffer 8-byte aligned; their concatenation is this rank's
 * block. Its {@link io.npugather.spark.arrow.PartitionLayout} (schema fingerprint, row count,
 * field nodes, buffer lengths) is what the ranks exchange before the data: a few bytes per column,
 * versioned and strictly validated.
 *
 * <h2>Receiving side</h2>
 *
 * After one all-gather-v places rank r's block at byte {@code displs[r]} of a receive buffer
 * ({@link io.npugather.spark.arrow.PartitionLayout#displacements} gives aligned displacements),
 * {@link io.npugather.spark.arrow.GatheredPartitions#wrap} rebuilds each rank's vectors over
 * reference-counted slices of that buffer with Arrow's {@code VectorLoader} and exposes them as
 * {@code ColumnarBatch}es after an int source-rank column: {@link
 * io.npugather.spark.arrow.FixedWidthArrowColumn} (unchecked loads at the buffers' addresses)
 * for fixed-width columns and arrays of them, Spark's {@code ArrowColumnVector} for the rest. The own
 * rank's batch is served from its input vectors; its block need not be in the receive buffer.
 * For row consumers, {@link io.npugather.spark.arrow.GatheredRows} writes the batches' rows as
 * Spark {@code UnsafeRow}s straight from the buffers (fixed-width columns and arrays of them).
 *
 * <h2>Memory</h2>
 *
 * Everything is allocated from the allocators passed in. Closing the {@code GatheredPartitions}
 * and the {@code PartitionBuffers} releases all of it, so a per-task child allocator closes at
 * zero. The tasks' allocators serve large buffers from a {@link
 * io.npugather.spark.memory.LargeBufferCache}, which keeps their memory for the next gather. A receive buffer that is native memory of a transport can be handed in as an {@code
 * ArrowBuf} through {@code BufferAllocator.wrapForeignAllocation}.
 */
package io.npugather.spark.arrow;
