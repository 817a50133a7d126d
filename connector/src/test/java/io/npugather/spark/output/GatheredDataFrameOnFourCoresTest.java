package io.npugather.spark.output;

import org.junit.jupiter.api.BeforeAll;

/** {@link GatheredDataFrameContract} on {@code local[4]}: two ranks among four slots. */
class GatheredDataFrameOnFourCoresTest extends GatheredDataFrameContract {
  @BeforeAll
  static void startSpark() {
    start("local[4]");
  }
}
