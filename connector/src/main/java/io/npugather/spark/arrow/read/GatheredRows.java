package io.npugather.spark.arrow.read;

import io.npugather.spark.arrow.ArrowBitmaps;
import java.util.Arrays;
import java.util.Iterator;
import java.util.NoSuchElementException;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeArrayData;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.array.ByteArrayMethods;
import org.apache.spark.unsafe.bitset.BitSetMethods;

/**
 * The rows of gathered batches as Spark {@link UnsafeRow}s: what a row-based operator after the
 * gather reads. Rows are written a chunk at a time, column by column, straight from the Arrow
 * buffers into one reused on-heap buffer: per value one load and one store, an array of fixed-width
 * elements in one copy. (Spark's ColumnarToRow calls the column getters value by value and copies
 * an array into its row element by element.) The bytes are those of Spark's {@code
 * UnsafeProjection} over the same batch.
 *
 * <p>Each batch holds the source-rank column (a constant int) and then columns that {@link
 * #supports} accepts, read through {@link FixedWidthArrowColumn}. Every {@code next()} returns the
 * same {@link UnsafeRow} object, valid until the following call: Spark's contract for row iterators
 * (an operator that keeps rows copies them). Holds no more than one chunk of rows on the heap. Not
 * thread-safe.
 */
public final class GatheredRows implements Iterator<InternalRow> {
  /** Rows per chunk, at most. */
  static final int CHUNK_ROWS = 4096;

  /**
   * Bytes per chunk, about: a chunk ends before the row that would pass it (one row always fits).
   */
  static final int CHUNK_BYTES = 1 << 20;

  private static final long BASE = Platform.BYTE_ARRAY_OFFSET;

  private final Iterator<ColumnarBatch> batches;
  private final int numFields;
  private final int bitSetWidth;
  private final int fixedSize;
  private final int chunkRows;
  private final int chunkBytes;
  private final UnsafeRow row;
  private final int[] rowStart;
  private final int[] rowEnd;
  private final long[] rowSize;
  private byte[] buffer = new byte[0];
  private ColumnarBatch batch;
  private int batchRows;
  private int nextInBatch;
  private int rowsInChunk;
  private int nextInChunk;

  /**
   * @param batches gathered batches: the source-rank column, then the columns of {@code input}
   * @param input the gathered columns' schema (without the source-rank column); {@link #supports}
   *     must accept it
   */
  public GatheredRows(Iterator<ColumnarBatch> batches, StructType input) {
    this(batches, input, CHUNK_ROWS, CHUNK_BYTES);
  }

  GatheredRows(Iterator<ColumnarBatch> batches, StructType input, int chunkRows, int chunkBytes) {
    if (!supports(input)) {
      throw new IllegalArgumentException(
          "GatheredRows reads columns of fixed-width types and "
              + "arrays of them; the schema is "
              + input.simpleString());
    }
    this.batches = batches;
    this.numFields = input.fields().length + 1;
    this.bitSetWidth = UnsafeRow.calculateBitSetWidthInBytes(numFields);
    this.fixedSize = bitSetWidth + 8 * numFields;
    this.chunkRows = chunkRows;
    this.chunkBytes = chunkBytes;
    this.row = new UnsafeRow(numFields);
    this.rowStart = new int[chunkRows + 1];
    this.rowEnd = new int[chunkRows];
    this.rowSize = new long[chunkRows];
  }

  /** True if every column of {@code input} is of a type this class writes. */
  public static boolean supports(StructType input) {
    for (StructField f : input.fields()) {
      if (!FixedWidthArrowColumn.supports(f.dataType())) {
        return false;
      }
    }
    return true;
  }

  @Override
  public boolean hasNext() {
    while (nextInChunk == rowsInChunk) {
      if (batch != null && nextInBatch < batchRows) {
        fillChunk();
      } else if (batches.hasNext()) {
        batch = batches.next();
        batchRows = batch.numRows();
        nextInBatch = 0;
      } else {
        batch = null;
        return false;
      }
    }
    return true;
  }

  @Override
  public InternalRow next() {
    if (!hasNext()) {
      throw new NoSuchElementException();
    }
    int i = nextInChunk++;
    row.pointTo(buffer, BASE + rowStart[i], rowStart[i + 1] - rowStart[i]);
    return row;
  }

  /** Writes the next rows of the batch into the buffer. */
  private void fillChunk() {
    int first = nextInBatch;
    int candidates = Math.min(chunkRows, batchRows - first);
    // Row sizes: the fixed part, plus every non-null array.
    Arrays.fill(rowSize, 0, candidates, fixedSize);
    for (int c = 1; c < numFields; c++) {
      FixedWidthArrowColumn col = (FixedWidthArrowColumn) batch.column(c);
      if (col.elements() != null) {
        addArraySizes(col, first, candidates);
      }
    }
    int n = 0;
    long bytes = 0;
    while (n < candidates && (n == 0 || bytes + rowSize[n] <= chunkBytes)) {
      rowStart[n] = (int) bytes;
      bytes += rowSize[n];
      n++;
    }
    if (bytes > Integer.MAX_VALUE - 16) {
      throw new IllegalStateException(
          "a gathered row of " + bytes + " bytes is larger than a " + "Spark row can be");
    }
    rowStart[n] = (int) bytes;
    if (buffer.length < bytes) {
      buffer =
          new byte[(int) Math.max(bytes, Math.min(2L * buffer.length, Integer.MAX_VALUE - 16))];
    }
    for (int k = 0; k < n; k++) {
      rowEnd[k] = rowStart[k] + fixedSize;
      for (int w = 0; w < bitSetWidth; w += 8) {
        Platform.putLong(buffer, BASE + rowStart[k] + w, 0L);
      }
    }
    writeSourceRank(n);
    for (int c = 1; c < numFields; c++) {
      FixedWidthArrowColumn col = (FixedWidthArrowColumn) batch.column(c);
      if (col.elements() != null) {
        writeArrays(c, col, first, n);
      } else {
        writeValues(c, col, first, n);
      }
    }
    rowsInChunk = n;
    nextInChunk = 0;
    nextInBatch += n;
  }

  private long slot(int k, int ordinal) {
    return BASE + rowStart[k] + bitSetWidth + 8L * ordinal;
  }

  private void writeSourceRank(int n) {
    int rank = batch.column(0).getInt(0);
    for (int k = 0; k < n; k++) {
      long slot = slot(k, 0);
      Platform.putLong(buffer, slot, 0L);
      Platform.putInt(buffer, slot, rank);
    }
  }

  private static boolean isNull(long validity, int index) {
    return !ArrowBitmaps.isSet(validity, index);
  }

  private void writeValues(int ordinal, FixedWidthArrowColumn col, int first, int n) {
    long data = col.dataAddress();
    long validity = col.validityAddress();
    int width = col.width();
    for (int k = 0; k < n; k++) {
      long slot = slot(k, ordinal);
      int r = first + k;
      Platform.putLong(buffer, slot, 0L);
      if (validity != 0 && isNull(validity, r)) {
        BitSetMethods.set(buffer, BASE + rowStart[k], ordinal);
        continue;
      }
      switch (width) {
        case 8:
          Platform.putLong(buffer, slot, Platform.getLong(null, data + 8L * r));
          break;
        case 4:
          Platform.putInt(buffer, slot, Platform.getInt(null, data + 4L * r));
          break;
        case 2:
          Platform.putShort(buffer, slot, Platform.getShort(null, data + 2L * r));
          break;
        case 1:
          Platform.putByte(buffer, slot, Platform.getByte(null, data + r));
          break;
        default: // boolean: one bit
          Platform.putBoolean(buffer, slot, ArrowBitmaps.isSet(data, r));
      }
    }
  }

  private static int elementSize(FixedWidthArrowColumn elements) {
    return Math.max(elements.width(), 1); // a boolean element takes one byte
  }

  private static long arrayBytes(int elements, int elementSize) {
    return UnsafeArrayData.calculateHeaderPortionInBytes(elements)
        + ByteArrayMethods.roundNumberOfBytesToNearestWord((long) elements * elementSize);
  }

  private void addArraySizes(FixedWidthArrowColumn col, int first, int n) {
    long offsets = col.offsetsAddress();
    long validity = col.validityAddress();
    int elementSize = elementSize(col.elements());
    for (int k = 0; k < n; k++) {
      int r = first + k;
      if (validity == 0 || !isNull(validity, r)) {
        int elements =
            Platform.getInt(null, offsets + 4L * r + 4) - Platform.getInt(null, offsets + 4L * r);
        rowSize[k] += arrayBytes(elements, elementSize);
      }
    }
  }

  /** Each row's array after the row's fixed part and earlier arrays, as UnsafeArrayData. */
  private void writeArrays(int ordinal, FixedWidthArrowColumn col, int first, int n) {
    long offsets = col.offsetsAddress();
    long validity = col.validityAddress();
    FixedWidthArrowColumn elements = col.elements();
    long data = elements.dataAddress();
    long elementValidity = elements.validityAddress();
    int width = elements.width();
    int elementSize = elementSize(elements);
    for (int k = 0; k < n; k++) {
      long slot = slot(k, ordinal);
      int r = first + k;
      if (validity != 0 && isNull(validity, r)) {
        Platform.putLong(buffer, slot, 0L);
        BitSetMethods.set(buffer, BASE + rowStart[k], ordinal);
        continue;
      }
      int start = Platform.getInt(null, offsets + 4L * r);
      int count = Platform.getInt(null, offsets + 4L * r + 4) - start;
      int header = UnsafeArrayData.calculateHeaderPortionInBytes(count);
      long valueBytes = (long) count * elementSize;
      int size = (int) arrayBytes(count, elementSize);
      long at = BASE + rowEnd[k];
      Platform.putLong(buffer, at, count);
      for (int w = 8; w < header; w += 8) {
        Platform.putLong(buffer, at + w, 0L);
      }
      long values = at + header;
      if (size > header + valueBytes) {
        Platform.putLong(buffer, at + size - 8, 0L); // the padding after the last value
      }
      if (width > 0) {
        Platform.copyMemory(null, data + (long) width * start, buffer, values, valueBytes);
      } else {
        for (int j = 0; j < count; j++) {
          Platform.putBoolean(buffer, values + j, ArrowBitmaps.isSet(data, start + j));
        }
      }
      if (elementValidity != 0) {
        for (int j = 0; j < count; j++) {
          if (isNull(elementValidity, start + j)) {
            BitSetMethods.set(buffer, at + 8, j);
            Platform.setMemory(buffer, values + (long) j * elementSize, elementSize, (byte) 0);
          }
        }
      }
      Platform.putLong(buffer, slot, ((long) (rowEnd[k] - rowStart[k]) << 32) | size);
      rowEnd[k] += size;
    }
  }
}
