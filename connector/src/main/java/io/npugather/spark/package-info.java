/**
 * {@code allGatherOnNpu} and {@code onRanks} on Spark: every partition of a DataFrame on every rank
 * of a barrier stage, through the operator API ({@link io.npugather}).
 *
 * <p>Three groups of classes, in the order a call meets them:
 *
 * <ul>
 *   <li><b>API</b>: {@link io.npugather.spark.NpuGather} (the entry points, a facade that only
 *       delegates and keeps nothing between calls), {@link io.npugather.spark.AllGatherOptions} (a
 *       call's options), {@link io.npugather.spark.GatherMetrics} (a gather's figures, which its
 *       plan node holds: {@code GatherMetrics.of(gathered)}), {@link
 *       io.npugather.spark.RankFunction} (what {@code onRanks} runs), {@link
 *       io.npugather.spark.RankFailedException} and {@link
 *       io.npugather.spark.RankFunctionException} (how a rank's failure reaches the caller), the
 *       settings ({@link io.npugather.spark.NpuGatherConf}, {@link
 *       io.npugather.spark.ExecutorBroadcastConf}, {@link io.npugather.spark.SettingValues}), and
 *       the ways in without a call: the SQL extension {@code NpuGatherExtensions} (the planner
 *       strategy, the {@code ALLGATHER} hint, the SQL function {@code all_gather_on_npu}, over
 *       {@link io.npugather.spark.ClientGather}), the Scala {@code implicits} and {@link
 *       io.npugather.spark.NpuGatherPlugin}.
 *   <li><b>Driver set-up</b>: {@code GatherPlans} (a DataFrame call's plan and its checks, once),
 *       the plan nodes {@code NpuAllGather} and {@code NpuAllGatherExec} and their planning ({@code
 *       NpuGatherPlanning}), {@code OnRanksStage} ({@code onRanks}' checks and barrier stage),
 *       {@code RunSetup} (what the driver does before a run's barrier stage: {@link
 *       io.npugather.spark.ClusterCheck}, {@code DeviceBinding}, the rendezvous registration) and
 *       {@link io.npugather.spark.TaskFailures} (the ranks' exceptions, for the job's error).
 *   <li><b>Rank side</b>, inside a barrier task: {@code RankTask} (what every rank does alike: its
 *       allocator, the rendezvous round ({@code RankEntry}), the communicator ({@code RankGroup}),
 *       the teardown ({@code Teardown})), {@link io.npugather.spark.GatherTask} and {@code
 *       OnRanksTask} (one rank of each operation: only what differs), {@code ExecutorGroups} and
 *       {@code ExecutorShare} (the ranks of one executor gathering one output together), and {@link
 *       io.npugather.spark.JvmWarmUp} (a JVM's one-time costs, paid ahead).
 * </ul>
 *
 * <p>Subpackages: {@code rendezvous} (the driver's rendezvous service and its client), {@code
 * arrow.write} and {@code arrow.read} (a partition to Arrow; the gathered buffers back to Spark),
 * {@code output} (the stage boundary that keeps each executor's gathered output), {@code memory}
 * (off-heap memory and its reuse), {@code connect} (Spark Connect).
 */
package io.npugather.spark;
