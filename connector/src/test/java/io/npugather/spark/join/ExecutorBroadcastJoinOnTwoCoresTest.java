package io.npugather.spark.join;

import io.npugather.spark.testing.LocalSpark;
import org.junit.jupiter.api.extension.RegisterExtension;

/** {@link ExecutorBroadcastJoinContract} on {@code local[2]}. */
class ExecutorBroadcastJoinOnTwoCoresTest extends ExecutorBroadcastJoinContract {
  @RegisterExtension static final LocalSpark SPARK = localSpark(2);
}
