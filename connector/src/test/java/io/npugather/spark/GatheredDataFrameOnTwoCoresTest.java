package io.npugather.spark;

import io.npugather.spark.testing.LocalSpark;
import org.junit.jupiter.api.extension.RegisterExtension;

/** {@link GatheredDataFrameContract} on {@code local[2]}: two ranks, as many as the slots. */
class GatheredDataFrameOnTwoCoresTest extends GatheredDataFrameContract {
  @RegisterExtension static final LocalSpark SPARK = localSpark(2);
}
