package io.npugather.bench;

import java.util.Iterator;
import java.util.List;
import org.apache.spark.Partitioner;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.types.StructType;
import scala.Tuple2;

/**
 * Replication through a shuffle: every row is emitted once per target rank and a partitioner that
 * maps target t to partition t sends it there. (Hash partitioning on the target, i.e. {@code
 * repartition(N, col("target"))}, is not a replacement: targets collide; see {@link
 * HashRepartitionCheck}.)
 */
final class ShuffleMethod implements GatherMethod {
  @Override
  public String name() {
    return "shuffle";
  }

  @Override
  public Outcome run(BenchInput input) {
    int ranks = input.ranks();
    Shape shape = input.shape();
    StructType schema = input.data().schema();
    List<long[]> digests =
        input
            .data()
            .queryExecution()
            .toRdd()
            .toJavaRDD()
            .mapPartitionsToPair(rows -> replicate(rows, schema, ranks))
            .partitionBy(new TargetPartitioner(ranks))
            .mapPartitionsWithIndex(
                (partition, pairs) -> {
                  long count = 0;
                  long checksum = 0;
                  while (pairs.hasNext()) {
                    Tuple2<Integer, UnsafeRow> pair = pairs.next();
                    if (pair._1() != partition) {
                      throw new IllegalStateException(
                          "row for target " + pair._1() + " arrived in partition " + partition);
                    }
                    checksum += shape.hash(pair._2(), 0);
                    count++;
                  }
                  return List.of(Outcome.digest(partition, count, checksum)).iterator();
                },
                false)
            .collect();
    return Outcome.of(digests);
  }

  /** Every row, copied once, paired with each target 0..ranks-1. */
  private static Iterator<Tuple2<Integer, UnsafeRow>> replicate(
      Iterator<InternalRow> rows, StructType schema, int ranks) {
    UnsafeProjection toUnsafe = UnsafeProjection.create(schema);
    return new Iterator<>() {
      private UnsafeRow current;
      private int target = ranks;

      @Override
      public boolean hasNext() {
        return target < ranks || rows.hasNext();
      }

      @Override
      public Tuple2<Integer, UnsafeRow> next() {
        if (target == ranks) {
          InternalRow row = rows.next();
          current = row instanceof UnsafeRow unsafe ? unsafe.copy() : toUnsafe.apply(row).copy();
          target = 0;
        }
        return new Tuple2<>(target++, current);
      }
    };
  }

  /** Key t (an Integer in 0..n-1) to partition t. */
  static final class TargetPartitioner extends Partitioner {
    private static final long serialVersionUID = 1L;
    private final int partitions;

    TargetPartitioner(int partitions) {
      this.partitions = partitions;
    }

    @Override
    public int numPartitions() {
      return partitions;
    }

    @Override
    public int getPartition(Object key) {
      return (Integer) key;
    }

    @Override
    public boolean equals(Object other) {
      return other instanceof TargetPartitioner that && that.partitions == partitions;
    }

    @Override
    public int hashCode() {
      return partitions;
    }
  }
}
