/**
 * The off-heap memory of NpuGather's tasks in a JVM: {@link io.npugather.spark.memory.GatherMemory}
 * (one Arrow root allocator, a child per task, the settings that bound it), its {@link
 * io.npugather.spark.memory.LargeBufferCache} (large buffers' memory kept mapped for the next
 * gather) and {@link io.npugather.spark.memory.HugePages} (the advice that makes fresh large
 * buffers fault in 2 MiB at a time). The Arrow conversion allocates from these allocators without
 * knowing the collective.
 */
package io.npugather.spark.memory;
