package io.npugather.spark.arrow;

import org.apache.arrow.memory.AllocationManager;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.ReferenceManager;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.memory.util.MemoryUtil;

/**
 * Root allocators for the tests, backed by plain {@code Unsafe} allocations so they do not depend
 * on which Netty the test class path resolves (Spark supplies a matching one at run time).
 */
public final class TestAllocators {
  private TestAllocators() {}

  private static final AllocationManager.Factory UNSAFE =
      new AllocationManager.Factory() {
        private final ArrowBuf empty =
            new ArrowBuf(ReferenceManager.NO_OP, null, 0, MemoryUtil.allocateMemory(0));

        @Override
        public AllocationManager create(BufferAllocator accountingAllocator, long size) {
          return new UnsafeAllocationManager(accountingAllocator, size);
        }

        @Override
        public ArrowBuf empty() {
          return empty;
        }
      };

  private static final class UnsafeAllocationManager extends AllocationManager {
    private final long address;
    private final long size;

    UnsafeAllocationManager(BufferAllocator accountingAllocator, long size) {
      super(accountingAllocator);
      this.address = MemoryUtil.allocateMemory(size);
      this.size = size;
    }

    @Override
    public long getSize() {
      return size;
    }

    @Override
    protected long memoryAddress() {
      return address;
    }

    @Override
    protected void release0() {
      MemoryUtil.freeMemory(address);
    }
  }

  public static RootAllocator newRoot() {
    return new RootAllocator(
        RootAllocator.configBuilder()
            .maxAllocation(Long.MAX_VALUE)
            .allocationManagerFactory(UNSAFE)
            .build());
  }
}
