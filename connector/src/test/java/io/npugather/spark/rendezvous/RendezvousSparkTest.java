package io.npugather.spark.rendezvous;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.spark.testing.LocalSpark;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import org.apache.spark.SparkContext;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.rdd.RDD;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.extension.RegisterExtension;
import scala.reflect.ClassTag$;

/** The service's life cycle tied to a real SparkContext (local[2], one per class). */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class RendezvousSparkTest {
  private static final Duration BOUND = Duration.ofSeconds(30);

  @RegisterExtension
  static final LocalSpark SPARK = LocalSpark.cores(2).onStart(s -> sc = s.sparkContext());

  private static SparkContext sc;

  @Test
  @Order(1)
  void oneServicePerSparkContext() {
    RendezvousService a = RendezvousService.getOrStart(sc);
    assertSame(a, RendezvousService.getOrStart(sc));
    a.close();
    RendezvousService b = RendezvousService.getOrStart(sc);
    assertNotSame(a, b, "a closed service is replaced");
    assertTrue(b.toString().contains("127.0.0.1"), "local mode binds loopback: " + b);
  }

  @Test
  @Order(2)
  void barrierStageRoundCompletesAndRegistrationEndsWithItsJob() throws Exception {
    RendezvousService service = RendezvousService.getOrStart(sc);
    int before = service.activeRegistrations();
    RendezvousTicket ticket = service.register(2, Duration.ofSeconds(60));
    RDD<String> rdd =
        new JavaSparkContext(sc)
            .parallelize(Arrays.asList(1, 2, 3, 4), 2)
            .rdd()
            .barrier()
            .mapPartitions(
                new BarrierExchange(ticket), false, ClassTag$.MODULE$.apply(String.class));
    service.unregisterWhenJobEnds(ticket, rdd.id());
    assertEquals(before + 1, service.activeRegistrations());
    List<String> rows = Arrays.asList((String[]) rdd.collect());
    assertEquals(
        List.of("0:host-of-0|host-of-1", "1:host-of-0|host-of-1"), rows.stream().sorted().toList());
    // job end arrives through the (asynchronous) listener bus
    assertTrue(
        Ranks.eventually(BOUND, () -> service.activeRegistrations() == before),
        "registration removed after the job ended: " + service.activeRegistrations());
  }

  @Test
  @Order(3)
  void unrelatedJobsDoNotEndARegistration() throws Exception {
    RendezvousService service = RendezvousService.getOrStart(sc);
    RendezvousTicket ticket = service.register(2, Duration.ofSeconds(60));
    RDD<String> rdd =
        new JavaSparkContext(sc)
            .parallelize(Arrays.asList(1, 2), 2)
            .rdd()
            .barrier()
            .mapPartitions(
                new BarrierExchange(ticket), false, ClassTag$.MODULE$.apply(String.class));
    service.unregisterWhenJobEnds(ticket, rdd.id());
    assertEquals(3L, new JavaSparkContext(sc).parallelize(Arrays.asList(1, 2, 3), 2).count());
    // give the listener bus time to deliver the unrelated job's end
    Thread.sleep(500);
    assertEquals(1, service.activeRegistrations());
    assertEquals(2, rdd.count());
    assertTrue(Ranks.eventually(BOUND, () -> service.activeRegistrations() == 0));
  }

  @Test
  @Order(100)
  void serviceStopsWithTheSparkContext() throws Exception {
    RendezvousService service = RendezvousService.getOrStart(sc);
    RendezvousTicket ticket = service.register(2, Duration.ofSeconds(60));
    sc.stop();
    assertTrue(Ranks.eventually(BOUND, service::isClosed), "service closed on application end");
    assertEquals(0, service.activeRegistrations());
    assertThrows(IllegalStateException.class, () -> RendezvousService.getOrStart(sc));
    RendezvousException e =
        assertThrows(
            RendezvousException.class,
            () ->
                RendezvousClient.exchange(
                    ticket, 0, 0, 0, new byte[1], Duration.ofSeconds(5), Ranks.NEVER));
    assertEquals(RendezvousException.Reason.CONNECTION, e.reason());
  }
}
