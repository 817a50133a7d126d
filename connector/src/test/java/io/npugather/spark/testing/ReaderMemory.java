package io.npugather.spark.testing;

import io.npugather.spark.memory.GatherMemory;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;

/** The Arrow memory the readers of a gather's output hold: what output sharing saves. */
public final class ReaderMemory {
  private ReaderMemory() {}

  /**
   * Reads every partition of {@code gathered} to its end and returns, by process id, the most
   * gather Arrow memory ({@link GatherMemory#allocatedBytes}) a task of that process saw once it
   * had read its rows (0 for an empty partition).
   */
  public static Map<Long, Long> byProcess(Dataset<Row> gathered) {
    List<long[]> seen =
        gathered
            .javaRDD()
            .mapPartitions(
                rows -> {
                  long count = 0;
                  while (rows.hasNext()) {
                    rows.next();
                    count++;
                  }
                  long bytes = count == 0 ? 0 : GatherMemory.allocatedBytes();
                  return List.of(new long[] {ProcessHandle.current().pid(), bytes}).iterator();
                })
            .collect();
    Map<Long, Long> byPid = new TreeMap<>();
    for (long[] s : seen) {
      byPid.merge(s[0], s[1], Math::max);
    }
    return byPid;
  }
}
