/**
 * One rank's Arrow block on the wire, with no engine in it: what a rank sends, how a receiver finds
 * and checks it, and the vectors rebuilt over it. Knows Arrow and bytes, not Spark.
 *
 * <h2>Sending side</h2>
 *
 * {@link io.npugather.block.LocalBlock} takes a rank's Arrow vectors and builds, once, its segment
 * list (addresses and lengths) pointing straight at the vectors' buffers, with padding segments
 * that keep every buffer 8-byte aligned; their concatenation is the rank's block. Its {@link
 * io.npugather.block.BlockLayout} (schema fingerprint ({@link
 * io.npugather.block.SchemaFingerprint}), row count, field nodes, buffer lengths) is what the ranks
 * exchange before the data: a few bytes per column, versioned and strictly validated.
 *
 * <h2>Receiving side</h2>
 *
 * After one all-gather-v places rank r's block at the byte {@link
 * io.npugather.block.ReceiveDisplacements} gives for it, {@link
 * io.npugather.block.ReceivedBlocks#load} checks every layout against the rank's own (schema,
 * structure, sizes, offsets: two reads per variable-width vector, nothing per row) and rebuilds
 * each peer's vectors over reference-counted slices of the receive buffer with Arrow's {@code
 * VectorLoader}. A cross-rank disagreement is an {@link io.npugather.NpuGatherException} whose
 * {@link io.npugather.ResultCode} says whose fault it is.
 *
 * <h2>Memory</h2>
 *
 * Everything is allocated from the allocators passed in; closing the {@code LocalBlock} and the
 * rebuilt vectors releases all of it. A receive buffer that is native memory of a transport can be
 * handed in as an {@code ArrowBuf} through {@code BufferAllocator.wrapForeignAllocation}.
 */
package io.npugather.block;
