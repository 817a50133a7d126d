/**
 * The metadata rendezvous of a barrier stage: before moving data, every rank contributes one small
 * entry (root info, host and device identity, partition metadata) and every rank receives all
 * entries, indexed by rank and identical everywhere.
 *
 * <p>The driver runs one {@link io.npugather.spark.rendezvous.RendezvousService} per SparkContext
 * (a TCP server on the driver host, ephemeral port). The driver registers each execution of a
 * barrier stage ({@link io.npugather.spark.rendezvous.RendezvousService#register}) and ships the
 * resulting {@link io.npugather.spark.rendezvous.RendezvousTicket} in the task closure; each task
 * calls {@link io.npugather.spark.rendezvous.RendezvousClient#exchange} once per round. The reply
 * leaves the driver the moment the last rank's entry arrives, unlike {@code
 * BarrierTaskContext.allGather}, whose wait loop works in whole seconds.
 *
 * <p>Guarantees: requests authenticate with HMAC-SHA256s of a server nonce under the registration's
 * random secret over the header and the entry; entries are sealed end to end (AES-GCM, bound to
 * their rank and round) and every verdict carries a MAC for the rank's connection; every frame is
 * length-checked (entries at most 1 MiB, a table at most 64 MiB); one selector thread serves every
 * connection, a request must be whole within its deadline, and a bad, stalled or flooding
 * connection is dropped without affecting any round; a round is keyed by (registration, stage id,
 * stage attempt), a newer attempt of a stage fails the older one, a rank may send once per round,
 * and a round fails (naming the missing ranks) when not all ranks arrive within the timeout or when
 * a waiting rank disconnects.
 *
 * <p>Parts: {@code Protocol} (the wire format, every frame encoded and decoded there), {@code
 * Rounds} (registrations and their rounds: arrivals, deadlines, failures, verdicts; no sockets, no
 * Spark), {@code RendezvousServer} (the selector thread, handshakes and their limits, which {@code
 * RendezvousSettings} sets), {@code JobWatches} (registrations that end with a Spark job, fed by a
 * SparkListener), {@code DriverAddress} (where the service listens and what tasks are told), and
 * the service that puts them together for one SparkContext. Only the service, the job watches and
 * the driver address know Spark: the rounds, the server, the protocol and the client would serve
 * another engine.
 */
package io.npugather.spark.rendezvous;
