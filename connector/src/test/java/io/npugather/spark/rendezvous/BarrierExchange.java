package io.npugather.spark.rendezvous;

import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.BarrierTaskContext;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractFunction1;

/**
 * Barrier-stage body for tests and the benchmark: each task does one rendezvous round keyed by its
 * stage id and attempt, and emits the table it received as "rank:entry0|entry1|...".
 */
final class BarrierExchange extends AbstractFunction1<Iterator<Integer>, Iterator<String>>
    implements Serializable {
  private static final long serialVersionUID = 1L;
  private final RendezvousTicket ticket;

  BarrierExchange(RendezvousTicket ticket) {
    this.ticket = ticket;
  }

  @Override
  public Iterator<String> apply(Iterator<Integer> rows) {
    BarrierTaskContext ctx = BarrierTaskContext.get();
    int rank = ctx.partitionId();
    List<byte[]> table =
        RendezvousClient.exchange(
            ticket,
            ctx.stageId(),
            ctx.stageAttemptNumber(),
            rank,
            ("host-of-" + rank).getBytes(StandardCharsets.UTF_8),
            Duration.ofSeconds(60),
            ctx::isInterrupted);
    StringBuilder sb = new StringBuilder().append(rank).append(':');
    for (int r = 0; r < table.size(); r++) {
      sb.append(r == 0 ? "" : "|").append(new String(table.get(r), StandardCharsets.UTF_8));
    }
    List<String> out = new ArrayList<>();
    out.add(sb.toString());
    return CollectionConverters.asScala(out.iterator());
  }
}
