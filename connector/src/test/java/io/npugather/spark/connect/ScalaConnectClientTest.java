package io.npugather.spark.connect;

import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.spark_partition_id;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.spark.NpuGather;
import io.npugather.spark.implicits;
import io.npugather.spark.testing.LocalSpark;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.connect.service.SparkConnectService;
import org.apache.spark.sql.connect.service.SparkConnectService$;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;
import scala.Option;

/**
 * {@code allGatherOnNpu} from Spark's Scala/Java Connect client: {@code NpuGather.allGatherOnNpu}
 * on a Connect DataFrame sends the plugin's relation, and SQL sends {@code all_gather_on_npu}, to a
 * Connect server in this JVM (local[2], backend host); the same rows as the classic API on every
 * rank, and its errors.
 */
@Timeout(300)
class ScalaConnectClientTest {
  private static SparkSession server;
  private static org.apache.spark.sql.connect.SparkSession client;

  /** The Connect server's session; its service binds an ephemeral port. */
  @RegisterExtension
  static final LocalSpark SERVER =
      LocalSpark.cores(2)
          .conf("spark.connect.grpc.binding.port", "0")
          .conf("spark.connect.extensions.relation.classes", NpuGatherRelationPlugin.CLASS_NAME)
          .withExtensions();

  @BeforeAll
  static void startServerAndClient() {
    server = SERVER.session();
    SparkConnectService.start(server.sparkContext());
    int port = SparkConnectService$.MODULE$.bindingAddress().getPort();
    client =
        org.apache.spark.sql.connect.SparkSession.builder()
            .remote("sc://localhost:" + port)
            .create();
  }

  @AfterAll
  static void stopServerAndClient() {
    try {
      if (client != null) {
        client.close();
      }
    } finally {
      SparkConnectService.stop(Option.empty(), Option.empty());
    }
  }

  /** Each rank's rows (= output partition), in their order there. */
  private static Map<Integer, List<Row>> byRank(Dataset<Row> gathered) {
    Map<Integer, List<Row>> ranks = new TreeMap<>();
    for (Row row : gathered.select(col("*"), spark_partition_id().as("_rank")).collectAsList()) {
      List<Object> values = new ArrayList<>();
      for (int i = 0; i < row.size() - 1; i++) {
        values.add(row.get(i));
      }
      ranks
          .computeIfAbsent(row.getInt(row.size() - 1), rank -> new ArrayList<>())
          .add(org.apache.spark.sql.RowFactory.create(values.toArray()));
    }
    return ranks;
  }

  /** Random values over 2 partitions, built the same way in either session. */
  private static Dataset<Row> items(SparkSession session, long seed) {
    Random random = new Random(seed);
    StringBuilder values = new StringBuilder();
    for (int n = 0; n < 40; n++) {
      values
          .append(n == 0 ? "" : ", ")
          .append(
              String.format(
                  "(%d, %s, 's%dé')",
                  n,
                  random.nextInt(5) == 0 ? "null" : Long.toString(random.nextLong()),
                  random.nextInt(1000)));
    }
    return session
        .sql("SELECT * FROM VALUES " + values + " AS t(id, v, name)")
        .repartitionByRange(2, col("id"));
  }

  @Test
  void aConnectDataFrameIsGatheredByTheServerWithTheClassicApisRows() {
    Dataset<Row> remote = items(client, 1);
    assertTrue(ConnectDataFrames.isConnect(remote));

    Dataset<Row> gathered = NpuGather.allGatherOnNpu(remote, Map.of("timeout", "60s"));

    assertTrue(ConnectDataFrames.isConnect(gathered));
    assertEquals(List.of("source_rank", "id", "v", "name"), List.of(gathered.columns()));
    Map<Integer, List<Row>> expected =
        byRank(NpuGather.allGatherOnNpu(items(server, 1), Map.of("timeout", "60s")));
    assertEquals(List.of(0, 1), List.copyOf(expected.keySet()));
    assertEquals(40, expected.get(0).size());
    assertEquals(expected, byRank(gathered));
    assertEquals(expected, byRank(NpuGather.allGatherOnNpu(remote)));
  }

  @Test
  void theScalaImplicitsGatherAConnectDataFrame() {
    Dataset<Row> gathered = new implicits.NpuGatherDataFrameOps(items(client, 3)).allGatherOnNpu();

    assertTrue(ConnectDataFrames.isConnect(gathered));
    assertEquals(byRank(NpuGather.allGatherOnNpu(items(server, 3))), byRank(gathered));

    // A Dataset[T] keeps its type: every rank holds every element, rank-major.
    Dataset<Long> typed =
        implicits.NpuGatherDatasetOps(client.range(0, 6, 1, 2))
            .allGatherOnNpu(scala.collection.immutable.Map$.MODULE$.empty());
    assertTrue(ConnectDataFrames.isConnect(typed));
    assertEquals(List.of(0L, 1L, 2L, 3L, 4L, 5L, 0L, 1L, 2L, 3L, 4L, 5L), typed.collectAsList());
  }

  @Test
  void sqlFromTheClientCallsTheTableFunction() {
    items(client, 2).createOrReplaceTempView("items");
    try {
      Dataset<Row> gathered =
          client.sql("SELECT * FROM all_gather_on_npu(TABLE(items), sourceRankColumn => 'r')");
      assertEquals(List.of("r", "id", "v", "name"), List.of(gathered.columns()));
      assertEquals(
          byRank(NpuGather.allGatherOnNpu(items(server, 2))),
          byRank(gathered.withColumnRenamed("r", "source_rank")));
    } finally {
      client.catalog().dropTempView("items");
    }
  }

  @Test
  void aRefusedOptionFailsTheCallWithTheClassicApisMessage() {
    Dataset<Row> remote = client.range(0, 4, 1, 2).toDF();
    String expected =
        assertThrows(
                IllegalArgumentException.class,
                () ->
                    NpuGather.allGatherOnNpu(
                        server.range(0, 4, 1, 2).toDF(), Map.of("timeout", "soon")))
            .getMessage();

    Exception refused =
        assertThrows(
            Exception.class, () -> NpuGather.allGatherOnNpu(remote, Map.of("timeout", "soon")));

    assertTrue(refused.getMessage().contains(expected), refused.getMessage());
    assertThrows(
        IllegalArgumentException.class,
        () -> NpuGather.allGatherOnNpu(remote, io.npugather.spark.AllGatherOptions.defaults()));
  }
}
