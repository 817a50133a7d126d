package io.npugather;

import java.util.Arrays;
import java.util.Locale;

/**
 * The element types of the operator's contract (spec: float16, float32, int8, int16, int32, int64,
 * bfloat16).
 */
public enum DType {
  FLOAT16("float16", 2, 3),
  FLOAT32("float32", 4, 4),
  INT8("int8", 1, 0),
  INT16("int16", 2, 1),
  INT32("int32", 4, 2),
  INT64("int64", 8, 5),
  BFLOAT16("bfloat16", 2, 11);

  private final String specName;
  private final int byteWidth;
  private final int nativeCode;

  DType(String specName, int byteWidth, int nativeCode) {
    this.specName = specName;
    this.byteWidth = byteWidth;
    this.nativeCode = nativeCode;
  }

  /** The name the spec uses, e.g. {@code "float32"}. */
  public String specName() {
    return specName;
  }

  /** Bytes per element. */
  public int byteWidth() {
    return byteWidth;
  }

  /** The {@code npg_dtype_t} value (equal to HCCL's {@code HcclDataType}). */
  int nativeCode() {
    return nativeCode;
  }

  /** Parses a spec name, case-insensitively; the error lists the allowed names. */
  public static DType fromSpecName(String name) {
    for (DType type : values()) {
      if (type.specName.equals(name == null ? null : name.toLowerCase(Locale.ROOT))) {
        return type;
      }
    }
    throw new IllegalArgumentException(
        "dtype: '"
            + name
            + "' is not supported; allowed: "
            + Arrays.stream(values()).map(DType::specName).toList());
  }

  static DType fromNativeCode(int code) {
    for (DType type : values()) {
      if (type.nativeCode == code) {
        return type;
      }
    }
    return null;
  }

  @Override
  public String toString() {
    return specName;
  }
}
