package io.npugather.spark.arrow.read;

import org.apache.arrow.vector.ValueVector;
import org.apache.spark.sql.vectorized.ArrowColumnVector;

/**
 * Spark's {@link ArrowColumnVector} over a vector of the gathered output, which any number of
 * readers read, one after another or at once: closing it (Spark's columnar-to-row code closes every
 * batch it has read) leaves the vector to its owner.
 */
public final class SharedArrowColumn extends ArrowColumnVector {
  SharedArrowColumn(ValueVector vector) {
    super(vector);
  }

  /** The vector stays open: it belongs to the gathered output. */
  @Override
  public void close() {}

  @Override
  public void closeIfFreeable() {}
}
