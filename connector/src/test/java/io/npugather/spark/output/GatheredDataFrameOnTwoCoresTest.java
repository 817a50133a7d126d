package io.npugather.spark.output;

import org.junit.jupiter.api.BeforeAll;

/** {@link GatheredDataFrameContract} on {@code local[2]}: two ranks, as many as the slots. */
class GatheredDataFrameOnTwoCoresTest extends GatheredDataFrameContract {
  @BeforeAll
  static void startSpark() {
    start("local[2]");
  }
}
