package io.npugather.spark.output;

import java.util.Arrays;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.npugather.MapOutputWriteProcessor;
import org.apache.spark.scheduler.MapStatus;
import org.apache.spark.scheduler.MapStatus$;
import org.apache.spark.storage.BlockManager;
import org.apache.spark.storage.RDDBlockId;
import org.apache.spark.storage.StorageLevel;
import scala.Product2;
import scala.reflect.ClassTag$;

/**
 * The map side of a gather's stage boundary: instead of writing shuffle files, a rank's barrier
 * task puts its {@link GatheredOutput} into its executor's block manager, as it is (block {@code
 * rdd_<barrier rdd>_<rank>}, in memory, deserialized, reported to the driver), and reports a map
 * output that holds data for every reader partition, since every rank holds every row.
 */
public final class GatheredOutputWriter extends MapOutputWriteProcessor {
  private static final long serialVersionUID = 1L;

  private final int barrierRddId;

  /** For the map stage of barrier RDD {@code barrierRddId}. */
  public GatheredOutputWriter(int barrierRddId) {
    this.barrierRddId = barrierRddId;
  }

  /**
   * The block under which rank {@code rank}'s output of barrier RDD {@code barrierRddId} is kept.
   */
  static RDDBlockId blockId(int barrierRddId, int rank) {
    return new RDDBlockId(barrierRddId, rank);
  }

  @Override
  public MapStatus write(
      scala.collection.Iterator<Object> inputs,
      ShuffleDependency<?, ?, ?> dep,
      long mapId,
      int mapIndex,
      TaskContext context) {
    GatheredOutput output = (GatheredOutput) ((Product2<?, ?>) inputs.next())._2();
    try {
      BlockManager blocks = SparkEnv.get().blockManager();
      RDDBlockId id = blockId(barrierRddId, mapIndex);
      if (blocks.getStatus(id).isDefined()) {
        blocks.removeBlock(id, true); // an earlier run's output of this rank; waits for its readers
      }
      boolean put =
          blocks.putSingle(
              id,
              output,
              StorageLevel.MEMORY_ONLY(),
              true,
              ClassTag$.MODULE$.apply(GatheredOutput.class));
      if (!put) {
        throw new IllegalStateException(
            "allGatherOnNpu rank "
                + mapIndex
                + ": the executor's "
                + "block manager refused to keep the gathered output ("
                + output
                + "); its storage "
                + "memory is full (spark.memory.fraction, spark.memory.storageFraction)");
      }
      output.kept(mapId);
      long[] sizes = new long[dep.partitioner().numPartitions()];
      Arrays.fill(sizes, Math.max(1, output.bytes())); // a zero size would mean "no data here"
      return MapStatus$.MODULE$.apply(blocks.blockManagerId(), sizes, mapId, 0L);
    } finally {
      output.closeUnlessKept();
    }
  }
}
