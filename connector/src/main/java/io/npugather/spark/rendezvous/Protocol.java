package io.npugather.spark.rendezvous;

import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.util.List;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * Wire format of one rendezvous exchange (one TCP connection per rank and round). All integers
 * are big-endian.
 *
 * <pre>
 * server -> client  HELLO    int magic "NPGH", int version, byte[32] nonce
 * client -> server  REQUEST  int magic "NPGQ", int version, long registrationId, int stageId,
 *                            int stageAttempt, int rank, long timeoutMillis, int entryLength,
 *                            byte[32] mac, byte[entryLength] entry
 *                   mac = HMAC-SHA256(secret, nonce || request header from magic to entryLength)
 * server -> client  REPLY    byte 0, int count, count x (int length, byte[length] entry)
 *                or ERROR    byte reasonCode (>0), int length, byte[length] UTF-8 message
 * </pre>
 *
 * The server closes the connection after its reply; a client that closes its connection before
 * the reply leaves the round, which fails the round for every other rank at once.
 */
final class Protocol {
  private Protocol() {}

  static final int HELLO_MAGIC = 0x4E504748; // "NPGH"
  static final int REQUEST_MAGIC = 0x4E504751; // "NPGQ"
  static final int VERSION = 1;

  static final int SECRET_BYTES = 32;
  static final int NONCE_BYTES = 32;
  static final int MAC_BYTES = 32;
  /** Header bytes covered by the MAC: magic, version, regId, stageId, attempt, rank, timeout, length. */
  static final int REQUEST_HEADER_BYTES = 4 + 4 + 8 + 4 + 4 + 4 + 8 + 4;

  /** Largest entry one rank may contribute. */
  static final int MAX_ENTRY_BYTES = 1 << 20;
  /** Largest table (sum of all entries of a round). */
  static final long MAX_TABLE_BYTES = 64L << 20;
  /** Largest error message on the wire. */
  static final int MAX_MESSAGE_BYTES = 16 << 10;
  /** Largest rank count a ticket may have (a barrier stage is limited by cluster slots anyway). */
  static final int MAX_RANKS = 1 << 16;

  static final byte STATUS_OK = 0;

  static byte[] mac(byte[] secret, byte[] nonce, byte[] header) {
    try {
      Mac mac = Mac.getInstance("HmacSHA256");
      mac.init(new SecretKeySpec(secret, "HmacSHA256"));
      mac.update(nonce);
      mac.update(header);
      return mac.doFinal();
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("HmacSHA256 is not available", e);
    }
  }

  static boolean macMatches(byte[] secret, byte[] nonce, byte[] header, byte[] presented) {
    return MessageDigest.isEqual(mac(secret, nonce, header), presented);
  }

  static byte[] requestHeader(long registrationId, int stageId, int stageAttempt, int rank,
      long timeoutMillis, int entryLength) {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream(REQUEST_HEADER_BYTES);
    try (DataOutputStream out = new DataOutputStream(bytes)) {
      out.writeInt(REQUEST_MAGIC);
      out.writeInt(VERSION);
      out.writeLong(registrationId);
      out.writeInt(stageId);
      out.writeInt(stageAttempt);
      out.writeInt(rank);
      out.writeLong(timeoutMillis);
      out.writeInt(entryLength);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return bytes.toByteArray();
  }

  /** The complete REPLY frame for a table, built once and sent to every rank. */
  static byte[] replyFrame(byte[][] entries) {
    long size = 1 + 4;
    for (byte[] e : entries) {
      size += 4 + e.length;
    }
    if (size > Integer.MAX_VALUE - 16) {
      throw new IllegalStateException("rendezvous table too large: " + size + " bytes");
    }
    ByteArrayOutputStream bytes = new ByteArrayOutputStream((int) size);
    try (DataOutputStream out = new DataOutputStream(bytes)) {
      out.writeByte(STATUS_OK);
      out.writeInt(entries.length);
      for (byte[] e : entries) {
        out.writeInt(e.length);
        out.write(e);
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return bytes.toByteArray();
  }

  static byte[] errorFrame(RendezvousException.Reason reason, String message) {
    byte[] text = message.getBytes(StandardCharsets.UTF_8);
    if (text.length > MAX_MESSAGE_BYTES) {
      String cut = message.substring(0, Math.min(message.length(), MAX_MESSAGE_BYTES / 4 - 4)) + " ...";
      text = cut.getBytes(StandardCharsets.UTF_8);
    }
    ByteArrayOutputStream bytes = new ByteArrayOutputStream(5 + text.length);
    try (DataOutputStream out = new DataOutputStream(bytes)) {
      out.writeByte(reason.code());
      out.writeInt(text.length);
      out.write(text);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return bytes.toByteArray();
  }

  /** Compact rank list: [0-3, 7, 9-12], cut after a bounded number of runs. */
  static String ranks(List<Integer> sorted) {
    StringBuilder sb = new StringBuilder("[");
    int runs = 0;
    int i = 0;
    while (i < sorted.size()) {
      int start = sorted.get(i);
      int end = start;
      while (i + 1 < sorted.size() && sorted.get(i + 1) == end + 1) {
        end = sorted.get(++i);
      }
      i++;
      if (runs > 0) {
        sb.append(", ");
      }
      if (runs == 64) {
        sb.append("...");
        break;
      }
      sb.append(start);
      if (end > start) {
        sb.append('-').append(end);
      }
      runs++;
    }
    return sb.append(']').toString();
  }

  /** Something to run whenever a blocking read times out; may throw to abandon the read. */
  interface Poll {
    void check() throws IOException;
  }

  /**
   * Wraps a socket stream whose SO_TIMEOUT is short: on every timeout it runs {@code poll} (which
   * may throw) and retries, so callers see a plain blocking stream and no bytes are ever lost
   * mid-frame.
   */
  static final class PollingInputStream extends InputStream {
    private final InputStream in;
    private final Poll poll;

    PollingInputStream(InputStream in, Poll poll) {
      this.in = in;
      this.poll = poll;
    }

    @Override
    public int read() throws IOException {
      byte[] one = new byte[1];
      int n = read(one, 0, 1);
      return n < 0 ? -1 : one[0] & 0xFF;
    }

    @Override
    public int read(byte[] b, int off, int len) throws IOException {
      while (true) {
        poll.check();
        try {
          return in.read(b, off, len);
        } catch (SocketTimeoutException e) {
          // poll again
        }
      }
    }

    @Override
    public int available() throws IOException {
      return in.available();
    }

    @Override
    public void close() throws IOException {
      in.close();
    }
  }
}
