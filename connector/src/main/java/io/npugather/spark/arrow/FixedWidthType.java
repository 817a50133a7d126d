package io.npugather.spark.arrow;

import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.BitVector;
import org.apache.arrow.vector.DateDayVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.Float4Vector;
import org.apache.arrow.vector.Float8Vector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.SmallIntVector;
import org.apache.arrow.vector.TimeStampMicroTZVector;
import org.apache.arrow.vector.TimeStampMicroVector;
import org.apache.arrow.vector.TinyIntVector;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;

/**
 * The fixed-width Spark types the conversion reads and writes at buffer addresses, with the Arrow
 * vector Spark maps each to and the bytes of one value. Every reader and writer decides by this one
 * model: a column of one of these types, or an array of them, is read and written directly; any
 * other goes through Spark's own Arrow code.
 */
public enum FixedWidthType {
  BOOLEAN(-1, false, true),
  BYTE(1, false, true),
  SHORT(2, false, true),
  INT(4, false, true),
  DATE(4, false, false),
  FLOAT(4, true, true),
  LONG(8, false, true),
  TIMESTAMP(8, false, false),
  TIMESTAMP_NTZ(8, false, false),
  DOUBLE(8, true, true);

  private final int width;
  private final boolean floating;
  private final boolean cachedAsColumns;

  FixedWidthType(int width, boolean floating, boolean cachedAsColumns) {
    this.width = width;
    this.floating = floating;
    this.cachedAsColumns = cachedAsColumns;
  }

  /** Bytes per value; -1 for boolean, one bit per value (Arrow) or one byte (Spark's rows). */
  public int width() {
    return width;
  }

  /** True for float and double, whose values are moved as their raw bits. */
  public boolean floating() {
    return floating;
  }

  /** True for the types Spark reads from its default cache format as column vectors. */
  public boolean cachedAsColumns() {
    return cachedAsColumns;
  }

  /** The type of Spark type {@code t}, or null if it is not fixed-width. */
  public static FixedWidthType of(DataType t) {
    if (t instanceof BooleanType) {
      return BOOLEAN;
    } else if (t instanceof ByteType) {
      return BYTE;
    } else if (t instanceof ShortType) {
      return SHORT;
    } else if (t instanceof IntegerType) {
      return INT;
    } else if (t instanceof DateType) {
      return DATE;
    } else if (t instanceof FloatType) {
      return FLOAT;
    } else if (t instanceof LongType) {
      return LONG;
    } else if (t instanceof TimestampType) {
      return TIMESTAMP;
    } else if (t instanceof TimestampNTZType) {
      return TIMESTAMP_NTZ;
    } else if (t instanceof DoubleType) {
      return DOUBLE;
    }
    return null;
  }

  /** The type of the values Spark maps to {@code vector}'s class, or null for any other. */
  public static FixedWidthType of(FieldVector vector) {
    if (vector instanceof BitVector) {
      return BOOLEAN;
    } else if (vector instanceof TinyIntVector) {
      return BYTE;
    } else if (vector instanceof SmallIntVector) {
      return SHORT;
    } else if (vector instanceof IntVector) {
      return INT;
    } else if (vector instanceof DateDayVector) {
      return DATE;
    } else if (vector instanceof Float4Vector) {
      return FLOAT;
    } else if (vector instanceof BigIntVector) {
      return LONG;
    } else if (vector instanceof TimeStampMicroTZVector) {
      return TIMESTAMP;
    } else if (vector instanceof TimeStampMicroVector) {
      return TIMESTAMP_NTZ;
    } else if (vector instanceof Float8Vector) {
      return DOUBLE;
    }
    return null;
  }

  /** The element type of an array of fixed-width elements, or null for any other type. */
  public static FixedWidthType ofElements(DataType t) {
    return t instanceof ArrayType ? of(((ArrayType) t).elementType()) : null;
  }

  /** True if a column of Spark type {@code t} is of a fixed-width type or an array of one. */
  public static boolean isFixedWidthColumn(DataType t) {
    return of(t) != null || ofElements(t) != null;
  }
}
