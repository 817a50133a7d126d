package io.npugather.spark.rendezvous;

import io.npugather.spark.rendezvous.RendezvousException.Reason;
import java.io.BufferedInputStream;
import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.UnknownHostException;
import java.time.Duration;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** Task side of the rendezvous: one call per rank and round. */
public final class RendezvousClient {
  private static final Logger LOG = LoggerFactory.getLogger(RendezvousClient.class);

  /** SO_TIMEOUT of the socket: how often a blocked read checks cancellation and the deadline. */
  static final int POLL_MS = 50;

  /**
   * How long past its own timeout a rank waits for the service's verdict (which names the missing
   * ranks) before giving up on the service itself.
   */
  static final long GRACE_MS = 2_000;

  /**
   * Patience of a first connection for its connect and for the service's greeting; each
   * reconnection doubles it up to {@link #MAX_PATIENCE_MS}. A rank whose SYN or greeting is lost in
   * a flood of connections connects again after this instead of waiting for the kernel's SYN
   * retransmission (a second, then three) or the service's next look at a queue it was dropped
   * from.
   */
  static final long FIRST_PATIENCE_MS = 2 * POLL_MS;

  static final long MAX_PATIENCE_MS = 1_000;

  /** Pause before the first reconnection; doubles up to a poll round. */
  private static final long FIRST_RETRY_MS = 5;

  private RendezvousClient() {}

  /**
   * Sends this rank's entry for round (stageId, stageAttempt) and blocks until all {@code
   * ticket.rankSize()} ranks of the same round have sent theirs; returns the entries indexed by
   * rank, identical on every rank.
   *
   * @param ticket the registration (from the driver's {@link RendezvousService})
   * @param stageId the barrier stage's id
   * @param stageAttempt the barrier stage's attempt number; a newer attempt fails older ones
   * @param rank this rank, in [0, rankSize)
   * @param entry this rank's entry, at most 1 MiB
   * @param timeout how long to wait for all ranks
   * @param cancelled polled at least every 100 ms while waiting; true ends the wait
   * @return unmodifiable list of rankSize entries, entry r from rank r
   * @throws RendezvousException on timeout (naming the ranks the service was still waiting for),
   *     cancellation, a newer attempt of the stage, an unknown or rejected ticket, a duplicate
   *     rank, an oversized entry, or a connection failure; the message names rank, round and cause
   */
  public static List<byte[]> exchange(
      RendezvousTicket ticket,
      int stageId,
      int stageAttempt,
      int rank,
      byte[] entry,
      Duration timeout,
      BooleanSupplier cancelled) {
    Objects.requireNonNull(ticket, "ticket");
    Objects.requireNonNull(entry, "entry");
    Objects.requireNonNull(timeout, "timeout");
    Objects.requireNonNull(cancelled, "cancelled");
    String where =
        "rank "
            + rank
            + " of "
            + ticket.rankSize()
            + " in rendezvous round (registration "
            + ticket.registrationId()
            + ", stage "
            + stageId
            + ", attempt "
            + stageAttempt
            + ") with the driver at "
            + ticket.host()
            + ":"
            + ticket.port();
    if (rank < 0 || rank >= ticket.rankSize()) {
      throw new RendezvousException(
          Reason.INVALID_ARGUMENT, where + ": rank must be in [0, " + ticket.rankSize() + ")");
    }
    if (stageId < 0 || stageAttempt < 0) {
      throw new RendezvousException(
          Reason.INVALID_ARGUMENT, where + ": stage id and attempt must be >= 0");
    }
    if (entry.length > Protocol.MAX_ENTRY_BYTES) {
      throw new RendezvousException(
          Reason.TOO_LARGE,
          where
              + ": entry of "
              + entry.length
              + " bytes exceeds the limit of "
              + Protocol.MAX_ENTRY_BYTES
              + " bytes (1 MiB)");
    }
    if (timeout.isNegative() || timeout.isZero()) {
      throw new RendezvousException(
          Reason.INVALID_ARGUMENT, where + ": timeout must be positive, got " + timeout);
    }
    long timeoutMs = saturatedMillis(timeout);
    long start = System.nanoTime();
    long deadline = start + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
    long hardDeadline = deadline + TimeUnit.MILLISECONDS.toNanos(GRACE_MS);

    Protocol.Poll poll =
        () -> {
          if (cancelled.getAsBoolean() || Thread.currentThread().isInterrupted()) {
            throw new RendezvousException(
                Reason.CANCELLED,
                where
                    + ": cancelled while waiting for the other ranks "
                    + "(task killed or interrupted) after "
                    + elapsedMs(start)
                    + " ms");
          }
          if (System.nanoTime() - hardDeadline > 0) {
            throw new RendezvousException(
                Reason.TIMEOUT,
                where
                    + ": no verdict from the rendezvous service within "
                    + "the timeout of "
                    + timeoutMs
                    + " ms (+"
                    + GRACE_MS
                    + " ms grace); the driver may be unreachable "
                    + "or overloaded");
          }
        };

    InetSocketAddress address;
    try {
      address = new InetSocketAddress(InetAddress.getByName(ticket.host()), ticket.port());
    } catch (UnknownHostException e) {
      throw new RendezvousException(
          Reason.CONNECTION, where + ": cannot resolve the driver host " + ticket.host(), e);
    }

    // A service that dropped this connection before reading the whole request (its handshake
    // limits make way for newer connections), or that did not greet it in time, never saw the
    // entry: connect again, soon, with more patience each time.
    for (int reconnections = 0; ; reconnections++) {
      int doublings = Math.min(reconnections, 10);
      long patienceMs = Math.min(FIRST_PATIENCE_MS << doublings, MAX_PATIENCE_MS);
      try {
        return attempt(
            ticket,
            stageId,
            stageAttempt,
            rank,
            entry,
            address,
            poll,
            patienceMs,
            deadline,
            hardDeadline,
            where);
      } catch (DroppedBeforeVerdict e) {
        LOG.debug(
            "{}: connecting again ({}) after {} ms: {}",
            where,
            reconnections + 1,
            elapsedMs(start),
            e.getCause().toString());
        try {
          poll.check(); // cancelled or past the deadline: that is the verdict
        } catch (IOException never) {
          throw new RendezvousException(Reason.CONNECTION, where + ": " + never, never);
        }
        sleepQuietly(Math.min(FIRST_RETRY_MS << doublings, POLL_MS));
      }
    }
  }

  /** The service closed the connection, or did not greet it in time, before any verdict. */
  private static final class DroppedBeforeVerdict extends Exception {
    DroppedBeforeVerdict(Throwable cause) {
      super(cause);
    }
  }

  private static List<byte[]> attempt(
      RendezvousTicket ticket,
      int stageId,
      int stageAttempt,
      int rank,
      byte[] entry,
      InetSocketAddress address,
      Protocol.Poll poll,
      long patienceMs,
      long deadline,
      long hardDeadline,
      String where)
      throws DroppedBeforeVerdict {
    Socket socket = null;
    boolean verdictStarted = false;
    try {
      socket = connect(address, poll, patienceMs, hardDeadline, where);
      socket.setTcpNoDelay(true);
      socket.setKeepAlive(true);
      socket.setSoTimeout(POLL_MS);
      long greetBy = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(patienceMs);
      boolean[] greeted = {false};
      Protocol.Poll attemptPoll =
          () -> {
            poll.check();
            if (!greeted[0] && System.nanoTime() - greetBy > 0) {
              throw new SocketTimeoutException("no greeting within " + patienceMs + " ms");
            }
          };
      DataInputStream in =
          new DataInputStream(
              new BufferedInputStream(
                  new Protocol.PollingInputStream(socket.getInputStream(), attemptPoll), 8192));
      OutputStream out = socket.getOutputStream();

      byte[] nonce = Protocol.readHello(in, where);
      greeted[0] = true;

      long remainingMs = Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime()));
      byte[] secret = ticket.secret();
      byte[] sealed =
          Protocol.sealEntry(secret, ticket.registrationId(), stageId, stageAttempt, rank, entry);
      byte[] header =
          Protocol.requestHeader(
              ticket.registrationId(), stageId, stageAttempt, rank, remainingMs, sealed.length);
      out.write(Protocol.request(secret, nonce, header, sealed));
      out.flush();

      int status = in.readUnsignedByte();
      verdictStarted = true;
      byte[][] table =
          Protocol.readVerdict(
              in,
              status,
              secret,
              nonce,
              rank,
              ticket.rankSize(),
              where,
              ticket.host() + ":" + ticket.port());
      for (int r = 0; r < table.length; r++) {
        table[r] =
            Protocol.openEntry(secret, ticket.registrationId(), stageId, stageAttempt, r, table[r]);
        if (table[r] == null) {
          throw new RendezvousException(
              Reason.AUTHENTICATION,
              where
                  + ": the entry of rank "
                  + r
                  + " does not authenticate (not sealed by a rank of this round, or altered)");
        }
      }
      return Collections.unmodifiableList(Arrays.asList(table));
    } catch (EOFException e) {
      if (!verdictStarted) {
        throw new DroppedBeforeVerdict(e);
      }
      throw new RendezvousException(
          Reason.CONNECTION,
          where
              + ": the rendezvous service closed the connection "
              + "in the middle of its verdict",
          e);
    } catch (IOException e) {
      if (!verdictStarted) {
        throw new DroppedBeforeVerdict(e);
      }
      throw new RendezvousException(
          Reason.CONNECTION, where + ": connection to the rendezvous service failed: " + e, e);
    } finally {
      if (socket != null) {
        try {
          socket.close();
        } catch (IOException e) {
          // ignore
        }
      }
    }
  }

  /** Connects, each try given {@code patienceMs} (then a new SYN) until the hard deadline. */
  private static Socket connect(
      InetSocketAddress address,
      Protocol.Poll poll,
      long patienceMs,
      long hardDeadline,
      String where)
      throws IOException {
    while (true) {
      poll.check();
      long leftMs = Math.max(1, TimeUnit.NANOSECONDS.toMillis(hardDeadline - System.nanoTime()));
      Socket socket = new Socket();
      try {
        socket.connect(address, (int) Math.min(leftMs, patienceMs));
        return socket;
      } catch (SocketTimeoutException e) {
        socket.close(); // try again (checks cancellation and the deadline first)
      } catch (IOException e) {
        socket.close();
        throw new RendezvousException(
            Reason.CONNECTION, where + ": cannot connect to the rendezvous service: " + e, e);
      }
    }
  }

  private static void sleepQuietly(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt(); // the next poll reports the cancellation
    }
  }

  private static long elapsedMs(long startNanos) {
    return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - startNanos);
  }

  private static long saturatedMillis(Duration d) {
    try {
      return Math.min(d.toMillis(), TimeUnit.DAYS.toMillis(30));
    } catch (ArithmeticException e) {
      return TimeUnit.DAYS.toMillis(30);
    }
  }
}
