package io.npugather;

import java.util.Objects;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;

/**
 * Conversions between float32 and the 16-bit float types of {@link DType}: IEEE 754 binary16
 * ({@link DType#FLOAT16}) and bfloat16 ({@link DType#BFLOAT16}), as raw bits in a {@code short}.
 *
 * <p>Narrowing rounds to nearest, ties to even, as IEEE 754 does: for float16 with gradual
 * underflow to subnormals (magnitudes at or below 2^-25 become a signed zero), overflow to infinity
 * (magnitudes from 65520 up), and infinities and NaNs kept (a NaN stays a NaN, quiet, with the top
 * bits of its payload). Widening is exact.
 */
public final class HalfFloats {
  private static final int FLOAT_SIGN = 0x8000_0000;
  private static final int FLOAT_EXP_MASK = 0x7f80_0000;
  private static final int FLOAT_SIGNIF_MASK = 0x007f_ffff;
  private static final int FLOAT_HIDDEN_BIT = 0x0080_0000;
  private static final int HALF_EXP_MASK = 0x7c00;
  private static final int HALF_SIGNIF_MASK = 0x03ff;
  private static final int HALF_QUIET_BIT = 0x0200;
  private static final int BF16_QUIET_BIT = 0x0040;

  private HalfFloats() {}

  /** {@code value} rounded to the nearest binary16 (ties to even), as its bits. */
  public static short floatToFloat16Bits(float value) {
    int bits = Float.floatToRawIntBits(value);
    int sign = (bits & FLOAT_SIGN) >>> 16;
    int exponent = (bits & FLOAT_EXP_MASK) >>> 23; // biased by 127
    int significand = bits & FLOAT_SIGNIF_MASK;
    if (exponent == 0xff) {
      if (significand == 0) {
        return (short) (sign | HALF_EXP_MASK); // +-infinity
      }
      // NaN: the top 9 payload bits, quiet (which also keeps it a NaN rather than an infinity).
      return (short) (sign | HALF_EXP_MASK | HALF_QUIET_BIT | (significand >>> 13));
    }
    // Unbiased exponent e: value = 1.significand * 2^e for normal floats. Float subnormals are
    // far below half's smallest subnormal (2^-24) and round to zero below.
    int e = exponent - 127;
    if (e > 15) {
      return (short) (sign | HALF_EXP_MASK); // at least 2^16: beyond every rounding to 65504
    }
    if (e < -25 || exponent == 0) {
      return (short) sign; // below 2^-25, half of the smallest subnormal: rounds to zero
    }
    // The full significand with its hidden bit: 24 bits, value = full * 2^(e - 23).
    int full = significand | FLOAT_HIDDEN_BIT;
    // Half keeps 10 fraction bits for normals (e >= -14): drop 13 bits. Subnormals have a fixed
    // exponent of -14, so every step below it drops one more bit.
    int shift = e >= -14 ? 13 : 13 + (-14 - e); // 13..24
    int kept = full >>> shift;
    int roundBit = (full >>> (shift - 1)) & 1;
    boolean sticky = (full & ((1 << (shift - 1)) - 1)) != 0;
    if (roundBit == 1 && (sticky || (kept & 1) == 1)) {
      kept++; // may carry into the exponent (subnormal to normal, or up to infinity): still right
    }
    int halfBits;
    if (e >= -14) {
      // kept = 1.fraction in 11 bits (or 2.0 after a carry); the exponent field adds to it.
      halfBits = ((e + 15) << 10) + (kept - (1 << 10));
    } else {
      halfBits = kept; // subnormal: exponent field 0 (or 1 after a carry to the smallest normal)
    }
    return (short) (sign | halfBits); // a carry past 65504 gives exactly the infinity bits
  }

  /** The float32 value of binary16 bits (exact). */
  public static float float16BitsToFloat(short half) {
    int bits = half & 0xffff;
    int sign = (bits & 0x8000) << 16;
    int exponent = (bits & HALF_EXP_MASK) >>> 10;
    int significand = bits & HALF_SIGNIF_MASK;
    if (exponent == 0x1f) {
      // Infinity, or a NaN with its payload in the top bits of the float's.
      return Float.intBitsToFloat(sign | FLOAT_EXP_MASK | (significand << 13));
    }
    if (exponent == 0) {
      float magnitude = significand * 0x1p-24f; // zero or subnormal: exact in float
      return sign != 0 ? -magnitude : magnitude;
    }
    return Float.intBitsToFloat(sign | ((exponent - 15 + 127) << 23) | (significand << 13));
  }

  /** {@code value} rounded to the nearest bfloat16 (ties to even), as its bits. */
  public static short floatToBFloat16Bits(float value) {
    int bits = Float.floatToRawIntBits(value);
    if ((bits & FLOAT_EXP_MASK) == FLOAT_EXP_MASK && (bits & FLOAT_SIGNIF_MASK) != 0) {
      // NaN: rounding could carry it into an infinity; keep the top payload bits, quiet.
      return (short) ((bits >>> 16) | BF16_QUIET_BIT);
    }
    int lsb = (bits >>> 16) & 1;
    // Adding 0x7fff rounds up exactly the lower halves above the tie; the lsb breaks ties to
    // even. Overflow of the largest finite values carries into the infinity bits, as it should.
    return (short) ((bits + 0x7fff + lsb) >>> 16);
  }

  /** The float32 value of bfloat16 bits (exact). */
  public static float bfloat16BitsToFloat(short bf16) {
    return Float.intBitsToFloat((bf16 & 0xffff) << 16);
  }

  /**
   * A new tensor of {@code dtype} (float16, bfloat16 or float32) with {@code x}'s values and shape,
   * allocated from {@code allocator}; the caller closes it. {@code x} must be float32.
   */
  public static Tensor fromFloat32(Tensor x, DType dtype, BufferAllocator allocator) {
    Objects.requireNonNull(x, "x");
    Objects.requireNonNull(dtype, "dtype");
    Objects.requireNonNull(allocator, "allocator");
    if (x.dtype() != DType.FLOAT32) {
      throw new IllegalArgumentException("x is " + x + "; allowed: a float32 tensor");
    }
    requireFloatType(dtype);
    Tensor out = Tensor.allocate(allocator, dtype, x.shape());
    try {
      ArrowBuf in = x.buffer();
      ArrowBuf to = out.buffer();
      long n = x.elementCount();
      switch (dtype) {
        case FLOAT16 -> {
          for (long i = 0; i < n; i++) {
            to.setShort(2 * i, floatToFloat16Bits(in.getFloat(4 * i)));
          }
        }
        case BFLOAT16 -> {
          for (long i = 0; i < n; i++) {
            to.setShort(2 * i, floatToBFloat16Bits(in.getFloat(4 * i)));
          }
        }
        default -> to.setBytes(0, in, 0, x.byteSize());
      }
      return out;
    } catch (RuntimeException e) {
      out.close();
      throw e;
    }
  }

  /**
   * A new float32 tensor with {@code x}'s values and shape (exact), allocated from {@code
   * allocator}; the caller closes it. {@code x} may be float16, bfloat16 or float32 (copied).
   */
  public static Tensor toFloat32(Tensor x, BufferAllocator allocator) {
    Objects.requireNonNull(x, "x");
    Objects.requireNonNull(allocator, "allocator");
    requireFloatType(x.dtype());
    Tensor out = Tensor.allocate(allocator, DType.FLOAT32, x.shape());
    try {
      ArrowBuf in = x.buffer();
      ArrowBuf to = out.buffer();
      long n = x.elementCount();
      switch (x.dtype()) {
        case FLOAT16 -> {
          for (long i = 0; i < n; i++) {
            to.setFloat(4 * i, float16BitsToFloat(in.getShort(2 * i)));
          }
        }
        case BFLOAT16 -> {
          for (long i = 0; i < n; i++) {
            to.setInt(4 * i, (in.getShort(2 * i) & 0xffff) << 16);
          }
        }
        default -> to.setBytes(0, in, 0, x.byteSize());
      }
      return out;
    } catch (RuntimeException e) {
      out.close();
      throw e;
    }
  }

  private static void requireFloatType(DType dtype) {
    if (dtype != DType.FLOAT16 && dtype != DType.BFLOAT16 && dtype != DType.FLOAT32) {
      throw new IllegalArgumentException(
          "dtype " + dtype + " is not a float type; allowed: float16, bfloat16, float32");
    }
  }
}
