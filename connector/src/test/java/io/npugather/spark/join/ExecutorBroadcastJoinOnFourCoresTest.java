package io.npugather.spark.join;

import org.junit.jupiter.api.BeforeAll;

/**
 * {@link ExecutorBroadcastJoinContract} on {@code local[4]}: the build side gathered by 4 ranks.
 */
class ExecutorBroadcastJoinOnFourCoresTest extends ExecutorBroadcastJoinContract {
  @BeforeAll
  static void startSpark() {
    start("local[4]");
  }
}
