package io.npugather;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.math.BigDecimal;
import java.util.Random;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.junit.jupiter.api.Test;

/** float32 to float16 / bfloat16 and back, against known bit patterns and exhaustively. */
class HalfFloatsTest {
  private static int f16(float value) {
    return HalfFloats.floatToFloat16Bits(value) & 0xffff;
  }

  private static int bf16(float value) {
    return HalfFloats.floatToBFloat16Bits(value) & 0xffff;
  }

  private static void assertF16(int expected, float value) {
    assertEquals(
        Integer.toHexString(expected),
        Integer.toHexString(f16(value)),
        "float16 of " + value + " (" + Float.toHexString(value) + ")");
  }

  private static void assertBf16(int expected, float value) {
    assertEquals(
        Integer.toHexString(expected),
        Integer.toHexString(bf16(value)),
        "bfloat16 of " + value + " (" + Float.toHexString(value) + ")");
  }

  @Test
  void float16KnownValues() {
    assertF16(0x0000, 0.0f);
    assertF16(0x8000, -0.0f);
    assertF16(0x3c00, 1.0f);
    assertF16(0xbc00, -1.0f);
    assertF16(0x4000, 2.0f);
    assertF16(0xc000, -2.0f);
    assertF16(0x3800, 0.5f);
    assertF16(0x3555, 1.0f / 3); // 0x1.555556p-2 rounds down
    assertF16(0x2e66, 0.1f); // 0x1.99999ap-4: the dropped bits are below the half-way point
    assertF16(0x4248, (float) Math.PI);
    assertF16(0x7bff, 65504.0f); // largest finite
    assertF16(0x7bff, 65519.996f); // just below the half-way point to 65536
    assertF16(0x7c00, 65520.0f); // the half-way point rounds to even: infinity
    assertF16(0x7c00, 1.0e6f);
    assertF16(0xfc00, -1.0e6f);
    assertF16(0x7c00, Float.MAX_VALUE);
    assertF16(0x7c00, Float.POSITIVE_INFINITY);
    assertF16(0xfc00, Float.NEGATIVE_INFINITY);
    assertF16(0x0400, 0x1p-14f); // smallest normal
    assertF16(0x03ff, 0x1p-14f - 0x1p-24f); // largest subnormal
    assertF16(0x0400, 0x1p-14f - 0x1p-25f); // half-way between them: to even, the normal
    assertF16(0x0200, 0x1p-15f);
    assertF16(0x0001, 0x1p-24f); // smallest subnormal
    assertF16(0x8001, -0x1p-24f);
    assertF16(0x0000, 0x1p-25f); // half of it: ties to even, zero
    assertF16(0x8000, -0x1p-25f);
    assertF16(0x0001, Math.nextUp(0x1p-25f)); // just above half: rounds up
    assertF16(0x0002, 0x1.8p-24f); // 1.5 * 2^-24: tie, to even (2)
    assertF16(0x0002, 0x1.4p-23f); // 2.5 * 2^-24: tie, to even (2)
    assertF16(0x0000, 0x1p-30f);
    assertF16(0x0000, Float.MIN_VALUE); // float subnormal
    assertF16(0x8000, -Float.MIN_NORMAL);
    // Ties between normals: 1 + 2^-11 lies between 1 and 1 + 2^-10.
    assertF16(0x3c00, 1.0f + 0x1p-11f);
    assertF16(0x3c02, 1.0f + 3 * 0x1p-11f);
    assertF16(0x3c01, Math.nextUp(1.0f + 0x1p-11f));
    assertF16(0x3c00, Math.nextDown(1.0f + 0x1p-11f));
    assertF16(0x4000, 2.0f - 0x1p-12f); // carry from the significand into the exponent
  }

  @Test
  void float16NaNsStayNaNs() {
    for (int bits :
        new int[] {0x7fc00000, 0x7f800001, 0xff800001, 0x7fbfffff, 0xffc00000, 0x7f802000}) {
      float nan = Float.intBitsToFloat(bits);
      int half = f16(nan);
      assertEquals(0x7c00, half & 0x7c00, Integer.toHexString(bits));
      assertTrue(
          (half & 0x03ff) != 0, Integer.toHexString(bits) + " -> " + Integer.toHexString(half));
      assertEquals((bits >>> 31) << 15, half & 0x8000, "sign of " + Integer.toHexString(bits));
      assertTrue(Float.isNaN(HalfFloats.float16BitsToFloat((short) half)));
    }
  }

  @Test
  void float16ToFloatKnownValues() {
    assertEquals(1.0f, HalfFloats.float16BitsToFloat((short) 0x3c00));
    assertEquals(65504.0f, HalfFloats.float16BitsToFloat((short) 0x7bff));
    assertEquals(0x1p-24f, HalfFloats.float16BitsToFloat((short) 0x0001));
    assertEquals(0x1p-14f - 0x1p-24f, HalfFloats.float16BitsToFloat((short) 0x03ff));
    assertEquals(-2.0f, HalfFloats.float16BitsToFloat((short) 0xc000));
    assertEquals(
        Float.floatToRawIntBits(-0.0f),
        Float.floatToRawIntBits(HalfFloats.float16BitsToFloat((short) 0x8000)));
    assertEquals(Float.POSITIVE_INFINITY, HalfFloats.float16BitsToFloat((short) 0x7c00));
    assertEquals(Float.NEGATIVE_INFINITY, HalfFloats.float16BitsToFloat((short) 0xfc00));
    assertTrue(Float.isNaN(HalfFloats.float16BitsToFloat((short) 0x7e00)));
    assertTrue(Float.isNaN(HalfFloats.float16BitsToFloat((short) 0x7c01)));
  }

  /** Every half widens to its exact value (checked with BigDecimal) and narrows back to itself. */
  @Test
  void float16EveryValueRoundTrips() {
    for (int bits = 0; bits < 0x10000; bits++) {
      float value = HalfFloats.float16BitsToFloat((short) bits);
      int exponent = (bits >>> 10) & 0x1f;
      if (exponent == 0x1f) {
        assertTrue((bits & 0x3ff) == 0 ? Float.isInfinite(value) : Float.isNaN(value));
        if ((bits & 0x3ff) != 0) {
          continue; // NaN payloads are quietened
        }
      } else {
        assertEquals(
            0,
            exactHalf(bits).compareTo(new BigDecimal(value)),
            "value of " + Integer.toHexString(bits) + ": " + value);
      }
      assertEquals(bits, f16(value), "round trip of " + Integer.toHexString(bits));
    }
  }

  /**
   * Between every two neighbouring finite halves of one sign: the midpoint (exact in float) goes to
   * the one with an even significand, anything strictly nearer to one of them goes to it.
   */
  @Test
  void float16RoundsToNearestEvenBetweenEveryPairOfNeighbours() {
    for (int sign : new int[] {0, 0x8000}) {
      for (int low = 0; low < 0x7c00; low++) {
        int high = low + 1; // 0x7c00 (infinity) for the last: the overflow threshold
        float a = HalfFloats.float16BitsToFloat((short) (sign | low));
        float b =
            high == 0x7c00
                ? (sign == 0 ? 65536.0f : -65536.0f)
                : HalfFloats.float16BitsToFloat((short) (sign | high));
        float mid = (a + b) / 2; // exact: a and b have at most 11 significant bits
        int even = (low & 1) == 0 ? low : high;
        assertEquals(sign | even, f16(mid), "midpoint of " + Integer.toHexString(sign | low));
        float towardA = sign == 0 ? Math.nextDown(mid) : Math.nextUp(mid);
        float towardB = sign == 0 ? Math.nextUp(mid) : Math.nextDown(mid);
        assertEquals(sign | low, f16(towardA), "below midpoint of " + Integer.toHexString(low));
        assertEquals(sign | high, f16(towardB), "above midpoint of " + Integer.toHexString(low));
      }
    }
  }

  @Test
  void float16MatchesAReferenceOnRandomFloats() {
    Random random = new Random(11);
    for (int i = 0; i < 200_000; i++) {
      float value = Float.intBitsToFloat(random.nextInt());
      if (Float.isNaN(value)) {
        continue;
      }
      assertEquals(referenceFloat16(value), f16(value), "float16 of " + Float.toHexString(value));
    }
  }

  /** Nearest half by exhaustive comparison of distances in exact arithmetic. */
  private static int referenceFloat16(float value) {
    int sign = Float.floatToRawIntBits(value) < 0 ? 0x8000 : 0;
    if (Float.isInfinite(value)) {
      return sign | 0x7c00;
    }
    BigDecimal x = new BigDecimal(Math.abs((double) value));
    if (x.compareTo(new BigDecimal(65520)) >= 0) {
      return sign | 0x7c00;
    }
    int lo = 0;
    int hi = 0x7bff;
    while (lo < hi) { // the largest half <= x
      int mid = (lo + hi + 1) >>> 1;
      if (exactHalf(mid).compareTo(x) <= 0) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    if (lo == 0x7bff) {
      return sign | lo; // below 65520, the half-way point to 65536 (= 2^16, the overflow)
    }
    int cmp = x.subtract(exactHalf(lo)).compareTo(exactHalf(lo + 1).subtract(x));
    if (cmp < 0 || (cmp == 0 && (lo & 1) == 0)) {
      return sign | lo;
    }
    return sign | (lo + 1);
  }

  private static BigDecimal exactHalf(int bits) {
    int exponent = (bits >>> 10) & 0x1f;
    int significand = bits & 0x3ff;
    BigDecimal magnitude =
        exponent == 0
            ? new BigDecimal(significand).multiply(new BigDecimal(Math.scalb(1.0, -24)))
            : new BigDecimal(1024 + significand)
                .multiply(new BigDecimal(Math.scalb(1.0, exponent - 25)));
    return (bits & 0x8000) != 0 ? magnitude.negate() : magnitude;
  }

  @Test
  void bfloat16KnownValues() {
    assertBf16(0x0000, 0.0f);
    assertBf16(0x8000, -0.0f);
    assertBf16(0x3f80, 1.0f);
    assertBf16(0xbf80, -1.0f);
    assertBf16(0x4049, (float) Math.PI); // 0x40490fdb: rounds down
    assertBf16(0x3dcd, 0.1f); // 0x3dcccccd: rounds up
    assertBf16(0x3eab, 1.0f / 3); // 0x3eaaaaab: rounds up
    assertBf16(0x3f80, Float.intBitsToFloat(0x3f808000)); // tie, to even (down)
    assertBf16(0x3f82, Float.intBitsToFloat(0x3f818000)); // tie, to even (up)
    assertBf16(0x3f81, Float.intBitsToFloat(0x3f808001));
    assertBf16(0x3f80, Float.intBitsToFloat(0x3f807fff));
    assertBf16(0x4000, Float.intBitsToFloat(0x3fffc000)); // carry into the exponent
    assertBf16(0x7f7f, Float.intBitsToFloat(0x7f7f7fff)); // largest bf16 stays
    assertBf16(0x7f80, Float.MAX_VALUE); // rounds up to infinity
    assertBf16(0xff80, -Float.MAX_VALUE);
    assertBf16(0x7f80, Float.POSITIVE_INFINITY);
    assertBf16(0xff80, Float.NEGATIVE_INFINITY);
    assertBf16(0x0001, Float.intBitsToFloat(0x00010000)); // subnormal kept
    assertBf16(0x0000, Float.MIN_VALUE);
    assertBf16(0x0080, Float.MIN_NORMAL);
    assertBf16(0x7fc0, Float.NaN);
    assertBf16(0x7fc0, Float.intBitsToFloat(0x7f800001)); // signalling NaN, low payload: stays NaN
    assertBf16(0xffc0, Float.intBitsToFloat(0xff800001));
    assertBf16(0x7fff, Float.intBitsToFloat(0x7fffffff));
  }

  @Test
  void bfloat16EveryValueRoundTripsAndTiesGoToEven() {
    for (int bits = 0; bits < 0x10000; bits++) {
      float value = HalfFloats.bfloat16BitsToFloat((short) bits);
      assertEquals(bits << 16, Float.floatToRawIntBits(value));
      if (Float.isNaN(value)) {
        assertTrue(Float.isNaN(HalfFloats.bfloat16BitsToFloat((short) bf16(value))));
        continue;
      }
      assertEquals(bits, bf16(value), "round trip of " + Integer.toHexString(bits));
      if ((bits & 0x7f80) != 0x7f80 && (bits & 0x7fff) != 0x7f7f) {
        int tie = (bits << 16) | 0x8000;
        int even = (bits & 1) == 0 ? bits : bits + 1;
        assertEquals(
            even, bf16(Float.intBitsToFloat(tie)), "tie above " + Integer.toHexString(bits));
        assertEquals(bits, bf16(Float.intBitsToFloat(tie - 1)));
        assertEquals(bits + 1, bf16(Float.intBitsToFloat(tie + 1)));
      }
    }
  }

  @Test
  void tensorsNarrowAndWidenWithTheirShape() {
    try (BufferAllocator allocator = new RootAllocator()) {
      float[] values = {1.0f, 0.1f, -65520.0f, 0x1p-25f, 3.0f, (float) Math.PI};
      try (Tensor x = Tensor.allocate(allocator, DType.FLOAT32, 2, 3)) {
        for (int i = 0; i < values.length; i++) {
          x.buffer().setFloat(4L * i, values[i]);
        }
        try (Tensor half = HalfFloats.fromFloat32(x, DType.FLOAT16, allocator);
            Tensor wide = HalfFloats.toFloat32(half, allocator)) {
          assertEquals(DType.FLOAT16, half.dtype());
          assertEquals(DType.FLOAT32, wide.dtype());
          assertEquals(
              java.util.Arrays.toString(new long[] {2, 3}),
              java.util.Arrays.toString(wide.shape()));
          for (int i = 0; i < values.length; i++) {
            assertEquals(f16(values[i]), half.buffer().getShort(2L * i) & 0xffff);
            assertEquals(
                HalfFloats.float16BitsToFloat(HalfFloats.floatToFloat16Bits(values[i])),
                wide.buffer().getFloat(4L * i));
          }
        }
        try (Tensor bf = HalfFloats.fromFloat32(x, DType.BFLOAT16, allocator);
            Tensor wide = HalfFloats.toFloat32(bf, allocator)) {
          for (int i = 0; i < values.length; i++) {
            assertEquals(bf16(values[i]), bf.buffer().getShort(2L * i) & 0xffff);
            assertEquals(
                HalfFloats.bfloat16BitsToFloat(HalfFloats.floatToBFloat16Bits(values[i])),
                wide.buffer().getFloat(4L * i));
          }
        }
        try (Tensor copy = HalfFloats.toFloat32(x, allocator)) {
          for (int i = 0; i < values.length; i++) {
            assertEquals(values[i], copy.buffer().getFloat(4L * i));
          }
        }
      }
      try (Tensor ints = Tensor.allocate(allocator, DType.INT32, 2)) {
        assertThrows(IllegalArgumentException.class, () -> HalfFloats.toFloat32(ints, allocator));
        assertThrows(
            IllegalArgumentException.class,
            () -> HalfFloats.fromFloat32(ints, DType.FLOAT16, allocator));
      }
      assertEquals(0, allocator.getAllocatedMemory());
    }
  }
}
