package io.npugather.bench;

import java.io.Serializable;
import java.util.Iterator;
import java.util.List;
import org.apache.spark.TaskContext;
import org.apache.spark.rdd.RDD;
import scala.Function1;
import scala.jdk.javaapi.CollectionConverters;
import scala.reflect.ClassTag$;

/** Barrier stages from Java: one task per partition, all started together. */
final class Barrier {
  private Barrier() {}

  /** A function of one partition (its index and rows) to one result. */
  @FunctionalInterface
  interface PartitionFunction<T, R> extends Serializable {
    R apply(int partition, Iterator<T> rows) throws Exception;
  }

  /** Runs {@code fn} on every partition of {@code rdd} in one barrier stage; results in order. */
  static <T, R> List<R> collect(RDD<T> rdd, Class<R> resultClass, PartitionFunction<T, R> fn) {
    Function1<scala.collection.Iterator<T>, scala.collection.Iterator<R>> perPartition =
        (Function1<scala.collection.Iterator<T>, scala.collection.Iterator<R>> & Serializable)
            rows -> {
              try {
                R result =
                    fn.apply(TaskContext.getPartitionId(), CollectionConverters.asJava(rows));
                return scala.collection.Iterator$.MODULE$.single(result);
              } catch (RuntimeException e) {
                throw e;
              } catch (Exception e) {
                throw new IllegalStateException(e);
              }
            };
    RDD<R> results =
        rdd.barrier().mapPartitions(perPartition, false, ClassTag$.MODULE$.apply(resultClass));
    return results.toJavaRDD().collect();
  }
}
