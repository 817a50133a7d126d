package io.npugather.spark.connect;

import io.npugather.spark.ClientGather;
import io.npugather.spark.CoreClasspath;
import io.npugather.spark.NpuGather;
import java.io.IOException;
import java.util.Optional;
import org.apache.spark.connect.proto.Relation;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.connect.planner.SparkConnectPlanner;
import org.apache.spark.sql.connect.plugin.RelationPlugin;

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
 * Relations of other plugins pass through untouched (an empty result). The SQL function {@code
 * all_gather_on_npu} ({@link io.npugather.spark.AllGatherTableFunction}) builds the same plan.
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
    CoreClasspath.require();
    SparkSession session = planner.session();
    Relation input;
    try {
      input = Relation.parseFrom(gather.get().input());
    } catch (IOException e) { // protobuf's InvalidProtocolBufferException
      throw new IllegalArgumentException(
          "malformed npugather.connect.AllGatherOnNpu: its input is no spark.connect.Relation", e);
    }
    return Optional.of(
        ClientGather.plan(session, planner.transformRelation(input), gather.get().options()));
  }
}
