/**
 * The operator API, without Spark: the all-gather of off-heap tensors among ranks, over the native
 * core (JavaCPP binding of the one C ABI, {@code npugather.h}).
 *
 * <ul>
 *   <li><b>The operation</b>: {@link io.npugather.AllGatherOperation} (every rank's tensor x, of
 *       one shape and dtype, gathered into {@code [rankSize] + x.shape} in rank order), its
 *       parameters {@link io.npugather.AllGatherParam} (the vendor's, field for field), {@link
 *       io.npugather.Tensor} (off-heap memory of an Arrow allocator), {@link io.npugather.DType}
 *       and {@link io.npugather.HalfFloats} (float32 to and from the 16-bit floats).
 *   <li><b>The ranks' group</b>: {@link io.npugather.Communicator} (one rank's membership; every
 *       blocking call bounded and abortable), {@link io.npugather.RootInfo} (what the root creates
 *       and every rank joins with), {@link io.npugather.CommunicatorOptions} (timeout, device, host
 *       transport), {@link io.npugather.Backend} and {@link io.npugather.CommMode}.
 *   <li><b>Failures</b>: {@link io.npugather.NpuGatherException} (whose fault, as {@link
 *       io.npugather.ResultCode}, the operation and the rank) and {@link
 *       io.npugather.VendorException} (a vendor library's error code besides).
 *   <li><b>The native library</b>: {@link io.npugather.NativeLibrary} (its presence and loading,
 *       with one line naming what to add when it is missing), {@link io.npugather.NativeStatus}
 *       (the one place a native result code becomes its exception) and {@link
 *       io.npugather.NativeMemory} (huge-page advice and faulting pages in).
 * </ul>
 *
 * <p>{@link io.npugather.block} holds one rank's Arrow block on the wire; {@code
 * io.npugather.spark} builds Spark's gather on both.
 */
package io.npugather;
