package io.npugather.spark.join;

import org.junit.jupiter.api.BeforeAll;

/** {@link ExecutorBroadcastJoinContract} on {@code local[2]}. */
class ExecutorBroadcastJoinOnTwoCoresTest extends ExecutorBroadcastJoinContract {
  @BeforeAll
  static void startSpark() {
    start("local[2]");
  }
}
