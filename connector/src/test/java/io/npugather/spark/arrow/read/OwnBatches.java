package io.npugather.spark.arrow.read;

import io.npugather.block.LocalBlock;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/** A written block as the batch its own rank reads, for tests outside this package. */
public final class OwnBatches {
  private OwnBatches() {}

  /**
   * {@code block}'s vectors (of Spark schema {@code schema}) as rank {@code sourceRank}'s batch.
   */
  public static ColumnarBatch of(LocalBlock block, StructType schema, int sourceRank) {
    VectorSchemaRoot root = block.root();
    return GatheredPartitions.batch(sourceRank, root, schema);
  }
}
