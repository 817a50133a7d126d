package io.npugather;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** Shapes are checked before anything is allocated, and errors name the shape. */
class TensorShapeTest {
  @Test
  void aShapeWhoseByteSizeOverflowsNamesTheShapeAndTheDim() {
    IllegalArgumentException e =
        assertThrows(
            IllegalArgumentException.class,
            () -> Tensor.byteSize(DType.FLOAT32, new long[] {1L << 40, 1L << 40}));
    assertTrue(e.getMessage().contains("[1099511627776, 1099511627776]"), e.getMessage());
    assertTrue(e.getMessage().contains("shape[1]"), e.getMessage());
    IllegalArgumentException width =
        assertThrows(
            IllegalArgumentException.class,
            () -> Tensor.byteSize(DType.INT64, new long[] {1L << 61}));
    assertTrue(width.getMessage().contains("shape[0]"), width.getMessage());
  }

  @Test
  void largestRepresentableShapesAndEmptyDimsAreAccepted() {
    assertEquals(Long.MAX_VALUE - 7, Tensor.byteSize(DType.INT8, new long[] {Long.MAX_VALUE - 7}));
    assertEquals(0, Tensor.byteSize(DType.INT64, new long[] {0, Long.MAX_VALUE}));
    assertEquals(8, Tensor.byteSize(DType.INT64, new long[] {}));
  }
}
