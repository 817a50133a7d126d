package io.npugather.examples;

import java.io.IOException;
import java.util.SplittableRandom;
import org.apache.spark.SparkException;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.sql.AnalysisException;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * The example's tables of embeddings, {@code (id bigint, embedding array<float>)}: generated, read
 * from Parquet and checked, and the generated ones removed.
 */
final class EmbeddingTables {
  private EmbeddingTables() {}

  /** {@code n} rows {@code (id, embedding)}, each value uniform in [-1, 1), seeded per id. */
  static Dataset<Row> generate(SparkSession spark, long n, int dim, long seed, int partitions) {
    StructType schema =
        new StructType()
            .add("id", DataTypes.LongType, false)
            .add("embedding", DataTypes.createArrayType(DataTypes.FloatType, false), false);
    JavaRDD<Row> rows =
        spark
            .range(0, n, 1, partitions)
            .javaRDD()
            .map(
                id -> {
                  SplittableRandom random = new SplittableRandom(seed * 0x5851F42D4C957F2DL + id);
                  float[] embedding = new float[dim];
                  for (int j = 0; j < dim; j++) {
                    embedding[j] = (float) (random.nextDouble() * 2 - 1);
                  }
                  return RowFactory.create(id, embedding);
                });
    return spark.createDataFrame(rows, schema);
  }

  /** The (id, embedding) columns of a Parquet path; Spark's analysis errors name the option. */
  static Dataset<Row> readParquet(SparkSession spark, String option, String path) {
    try {
      return spark.read().parquet(path).select("id", "embedding");
    } catch (Exception e) {
      // Thrown undeclared by Scala: AnalysisException (a missing column), SparkException (a file
      // that is not Parquet, found when the schema is read).
      if (e instanceof AnalysisException || e instanceof SparkException) {
        throw new IllegalArgumentException(option + " = '" + path + "': " + e.getMessage(), e);
      }
      throw e;
    }
  }

  /** Refuses a table whose columns are not {@code id bigint, embedding array<float>}. */
  static void checkSchema(Dataset<Row> df, String path) {
    StructType schema = df.schema();
    boolean ok =
        schema.apply("id").dataType().equals(DataTypes.LongType)
            && schema.apply("embedding").dataType() instanceof ArrayType array
            && array.elementType().equals(DataTypes.FloatType);
    if (!ok) {
      throw new IllegalArgumentException(
          path
              + " has columns "
              + schema.simpleString()
              + "; expected: id bigint, embedding array<float>");
    }
  }

  /** Deletes a path of the job's file system; a failure is reported, not thrown. */
  static void remove(SparkSession spark, String path) {
    org.apache.hadoop.fs.Path p = new org.apache.hadoop.fs.Path(path);
    try {
      p.getFileSystem(spark.sparkContext().hadoopConfiguration()).delete(p, true);
    } catch (IOException e) {
      System.err.println("could not remove " + path + ": " + e.getMessage());
    }
  }
}
