package org.apache.spark.npugather

import org.apache.spark.shuffle.ShuffleWriteProcessor
import org.apache.spark.util.KnownSizeEstimation

/** Spark's hooks that the gathered output plugs into, which Spark keeps inside its own packages:
  * named here so that the connector's Java classes can extend them.
  */
/** Writes a map task's output its own way; Spark's [[ShuffleWriteProcessor]]. */
abstract class MapOutputWriteProcessor extends ShuffleWriteProcessor

/** An object that tells Spark's size estimator its size; Spark's [[KnownSizeEstimation]]. */
trait KnownSize extends KnownSizeEstimation
