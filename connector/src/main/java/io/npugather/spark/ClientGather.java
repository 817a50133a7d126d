package io.npugather.spark;

import java.util.Map;
import java.util.Objects;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.SparkSession;
import scala.jdk.javaapi.CollectionConverters;

/**
 * {@code allGatherOnNpu} as the server plans it for a client's query: the SQL function {@code
 * all_gather_on_npu} ({@link AllGatherTableFunction}) and a Spark Connect relation ({@link
 * io.npugather.spark.connect.NpuGatherRelationPlugin}). The plan of {@link
 * NpuGather#allGatherOnNpu(org.apache.spark.sql.Dataset, Map)}, with the same defaults and errors.
 */
public final class ClientGather {
  private ClientGather() {}

  /**
   * The gather of {@code input} with {@code options} ({@code npugather.*} keys, with or without
   * their prefix) over the session's {@code spark.npugather.*} defaults, checked as the classic API
   * checks them: when the gather is called.
   *
   * @throws IllegalArgumentException naming the option, its value and what is allowed
   */
  public static LogicalPlan plan(
      SparkSession session, LogicalPlan input, Map<String, String> options) {
    Objects.requireNonNull(session, "session");
    Objects.requireNonNull(input, "input");
    Objects.requireNonNull(options, "options");
    Dataset<Row> df = org.apache.spark.sql.classic.Dataset$.MODULE$.ofRows(session, input);
    AllGatherOptions resolved =
        AllGatherOptions.fromConf(CollectionConverters.asJava(session.conf().getAll()))
            .with(options);
    return ((Dataset<Row>) NpuGather.allGatherOnNpu(df, resolved)).logicalPlan();
  }
}
