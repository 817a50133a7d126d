package io.npugather.spark

import java.util.UUID

import scala.jdk.CollectionConverters._

import io.npugather.DType
import io.npugather.spark.rendezvous.RendezvousService
import org.apache.spark.internal.Logging
import org.apache.spark.sql.Row
import org.apache.spark.sql.classic.{Dataset => ClassicDataset}

/**
 * The driver side of [[NpuGather.onRanks]]: one barrier stage over the selected columns (one task
 * per partition, rank = partition id), each task running an [[OnRanksTask]]; the ranks' results
 * are collected in rank order.
 */
private[spark] object OnRanksStage extends Logging {
  def collect(
      input: ClassicDataset[Row],
      wireDtype: DType,
      fn: RankFunction[AnyRef],
      options: AllGatherOptions): java.util.List[AnyRef] = {
    val schema = OnRanksTask.checkInput(input.schema)
    OnRanksTask.checkWireDtype(wireDtype)
    val sc = input.sparkSession.sparkContext
    val rows = NpuAllGatherExec.barrierReady(input.queryExecution.toRdd, schema.length)
    val rankSize = rows.getNumPartitions
    if (rankSize < 1) {
      throw new IllegalArgumentException("onRanks: the input has no partitions; one rank per " +
        "partition needs at least one")
    }
    if (options.rankRoot >= rankSize) {
      throw new IllegalArgumentException(s"${AllGatherOptions.RANK_ROOT} = ${options.rankRoot} " +
        s"is invalid; allowed: 0 <= rankRoot < rankSize ($rankSize)")
    }
    ClusterCheck.requireBarrierSlots(sc, rankSize)
    val service = RendezvousService.getOrStart(sc)
    val ticket = service.register(rankSize, options.timeout)
    try {
      val metrics = new GatherMetrics(sc)
      NpuGather.recordRun(metrics)
      val domain = (if (options.commDomain.isEmpty) "npg" else options.commDomain) + "-" +
        UUID.randomUUID().toString.substring(0, 8)
      val task = new OnRanksTask(schema, wireDtype, fn, options, ticket, domain, metrics)
      val results = rows.barrier().mapPartitions(it => task.run(it.asJava).asScala)
      service.unregisterWhenJobEnds(ticket, results.id)
      logInfo(s"onRanks: $rankSize ranks, columns ${schema.fieldNames.mkString(", ")}, wire " +
        s"$wireDtype, $options")
      val collected = results.collect()
      if (collected.length != rankSize) {
        throw new IllegalStateException(s"onRanks: ${collected.length} results from $rankSize " +
          "ranks")
      }
      java.util.Collections.unmodifiableList(java.util.Arrays.asList(collected: _*))
    } finally {
      service.unregister(ticket) // the job is over: nothing waits on the registration any more
    }
  }
}
