package io.npugather.spark.arrow.read;

import io.npugather.spark.arrow.ArrowBackedColumn;
import io.npugather.spark.arrow.ArrowBitmaps;
import io.npugather.spark.arrow.FixedWidthType;
import org.apache.arrow.vector.BaseFixedWidthVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.complex.ListVector;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.vectorized.ArrowColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A read-only Spark column over an Arrow vector of a fixed-width type (boolean, byte, short, int,
 * long, float, double, date, timestamp, timestamp_ntz) or a list of such elements, reading the
 * buffers at their addresses: one memory load per value, no bounds or null checks on a column
 * without nulls, bulk copies for {@code getFloats} and friends. Spark's {@link ArrowColumnVector}
 * goes through Arrow's checked accessors for every value.
 *
 * <p>The vector's buffers must stay valid and unchanged while the column is used (the gathered
 * partitions own them); the value count must already be validated against the buffer lengths
 * ({@code io.npugather.block.ReceivedBlocks} does that for received blocks). Closing the column
 * releases nothing.
 */
public final class FixedWidthArrowColumn extends ColumnVector implements ArrowBackedColumn {
  private final FieldVector vector;
  private final int width;
  private final long validity;
  private final long data;
  private final int nullCount;
  private final long offsets;
  private final FixedWidthArrowColumn elements;

  private FixedWidthArrowColumn(DataType type, FieldVector vector) {
    super(type);
    this.vector = vector;
    this.nullCount = vector.getNullCount();
    this.validity = nullCount == 0 ? 0 : vector.getValidityBufferAddress();
    if (type instanceof ArrayType) {
      ListVector list = (ListVector) vector;
      this.width = 0;
      this.data = 0;
      this.offsets = list.getValueCount() == 0 ? 0 : list.getOffsetBufferAddress();
      this.elements =
          new FixedWidthArrowColumn(((ArrayType) type).elementType(), list.getDataVector());
    } else {
      this.width = FixedWidthType.of(type).width();
      this.data =
          vector.getValueCount() == 0 ? 0 : ((BaseFixedWidthVector) vector).getDataBufferAddress();
      this.offsets = 0;
      this.elements = null;
    }
  }

  /** True if a column of Spark type {@code t} is served by this class. */
  static boolean supports(DataType t) {
    return FixedWidthType.isFixedWidthColumn(t);
  }

  /**
   * The column for {@code vector} (holding Spark type {@code t}): this class where {@link
   * #supports} says so, else a {@link SharedArrowColumn} (Spark's {@link ArrowColumnVector},
   * leaving the vector open when closed).
   */
  static ColumnVector of(DataType t, FieldVector vector) {
    return supports(t) ? new FixedWidthArrowColumn(t, vector) : new SharedArrowColumn(vector);
  }

  /** The class {@link #of} returns for {@code t}. */
  static String columnClassName(DataType t) {
    return (supports(t) ? FixedWidthArrowColumn.class : SharedArrowColumn.class).getName();
  }

  /** Bytes per value (-1: boolean, one bit), 0 for an array column. */
  int width() {
    return width;
  }

  /** Address of the values (0 for an array column or an empty one). */
  long dataAddress() {
    return data;
  }

  /** Address of the validity bitmap, 0 when the column has no nulls. */
  long validityAddress() {
    return validity;
  }

  /** Address of an array column's int offsets (0 when empty). */
  long offsetsAddress() {
    return offsets;
  }

  /** An array column's elements, null for other columns. */
  FixedWidthArrowColumn elements() {
    return elements;
  }

  @Override
  public FieldVector getValueVector() {
    return vector;
  }

  @Override
  public void close() {}

  @Override
  public boolean hasNull() {
    return nullCount > 0;
  }

  @Override
  public int numNulls() {
    return nullCount;
  }

  @Override
  public boolean isNullAt(int rowId) {
    return nullCount != 0 && !ArrowBitmaps.isSet(validity, rowId);
  }

  @Override
  public boolean getBoolean(int rowId) {
    return ArrowBitmaps.isSet(data, rowId);
  }

  @Override
  public byte getByte(int rowId) {
    return Platform.getByte(null, data + rowId);
  }

  @Override
  public short getShort(int rowId) {
    return Platform.getShort(null, data + 2L * rowId);
  }

  @Override
  public int getInt(int rowId) {
    return Platform.getInt(null, data + 4L * rowId);
  }

  @Override
  public long getLong(int rowId) {
    return Platform.getLong(null, data + 8L * rowId);
  }

  @Override
  public float getFloat(int rowId) {
    return Platform.getFloat(null, data + 4L * rowId);
  }

  @Override
  public double getDouble(int rowId) {
    return Platform.getDouble(null, data + 8L * rowId);
  }

  @Override
  public byte[] getBytes(int rowId, int count) {
    if (width != 1) {
      return super.getBytes(rowId, count);
    }
    byte[] out = new byte[count];
    Platform.copyMemory(null, data + rowId, out, Platform.BYTE_ARRAY_OFFSET, count);
    return out;
  }

  @Override
  public short[] getShorts(int rowId, int count) {
    short[] out = new short[count];
    Platform.copyMemory(null, data + 2L * rowId, out, Platform.SHORT_ARRAY_OFFSET, 2L * count);
    return out;
  }

  @Override
  public int[] getInts(int rowId, int count) {
    int[] out = new int[count];
    Platform.copyMemory(null, data + 4L * rowId, out, Platform.INT_ARRAY_OFFSET, 4L * count);
    return out;
  }

  @Override
  public long[] getLongs(int rowId, int count) {
    long[] out = new long[count];
    Platform.copyMemory(null, data + 8L * rowId, out, Platform.LONG_ARRAY_OFFSET, 8L * count);
    return out;
  }

  @Override
  public float[] getFloats(int rowId, int count) {
    float[] out = new float[count];
    Platform.copyMemory(null, data + 4L * rowId, out, Platform.FLOAT_ARRAY_OFFSET, 4L * count);
    return out;
  }

  @Override
  public double[] getDoubles(int rowId, int count) {
    double[] out = new double[count];
    Platform.copyMemory(null, data + 8L * rowId, out, Platform.DOUBLE_ARRAY_OFFSET, 8L * count);
    return out;
  }

  @Override
  public ColumnarArray getArray(int rowId) {
    if (elements == null) {
      throw new UnsupportedOperationException(type.simpleString() + " column has no arrays");
    }
    int start = Platform.getInt(null, offsets + 4L * rowId);
    int end = Platform.getInt(null, offsets + 4L * rowId + 4);
    return new ColumnarArray(elements, start, end - start);
  }

  @Override
  public ColumnarMap getMap(int ordinal) {
    throw new UnsupportedOperationException(type.simpleString() + " column has no maps");
  }

  @Override
  public Decimal getDecimal(int rowId, int precision, int scale) {
    throw new UnsupportedOperationException(type.simpleString() + " column has no decimals");
  }

  @Override
  public UTF8String getUTF8String(int rowId) {
    throw new UnsupportedOperationException(type.simpleString() + " column has no strings");
  }

  @Override
  public byte[] getBinary(int rowId) {
    throw new UnsupportedOperationException(type.simpleString() + " column has no binary values");
  }

  /**
   * An array column's elements, all rows' one after another (child 0, as Spark's Arrow column has
   * it): {@code getChild(0).getFloats(0, n)} copies n elements at once.
   */
  @Override
  public ColumnVector getChild(int ordinal) {
    if (elements == null || ordinal != 0) {
      throw new UnsupportedOperationException(
          type.simpleString() + " column has no child " + ordinal);
    }
    return elements;
  }
}
