package io.npugather.spark.arrow;

import org.apache.arrow.vector.FieldVector;

/** A Spark column that reads an Arrow vector in place: writers may append that vector whole. */
public interface ArrowBackedColumn {
  /** The Arrow vector read. */
  FieldVector getValueVector();
}
