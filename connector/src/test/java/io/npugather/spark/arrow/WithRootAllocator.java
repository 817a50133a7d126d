package io.npugather.spark.arrow;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.apache.arrow.memory.RootAllocator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;

/** A fresh root allocator per test; a test that leaves a byte allocated fails. */
public abstract class WithRootAllocator {
  protected RootAllocator root;

  @BeforeEach
  public void openAllocator() {
    root = TestAllocators.newRoot();
  }

  @AfterEach
  public void closeAllocator() {
    assertEquals(0, root.getAllocatedMemory(), "bytes still allocated: " + root.toVerboseString());
    root.close();
  }
}
