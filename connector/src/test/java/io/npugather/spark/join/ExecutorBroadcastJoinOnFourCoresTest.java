package io.npugather.spark.join;

import io.npugather.spark.testing.LocalSpark;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * {@link ExecutorBroadcastJoinContract} on {@code local[4]}: the build side gathered by 4 ranks.
 */
class ExecutorBroadcastJoinOnFourCoresTest extends ExecutorBroadcastJoinContract {
  @RegisterExtension static final LocalSpark SPARK = localSpark(4);
}
