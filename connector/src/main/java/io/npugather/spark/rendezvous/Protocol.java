package io.npugather.spark.rendezvous;

import io.npugather.spark.rendezvous.RendezvousException.Reason;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.Arrays;
import java.util.List;
import java.util.function.LongPredicate;
import javax.crypto.AEADBadTagException;
import javax.crypto.Cipher;
import javax.crypto.Mac;
import javax.crypto.spec.GCMParameterSpec;
import javax.crypto.spec.SecretKeySpec;

/**
 * Wire format of one rendezvous exchange (one TCP connection per rank and round). All integers are
 * big-endian; every MAC is HMAC-SHA256 under the registration's secret, and its first input is a
 * label naming what it covers, so no MAC can stand in for another.
 *
 * <pre>
 * server -> client  HELLO    int magic "NPGH", int version, byte[32] nonce
 * client -> server  REQUEST  int magic "NPGQ", int version, long registrationId, int stageId,
 *                            int stageAttempt, int rank, long timeoutMillis, int entryLength,
 *                            byte[32] headerMac, byte[entryLength] sealed entry, byte[32] entryMac
 *                   headerMac = MAC("request header", nonce, header from magic to entryLength)
 *                   entryMac  = MAC("request entry", nonce, header, sealed entry)
 * server -> client  REPLY    byte 0, int count, count x (int length, byte[length] sealed entry),
 *                            byte[32] mac = MAC("reply", nonce, int rank, SHA-256(the bytes before))
 *                or ERROR    byte reasonCode (>0), int length, byte[length] UTF-8 message,
 *                            byte authenticated, [byte[32] mac = MAC("error", nonce, int rank,
 *                            the bytes from reasonCode to the message)]
 * sealed entry      byte[12] iv, AES-256-GCM(key = MAC("entry key"), iv, entry,
 *                            aad = registrationId, stageId, stageAttempt, rank)
 * </pre>
 *
 * Entries are sealed by the rank that sends them and opened by every rank that receives the table:
 * the service relays them without reading them, and an entry (a root info carries the
 * communicator's secret) is neither readable on the wire nor movable to another rank or round. An
 * error is authenticated when the service could check the request's MAC; before that (unknown
 * registration, wrong secret, malformed request) it cannot be, and a client takes it only as a
 * failure. The server closes the connection after its reply; a client that closes its connection
 * before the reply leaves the round, which fails the round for every other rank at once.
 *
 * <p>Both sides encode and decode through this class: the server with {@link #hello}, {@link
 * RequestHeader#read}, {@link #readSealedEntry} and {@link Verdict}, the client with {@link
 * #readHello}, {@link #request} and {@link #readVerdict}.
 */
final class Protocol {
  private Protocol() {}

  static final int HELLO_MAGIC = 0x4E504748; // "NPGH"
  static final int REQUEST_MAGIC = 0x4E504751; // "NPGQ"
  static final int VERSION = 2;

  static final int SECRET_BYTES = 32;
  static final int NONCE_BYTES = 32;
  static final int MAC_BYTES = 32;
  static final int IV_BYTES = 12;
  static final int GCM_TAG_BITS = 128;

  /** What sealing adds to an entry: the iv and the GCM tag. */
  static final int SEAL_BYTES = IV_BYTES + GCM_TAG_BITS / 8;

  /**
   * Header bytes covered by the MAC: magic, version, regId, stageId, attempt, rank, timeout,
   * length.
   */
  static final int REQUEST_HEADER_BYTES = 4 + 4 + 8 + 4 + 4 + 4 + 8 + 4;

  /** Largest entry one rank may contribute. */
  static final int MAX_ENTRY_BYTES = 1 << 20;

  /** Largest entry on the wire: sealed. */
  static final int MAX_SEALED_ENTRY_BYTES = MAX_ENTRY_BYTES + SEAL_BYTES;

  /** Largest table (sum of all entries of a round). */
  static final long MAX_TABLE_BYTES = 64L << 20;

  /** Largest error message on the wire. */
  static final int MAX_MESSAGE_BYTES = 16 << 10;

  /** Largest rank count a ticket may have (a barrier stage is limited by cluster slots anyway). */
  static final int MAX_RANKS = 1 << 16;

  static final byte STATUS_OK = 0;

  private static final SecureRandom SEAL_RANDOM = new SecureRandom();

  /**
   * MAC(label, parts...): HMAC-SHA256 under secret over the label's UTF-8 bytes, a 0, then the
   * parts.
   */
  static byte[] mac(byte[] secret, String label, byte[]... parts) {
    try {
      Mac mac = Mac.getInstance("HmacSHA256");
      mac.init(new SecretKeySpec(secret, "HmacSHA256"));
      mac.update(label.getBytes(StandardCharsets.UTF_8));
      mac.update((byte) 0);
      for (byte[] part : parts) {
        mac.update(part);
      }
      return mac.doFinal();
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("HmacSHA256 is not available", e);
    }
  }

  static boolean macMatches(byte[] presented, byte[] expected) {
    return MessageDigest.isEqual(presented, expected);
  }

  static byte[] headerMac(byte[] secret, byte[] nonce, byte[] header) {
    return mac(secret, "request header", nonce, header);
  }

  static byte[] entryMac(byte[] secret, byte[] nonce, byte[] header, byte[] sealedEntry) {
    return mac(secret, "request entry", nonce, header, sealedEntry);
  }

  /** The MAC a REPLY ends with, for the rank whose connection had this nonce. */
  static byte[] replyMac(byte[] secret, byte[] nonce, int rank, byte[] replyDigest) {
    return mac(secret, "reply", nonce, intBytes(rank), replyDigest);
  }

  static byte[] errorMac(byte[] secret, byte[] nonce, int rank, byte[] errorBody) {
    return mac(secret, "error", nonce, intBytes(rank), errorBody);
  }

  static MessageDigest sha256Digest() {
    try {
      return MessageDigest.getInstance("SHA-256");
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("SHA-256 is not available", e);
    }
  }

  private static byte[] intBytes(int v) {
    return ByteBuffer.allocate(4).putInt(v).array();
  }

  private static byte[] entryAad(long registrationId, int stageId, int stageAttempt, int rank) {
    return ByteBuffer.allocate(8 + 4 + 4 + 4)
        .putLong(registrationId)
        .putInt(stageId)
        .putInt(stageAttempt)
        .putInt(rank)
        .array();
  }

  private static Cipher entryCipher(byte[] secret, int mode, byte[] iv, byte[] aad)
      throws GeneralSecurityException {
    Cipher cipher = Cipher.getInstance("AES/GCM/NoPadding");
    cipher.init(
        mode,
        new SecretKeySpec(mac(secret, "entry key"), "AES"),
        new GCMParameterSpec(GCM_TAG_BITS, iv));
    cipher.updateAAD(aad);
    return cipher;
  }

  /** Rank {@code rank}'s entry as it goes on the wire for this round. */
  static byte[] sealEntry(
      byte[] secret, long registrationId, int stageId, int stageAttempt, int rank, byte[] entry) {
    byte[] iv = new byte[IV_BYTES];
    SEAL_RANDOM.nextBytes(iv);
    try {
      byte[] sealed =
          entryCipher(
                  secret,
                  Cipher.ENCRYPT_MODE,
                  iv,
                  entryAad(registrationId, stageId, stageAttempt, rank))
              .doFinal(entry);
      return ByteBuffer.allocate(IV_BYTES + sealed.length).put(iv).put(sealed).array();
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("AES/GCM is not available", e);
    }
  }

  /** The entry rank {@code rank} sealed for this round, or null when it does not authenticate. */
  static byte[] openEntry(
      byte[] secret, long registrationId, int stageId, int stageAttempt, int rank, byte[] sealed) {
    if (sealed.length < SEAL_BYTES) {
      return null;
    }
    try {
      return entryCipher(
              secret,
              Cipher.DECRYPT_MODE,
              Arrays.copyOfRange(sealed, 0, IV_BYTES),
              entryAad(registrationId, stageId, stageAttempt, rank))
          .doFinal(sealed, IV_BYTES, sealed.length - IV_BYTES);
    } catch (AEADBadTagException e) {
      return null;
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("AES/GCM is not available", e);
    }
  }

  static byte[] requestHeader(
      long registrationId,
      int stageId,
      int stageAttempt,
      int rank,
      long timeoutMillis,
      int entryLength) {
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

  /** The HELLO frame that opens a connection, with this connection's nonce. */
  static ByteBuffer hello(byte[] nonce) {
    ByteBuffer hello = ByteBuffer.allocate(8 + NONCE_BYTES);
    hello.putInt(HELLO_MAGIC).putInt(VERSION).put(nonce).flip();
    return hello;
  }

  /**
   * Reads a HELLO frame and returns its nonce.
   *
   * @throws RendezvousException ({@link Reason#CONNECTION}) when the peer is not a rendezvous
   *     service, or speaks another version; its message starts with {@code where}
   */
  static byte[] readHello(DataInputStream in, String where) throws IOException {
    if (in.readInt() != HELLO_MAGIC) {
      throw new RendezvousException(
          Reason.CONNECTION, where + ": the peer is not a rendezvous service " + "(bad greeting)");
    }
    int version = in.readInt();
    if (version != VERSION) {
      throw new RendezvousException(
          Reason.CONNECTION,
          where + ": the service speaks protocol version " + version + ", this client " + VERSION);
    }
    byte[] nonce = new byte[NONCE_BYTES];
    in.readFully(nonce);
    return nonce;
  }

  /** The REQUEST frame: the header ({@link #requestHeader}), its MAC, the sealed entry, its MAC. */
  static byte[] request(byte[] secret, byte[] nonce, byte[] header, byte[] sealedEntry) {
    return ByteBuffer.allocate(header.length + 2 * MAC_BYTES + sealedEntry.length)
        .put(header)
        .put(headerMac(secret, nonce, header))
        .put(sealedEntry)
        .put(entryMac(secret, nonce, header, sealedEntry))
        .array();
  }

  /** What the server reads first of a REQUEST: the header and its MAC. */
  static final int REQUEST_HEADER_FRAME_BYTES = REQUEST_HEADER_BYTES + MAC_BYTES;

  /**
   * Whether the first {@code partial.position()} bytes of a request header (at least one) agree
   * with a request of this version to a registration {@code known} accepts, as far as they go: a
   * connection that sent them is a rank on its way, not a stranger that sent nothing useful.
   */
  static boolean isPromisingRequestPrefix(ByteBuffer partial, LongPredicate known) {
    int n = partial.position();
    if (n == 0) {
      return false;
    }
    ByteBuffer expected = ByteBuffer.allocate(8).putInt(REQUEST_MAGIC).putInt(VERSION);
    for (int i = 0; i < Math.min(n, 8); i++) {
      if (partial.get(i) != expected.get(i)) {
        return false;
      }
    }
    return n < 16 || known.test(partial.getLong(8));
  }

  /**
   * A REQUEST's header and its MAC, as the server reads them before it knows the registration.
   *
   * @param bytes the header as sent (the entry's MAC covers it too)
   */
  record RequestHeader(
      byte[] bytes,
      byte[] mac,
      int magic,
      int version,
      long registrationId,
      int stageId,
      int stageAttempt,
      int rank,
      long timeoutMillis,
      int entryLength) {
    /** Reads {@link #REQUEST_HEADER_FRAME_BYTES} bytes. */
    static RequestHeader read(ByteBuffer frame) {
      byte[] bytes = new byte[REQUEST_HEADER_BYTES];
      frame.get(bytes);
      byte[] mac = new byte[MAC_BYTES];
      frame.get(mac);
      ByteBuffer h = ByteBuffer.wrap(bytes);
      return new RequestHeader(
          bytes,
          mac,
          h.getInt(),
          h.getInt(),
          h.getLong(),
          h.getInt(),
          h.getInt(),
          h.getInt(),
          h.getLong(),
          h.getInt());
    }

    /** The header's MAC matches under this registration's secret and the connection's nonce. */
    boolean authenticates(byte[] secret, byte[] nonce) {
      return macMatches(mac, headerMac(secret, nonce, bytes));
    }

    /** What the server reads next: the sealed entry and its MAC. */
    int entryFrameBytes() {
      return entryLength + MAC_BYTES;
    }
  }

  /**
   * Reads the rest of a REQUEST (its {@link RequestHeader#entryFrameBytes}): the sealed entry, or
   * null when the entry's MAC does not match.
   */
  static byte[] readSealedEntry(
      ByteBuffer frame, byte[] secret, byte[] nonce, RequestHeader header) {
    byte[] sealed = new byte[frame.remaining() - MAC_BYTES];
    frame.get(sealed);
    byte[] mac = new byte[MAC_BYTES];
    frame.get(mac);
    return macMatches(mac, entryMac(secret, nonce, header.bytes(), sealed)) ? sealed : null;
  }

  /** The REPLY frame for a table without its MAC, built once for every rank. */
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

  /** The ERROR frame's body (reason, length, message), before its authentication byte. */
  static byte[] errorFrame(Reason reason, String message) {
    byte[] text = message.getBytes(StandardCharsets.UTF_8);
    if (text.length > MAX_MESSAGE_BYTES) {
      String cut =
          message.substring(0, Math.min(message.length(), MAX_MESSAGE_BYTES / 4 - 4)) + " ...";
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

  /**
   * A round's outcome on the wire, built once; each rank's copy ends with a MAC bound to its
   * connection.
   */
  static final class Verdict {
    private final byte[] frame;
    private final byte[] digest; // SHA-256 of a reply frame; null for an error

    private Verdict(byte[] frame, byte[] digest) {
      this.frame = frame;
      this.digest = digest;
    }

    /** A REPLY carrying the (sealed) entries, indexed by rank. */
    static Verdict reply(byte[][] entries) {
      byte[] frame = replyFrame(entries);
      return new Verdict(frame, sha256Digest().digest(frame));
    }

    /** An ERROR. */
    static Verdict error(Reason reason, String message) {
      return new Verdict(errorFrame(reason, message), null);
    }

    /**
     * The bytes for one rank: the shared frame, then its authentication; an error for a request
     * that could not be authenticated ({@code secret} null) goes out unauthenticated.
     */
    ByteBuffer[] forRank(byte[] secret, byte[] nonce, int rank) {
      if (digest != null) {
        return new ByteBuffer[] {
          ByteBuffer.wrap(frame), ByteBuffer.wrap(replyMac(secret, nonce, rank, digest))
        };
      }
      if (secret == null) {
        return new ByteBuffer[] {ByteBuffer.wrap(frame), ByteBuffer.wrap(new byte[] {0})};
      }
      return new ByteBuffer[] {
        ByteBuffer.wrap(frame),
        ByteBuffer.wrap(new byte[] {1}),
        ByteBuffer.wrap(errorMac(secret, nonce, rank, frame))
      };
    }
  }

  /**
   * Reads the rest of a verdict whose first byte was {@code status}: the table of {@code rankSize}
   * sealed entries, once its MAC for this rank and nonce matches.
   *
   * @param where how the exceptions' messages start (the rank and its round)
   * @param service the service's host:port, for the messages
   * @throws RendezvousException the ERROR's reason and message; or {@link Reason#CONNECTION} for a
   *     malformed verdict, {@link Reason#AUTHENTICATION} for one that does not authenticate
   */
  static byte[][] readVerdict(
      DataInputStream in,
      int status,
      byte[] secret,
      byte[] nonce,
      int rank,
      int rankSize,
      String where,
      String service)
      throws IOException {
    if (status != STATUS_OK) {
      throw readError(in, status, secret, nonce, rank, where);
    }
    MessageDigest reply = sha256Digest();
    reply.update((byte) status);
    int count = in.readInt();
    reply.update(intBytes(count));
    if (count != rankSize) {
      throw new RendezvousException(
          Reason.CONNECTION,
          where + ": malformed reply (" + count + " entries, " + "expected " + rankSize + ")");
    }
    byte[][] table = new byte[count][];
    long total = 0;
    for (int r = 0; r < count; r++) {
      int length = in.readInt();
      total += Math.max(0, length);
      if (length < 0 || length > MAX_SEALED_ENTRY_BYTES || total > MAX_TABLE_BYTES) {
        throw new RendezvousException(
            Reason.CONNECTION,
            where + ": malformed reply (entry " + r + " has " + length + " bytes)");
      }
      table[r] = new byte[length];
      in.readFully(table[r]);
      reply.update(intBytes(length));
      reply.update(table[r]);
    }
    byte[] mac = new byte[MAC_BYTES];
    in.readFully(mac);
    if (!macMatches(mac, replyMac(secret, nonce, rank, reply.digest()))) {
      throw new RendezvousException(
          Reason.AUTHENTICATION,
          where
              + ": the table from "
              + service
              + " does not authenticate (not sent by the rendezvous service, or altered)");
    }
    return table;
  }

  /** The exception an ERROR carries; its MAC, when it has one, must match. */
  private static RendezvousException readError(
      DataInputStream in, int status, byte[] secret, byte[] nonce, int rank, String where)
      throws IOException {
    int length = in.readInt();
    if (length < 0 || length > MAX_MESSAGE_BYTES) {
      return new RendezvousException(
          Reason.CONNECTION, where + ": malformed error reply (" + length + " bytes)");
    }
    byte[] text = new byte[length];
    in.readFully(text);
    int authenticated = in.readUnsignedByte();
    if (authenticated != 0) {
      byte[] mac = new byte[MAC_BYTES];
      in.readFully(mac);
      byte[] body =
          ByteBuffer.allocate(5 + length).put((byte) status).putInt(length).put(text).array();
      if (!macMatches(mac, errorMac(secret, nonce, rank, body))) {
        return new RendezvousException(
            Reason.AUTHENTICATION,
            where
                + ": an error reply that does not "
                + "authenticate (not sent by the rendezvous service, or altered)");
      }
    }
    return new RendezvousException(
        Reason.fromCode(status), where + ": " + new String(text, StandardCharsets.UTF_8));
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
