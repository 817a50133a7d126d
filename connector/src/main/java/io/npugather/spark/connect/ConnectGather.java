package io.npugather.spark.connect;

import java.io.IOException;
import java.util.Map;
import java.util.Objects;
import org.apache.spark.connect.proto.Relation;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import scala.runtime.BoxedUnit;

/**
 * {@code allGatherOnNpu} on a DataFrame of Spark's Scala/Java Connect client: sends the {@link
 * AllGatherRelation} of the DataFrame's plan, which the server's {@link NpuGatherRelationPlugin}
 * plans. {@code NpuGather.allGatherOnNpu(df, options)} and the Scala implicits come here for a
 * Connect DataFrame; on a classpath with the Connect client and without Spark's classic API
 * (spark-connect-client-jvm), call it, or the implicits, directly. It uses no class of the classic
 * API and names no protobuf class (Spark's jars relocate protobuf, each under a name of its own).
 */
public final class ConnectGather {
  private ConnectGather() {}

  /**
   * The gathered DataFrame. The server plans it at once (its schema is asked for), so that what the
   * classic API refuses at the call is refused here too, with the server's message.
   *
   * @param options {@code npugather.*} keys, over the server session's {@code spark.npugather.*}
   *     defaults
   */
  public static Dataset<Row> allGatherOnNpu(Dataset<Row> df, Map<String, String> options) {
    Objects.requireNonNull(df, "df");
    Objects.requireNonNull(options, "options");
    if (!ConnectDataFrames.isConnect(df)) {
      throw new IllegalArgumentException(
          "df is a DataFrame of "
              + df.getClass().getName()
              + ", not of Spark Connect; NpuGather.allGatherOnNpu takes it");
    }
    org.apache.spark.sql.connect.Dataset<Row> connect =
        (org.apache.spark.sql.connect.Dataset<Row>) df;
    byte[] input = connect.plan().getRoot().toByteArray();
    Relation gather;
    try {
      gather = Relation.parseFrom(new AllGatherRelation(input, options).toRelation());
    } catch (IOException e) { // protobuf's InvalidProtocolBufferException: a bug here, not input
      throw new IllegalStateException("the gather's relation does not parse", e);
    }
    Dataset<Row> gathered =
        connect
            .sparkSession()
            .newDataFrame(
                builder -> {
                  builder.mergeFrom(gather);
                  return BoxedUnit.UNIT;
                });
    gathered.schema();
    return gathered;
  }
}
