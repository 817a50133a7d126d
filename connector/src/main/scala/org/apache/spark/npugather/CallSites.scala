package org.apache.spark.npugather

import org.apache.spark.SparkContext
import org.apache.spark.util.CallSite

/** Names what runs in Spark's UI: an RDD takes the thread's call site when it is made, and a stage
  * is named after its last RDD's.
  */
object CallSites {

  /** Runs `body` with `text` as the thread's call site, then restores the caller's. */
  def withShortForm[T](sc: SparkContext, text: String)(body: => T): T = {
    val short = sc.getLocalProperty(CallSite.SHORT_FORM)
    val long = sc.getLocalProperty(CallSite.LONG_FORM)
    sc.setLocalProperty(CallSite.SHORT_FORM, text)
    sc.setLocalProperty(CallSite.LONG_FORM, text)
    try body
    finally {
      sc.setLocalProperty(CallSite.SHORT_FORM, short)
      sc.setLocalProperty(CallSite.LONG_FORM, long)
    }
  }

  /** Runs `body` with `text` as the description of the jobs it submits, unless the caller gave them
    * one (`SparkContext.setJobDescription`); then restores the caller's.
    */
  def withJobDescription[T](sc: SparkContext, text: String)(body: => T): T = {
    val callers = sc.getLocalProperty(SparkContext.SPARK_JOB_DESCRIPTION)
    if (callers != null) {
      body
    } else {
      sc.setJobDescription(text)
      try body
      finally sc.setLocalProperty(SparkContext.SPARK_JOB_DESCRIPTION, null)
    }
  }
}
