package io.npugather.bench;

import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;

/**
 * One measured configuration on the driver: the cached, materialised input ({@code ranks}
 * partitions of {@code rowsPerPartition} rows of {@code shape}).
 */
record BenchInput(
    SparkSession spark, Dataset<Row> data, Shape shape, int ranks, long rowsPerPartition) {

  JavaSparkContext jsc() {
    return JavaSparkContext.fromSparkContext(spark.sparkContext());
  }

  /** Payload bytes of one input partition. */
  long partitionBytes() {
    return rowsPerPartition * shape.bytesPerRow();
  }
}
