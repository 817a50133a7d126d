/**
 * {@code allGatherOnNpu} over Spark Connect: the server's relation plugin ({@link
 * io.npugather.spark.connect.NpuGatherRelationPlugin}) and the relation a client sends ({@link
 * io.npugather.spark.connect.AllGatherRelation}). The plugin builds the classic API's plan, so a
 * Connect DataFrame gathers with the same options, defaults, result and errors.
 */
package io.npugather.spark.connect;
