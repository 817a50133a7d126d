package io.npugather.spark;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The ranks of a run by the executor (JVM) they run in, as every rank derives them from the same
 * rendezvous table: the ranks of one executor gather one output together, so the executor holds
 * every row once, not once per rank. Executors are numbered by their lowest rank, which is their
 * leader: the one rank of the executor that takes part in the collective, sending the blocks of all
 * its executor's ranks and receiving the other executors' blocks. The run's root rank is in the
 * executor of the communicator's root, whose leader takes the root info that rank made (it is the
 * same process).
 *
 * <p>Without sharing ({@link #eachRankAlone}) every rank is an executor of its own: the collective
 * runs over every rank, as it does for the device backends, whose every rank drives a device.
 */
final class ExecutorGroups {
  private final int[] executorOf; // rank -> executor
  private final int[][] ranksOf; // executor -> its ranks, ascending

  private ExecutorGroups(int[] executorOf, int[][] ranksOf) {
    this.executorOf = executorOf;
    this.ranksOf = ranksOf;
  }

  /** The ranks grouped by the process their entries name. */
  static ExecutorGroups byProcess(List<RankEntry> entries) {
    Map<String, List<Integer>> byProcess = new LinkedHashMap<>();
    for (int r = 0; r < entries.size(); r++) {
      byProcess.computeIfAbsent(entries.get(r).process(), p -> new ArrayList<>()).add(r);
    }
    int[] executorOf = new int[entries.size()];
    int[][] ranksOf = new int[byProcess.size()][];
    int e = 0;
    for (List<Integer> ranks : byProcess.values()) { // in order of first rank
      ranksOf[e] = ranks.stream().mapToInt(Integer::intValue).toArray();
      for (int r : ranksOf[e]) {
        executorOf[r] = e;
      }
      e++;
    }
    return new ExecutorGroups(executorOf, ranksOf);
  }

  /** Every rank a group of its own. */
  static ExecutorGroups eachRankAlone(int rankSize) {
    int[] executorOf = new int[rankSize];
    int[][] ranksOf = new int[rankSize][];
    for (int r = 0; r < rankSize; r++) {
      executorOf[r] = r;
      ranksOf[r] = new int[] {r};
    }
    return new ExecutorGroups(executorOf, ranksOf);
  }

  /** Number of executors: the size of the leaders' communicator. */
  int executorCount() {
    return ranksOf.length;
  }

  /** The executor of {@code rank}: its rank in the leaders' communicator. */
  int executorOf(int rank) {
    return executorOf[rank];
  }

  /** The ranks of executor {@code executor}, ascending. Returns a copy. */
  int[] ranksOf(int executor) {
    return ranksOf[executor].clone();
  }

  /** Every executor's ranks, ascending: the order in which each leader sends their blocks. */
  int[][] groups() {
    int[][] copy = new int[ranksOf.length][];
    for (int e = 0; e < ranksOf.length; e++) {
      copy[e] = ranksOf[e].clone();
    }
    return copy;
  }

  /** Whether {@code rank} is its executor's leader. */
  boolean isLeader(int rank) {
    return ranksOf[executorOf[rank]][0] == rank;
  }

  /** The leader of {@code rank}'s executor. */
  int leaderOf(int rank) {
    return ranksOf[executorOf[rank]][0];
  }
}
