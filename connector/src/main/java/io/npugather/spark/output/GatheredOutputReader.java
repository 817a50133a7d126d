package io.npugather.spark.output;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.shuffle.FetchFailedException;
import org.apache.spark.storage.BlockId;
import org.apache.spark.storage.BlockManager;
import org.apache.spark.storage.BlockManagerId;
import org.apache.spark.storage.BlockResult;
import org.apache.spark.storage.RDDBlockId;
import org.apache.spark.storage.ShuffleBlockId;
import org.apache.spark.util.TaskCompletionListener;
import scala.Option;
import scala.Tuple2;
import scala.Tuple3;
import scala.collection.Iterator;
import scala.collection.Seq;

/**
 * The reduce side of a gather's stage boundary: a later stage's task finds a rank's {@link
 * GatheredOutput} in its own executor and reads it in place, under the block's read lock, which it
 * holds until the task ends (so the output is never released under it).
 *
 * <p>Every rank's output holds every row, so reader partition r takes rank r's output when its
 * executor has it and any other rank's current output of the same gather otherwise. An executor
 * that has none (it ran no rank, or the output was released) fails the task with a fetch failure:
 * Spark then re-runs the gather, as it re-runs a lost shuffle map output.
 */
public final class GatheredOutputReader {
  private GatheredOutputReader() {}

  /**
   * Any rank's output of barrier RDD {@code barrierRddId} that this executor keeps, read-locked
   * until {@code context} ends, or null when it keeps none. Reads only this executor's blocks: for
   * readers outside the gather's shuffle (an executor-side build side), where a fetch failure would
   * name a shuffle their stage does not depend on.
   */
  public static GatheredOutput openAnyLocal(int barrierRddId, int rankSize, TaskContext context) {
    BlockManager blocks = SparkEnv.get().blockManager();
    for (int rank = 0; rank < rankSize; rank++) {
      RDDBlockId id = GatheredOutputWriter.blockId(barrierRddId, rank);
      Option<BlockResult> block = blocks.getLocalValues(id);
      if (block.isDefined()) {
        GatheredOutput output = (GatheredOutput) block.get().data().next();
        TaskCompletionListener release = ctx -> blocks.releaseLock(id, Option.empty());
        context.addTaskCompletionListener(release);
        return output;
      }
    }
    return null;
  }

  /** Reader partition {@code partition}'s output, read-locked until {@code context} ends. */
  public static GatheredOutput open(
      int barrierRddId, int shuffleId, int rankSize, int partition, TaskContext context)
      throws FetchFailedException {
    BlockManager blocks = SparkEnv.get().blockManager();
    BlockManagerId here = blocks.blockManagerId();
    // The map outputs the driver holds now: (rank, map task) here, rank `partition` first.
    Iterator<Tuple2<BlockManagerId, Seq<Tuple3<BlockId, Object, Object>>>> statuses =
        SparkEnv.get()
            .mapOutputTracker()
            .getMapSizesByExecutorId(shuffleId, 0, rankSize, partition, partition + 1);
    List<long[]> local = new ArrayList<>();
    BlockManagerId ownerOfPartition = null;
    long mapIdOfPartition = -1;
    while (statuses.hasNext()) {
      Tuple2<BlockManagerId, Seq<Tuple3<BlockId, Object, Object>>> at = statuses.next();
      Iterator<Tuple3<BlockId, Object, Object>> outputs = at._2().iterator();
      while (outputs.hasNext()) {
        Tuple3<BlockId, Object, Object> output = outputs.next();
        long mapId = ((ShuffleBlockId) output._1()).mapId();
        int rank = (Integer) output._3();
        if (rank == partition) {
          ownerOfPartition = at._1();
          mapIdOfPartition = mapId;
        }
        if (at._1().equals(here)) {
          long[] candidate = {rank, mapId};
          if (rank == partition) {
            local.add(0, candidate);
          } else {
            local.add(candidate);
          }
        }
      }
    }
    for (long[] candidate : local) {
      RDDBlockId id = GatheredOutputWriter.blockId(barrierRddId, (int) candidate[0]);
      Option<BlockResult> block = blocks.getLocalValues(id);
      if (block.isEmpty()) {
        continue;
      }
      // One value; reading no further keeps the read lock, released when the task ends.
      GatheredOutput output = (GatheredOutput) block.get().data().next();
      if (output.mapTaskId() == candidate[1]) {
        TaskCompletionListener release = ctx -> blocks.releaseLock(id, Option.empty());
        context.addTaskCompletionListener(release);
        return output;
      }
      blocks.releaseLock(id, Option.empty()); // an earlier run's output of that rank
    }
    throw new FetchFailedException(
        ownerOfPartition == null ? here : ownerOfPartition,
        shuffleId,
        mapIdOfPartition,
        partition,
        partition,
        "allGatherOnNpu: executor "
            + here.executorId()
            + " holds no current gathered output of shuffle "
            + shuffleId
            + " for partition "
            + partition
            + " (it ran no rank of the gather, or the output was released); Spark "
            + "re-runs the gather",
        null);
  }
}
