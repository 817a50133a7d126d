package io.npugather.spark.rendezvous;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerApplicationEnd;
import org.apache.spark.scheduler.SparkListenerJobEnd;
import org.apache.spark.scheduler.SparkListenerJobStart;
import org.apache.spark.scheduler.StageInfo;
import org.apache.spark.storage.RDDInfo;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Which registrations end with which Spark jobs: a watch ties a ticket to an RDD, and the ticket is
 * due for unregistering when the last running job that computes that RDD ends. Fed with job events
 * by {@link #listener} on a SparkContext, or directly (tests).
 */
final class JobWatches {
  private static final Logger LOG = LoggerFactory.getLogger(JobWatches.class);

  private final Map<Integer, Set<Integer>> runningJobRdds = new HashMap<>(); // jobId -> rdd ids
  private final Map<Long, Watch> watches = new HashMap<>(); // registrationId -> watch

  private static final class Watch {
    final RendezvousTicket ticket;
    final int rddId;
    final Set<Integer> jobs = new HashSet<>();

    Watch(RendezvousTicket ticket, int rddId) {
      this.ticket = ticket;
      this.rddId = rddId;
    }
  }

  /** Watches the jobs that compute RDD {@code rddId}, those already running included. */
  synchronized void watch(RendezvousTicket ticket, int rddId) {
    Watch watch = new Watch(ticket, rddId);
    for (Map.Entry<Integer, Set<Integer>> job : runningJobRdds.entrySet()) {
      if (job.getValue().contains(rddId)) {
        watch.jobs.add(job.getKey());
      }
    }
    watches.put(ticket.registrationId(), watch);
  }

  /** Drops the ticket's watch, if any. */
  synchronized void forget(RendezvousTicket ticket) {
    watches.remove(ticket.registrationId());
  }

  /** Drops every watch and every running job. */
  synchronized void clear() {
    watches.clear();
    runningJobRdds.clear();
  }

  synchronized void jobStarted(int jobId, Set<Integer> rddIds) {
    runningJobRdds.put(jobId, rddIds);
    for (Watch w : watches.values()) {
      if (rddIds.contains(w.rddId)) {
        w.jobs.add(jobId);
      }
    }
  }

  /**
   * Job {@code jobId} ended; returns the tickets whose last watched job it was (their watches end).
   */
  synchronized List<RendezvousTicket> jobEnded(int jobId) {
    List<RendezvousTicket> done = new ArrayList<>();
    runningJobRdds.remove(jobId);
    for (Iterator<Watch> it = watches.values().iterator(); it.hasNext(); ) {
      Watch w = it.next();
      if (w.jobs.remove(jobId) && w.jobs.isEmpty()) {
        done.add(w.ticket);
        it.remove();
      }
    }
    return done;
  }

  /**
   * The listener that feeds the service's job events ({@link RendezvousService#jobStarted}, {@link
   * RendezvousService#jobEnded}) and closes it at the application's end.
   */
  static SparkListener listener(RendezvousService service) {
    return new SparkListener() {
      @Override
      public void onJobStart(SparkListenerJobStart event) {
        try {
          Set<Integer> ids = new HashSet<>();
          for (StageInfo stage : CollectionConverters.asJava(event.stageInfos())) {
            for (RDDInfo rdd : CollectionConverters.asJava(stage.rddInfos())) {
              ids.add(rdd.id());
            }
          }
          service.jobStarted(event.jobId(), ids);
        } catch (RuntimeException e) {
          LOG.warn("rendezvous service: cannot track job {}", event.jobId(), e);
        }
      }

      @Override
      public void onJobEnd(SparkListenerJobEnd event) {
        try {
          service.jobEnded(event.jobId());
        } catch (RuntimeException e) {
          LOG.warn("rendezvous service: cannot handle the end of job {}", event.jobId(), e);
        }
      }

      @Override
      public void onApplicationEnd(SparkListenerApplicationEnd event) {
        try {
          service.close();
        } catch (RuntimeException e) {
          LOG.warn("rendezvous service: error while stopping", e);
        }
      }
    };
  }
}
