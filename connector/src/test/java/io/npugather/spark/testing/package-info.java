/**
 * What the connector's tests and the integration tests share (published as the connector's
 * test-jar): a local Spark session per test class ({@link io.npugather.spark.testing.LocalSpark}),
 * the rank-major check of a gather's output ({@link io.npugather.spark.testing.RankMajor}) and the
 * checks that nothing is left behind ({@link io.npugather.spark.testing.GatherLeaks}).
 */
package io.npugather.spark.testing;
