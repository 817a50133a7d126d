package io.npugather.spark;

import io.npugather.spark.testing.LocalSpark;
import org.junit.jupiter.api.extension.RegisterExtension;

/** {@link GatheredDataFrameContract} on {@code local[4]}: two ranks among four slots. */
class GatheredDataFrameOnFourCoresTest extends GatheredDataFrameContract {
  @RegisterExtension static final LocalSpark SPARK = localSpark(4);
}
