package io.npugather.spark.connect;

import io.npugather.spark.AllGatherOptions;
import io.npugather.spark.NpuGather;
import java.io.IOException;
import java.util.Optional;
import org.apache.spark.connect.proto.Relation;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.connect.planner.SparkConnectPlanner;
import org.apache.spark.sql.connect.plugin.RelationPlugin;
import scala.jdk.javaapi.CollectionConverters;

/**
 * {@code allGatherOnNpu} for Spark Connect clients: turns an {@link AllGatherRelation} into the
 * same plan as {@link NpuGather#allGatherOnNpu(Dataset, java.util.Map)}, with the same options,
 * defaults ({@code spark.npugather.*} of the client's session) and errors. Registered on the
 * Connect server with
 *
 * <pre>
 * spark.connect.extensions.relation.classes  io.npugather.spark.connect.NpuGatherRelationPlugin
 * </pre>
 *
 * Relations of other plugins pass through untouched (an empty result).
 */
public final class NpuGatherRelationPlugin implements RelationPlugin {
  /** The class name to list in {@code spark.connect.extensions.relation.classes}. */
  public static final String CLASS_NAME = NpuGatherRelationPlugin.class.getName();

  @Override
  public Optional<LogicalPlan> transform(byte[] relation, SparkConnectPlanner planner) {
    Optional<AllGatherRelation> gather = AllGatherRelation.fromAny(relation);
    if (gather.isEmpty()) {
      return Optional.empty();
    }
    SparkSession session = planner.session();
    Relation input;
    try {
      input = Relation.parseFrom(gather.get().input());
    } catch (IOException e) { // protobuf's InvalidProtocolBufferException
      throw new IllegalArgumentException(
          "malformed npugather.connect.AllGatherOnNpu: its input is no spark.connect.Relation", e);
    }
    Dataset<Row> df =
        org.apache.spark.sql.classic.Dataset$.MODULE$.ofRows(
            session, planner.transformRelation(input));
    AllGatherOptions options =
        AllGatherOptions.fromConf(CollectionConverters.asJava(session.conf().getAll()))
            .with(gather.get().options());
    requireRootAmongRanks(options, df);
    Dataset<Row> gathered = NpuGather.allGatherOnNpu(df, options);
    return Optional.of(((org.apache.spark.sql.classic.Dataset<Row>) gathered).logicalPlan());
  }

  /**
   * rankRoot < rankSize, rankSize being the number of partitions when not set: the gather itself
   * checks it only when its job starts, and a Connect client learns the number of partitions only
   * from here.
   */
  private static void requireRootAmongRanks(AllGatherOptions options, Dataset<Row> df) {
    int root = options.rankRoot();
    if (root == 0) {
      return;
    }
    int size = options.rankSize() > 0 ? options.rankSize() : df.rdd().getNumPartitions();
    if (root >= size) {
      throw new IllegalArgumentException(
          AllGatherOptions.RANK_ROOT
              + " = "
              + root
              + " is invalid; allowed: 0 <= rankRoot < rankSize ("
              + size
              + ")");
    }
  }
}
