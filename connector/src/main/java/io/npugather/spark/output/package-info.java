/**
 * The gathered output between the barrier stage and the stages that read it.
 *
 * <p>Every gather ends at a stage boundary of its own: its barrier stage is the map side of a
 * shuffle dependency whose writer ({@link io.npugather.spark.output.GatheredOutputWriter}) keeps
 * each rank's gathered partitions, as they are, in its executor's block manager, and whose reader
 * ({@link io.npugather.spark.output.GatheredOutputReader}) hands them to the tasks of later stages
 * on the same executor without a copy. So no later narrow dependency, limit or coalesce is ever
 * fused into the barrier stage, and any number of jobs can read one gather. The driver ({@link
 * io.npugather.spark.output.GatheredOutputs}) releases the output when the last job that reads it
 * ends.
 */
package io.npugather.spark.output;
