package io.npugather.spark;

import io.npugather.NpuGatherException;
import io.npugather.ResultCode;
import io.npugather.spark.memory.GatherMemory;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;

/**
 * What one rank contributes to the rendezvous round: the root info (root rank only), where it runs
 * (host, the JVM it runs in ({@link #THIS_PROCESS}), device), the most bytes it may receive in a
 * gather and where that limit comes from ({@link GatherMemory#receiveLimit}), and a payload of the
 * caller's (for {@code allGatherOnNpu}, the partition's layout; empty for {@code onRanks}). Every
 * rank decodes the same table.
 */
record RankEntry(
    String host,
    String process,
    int deviceId,
    long receiveLimit,
    String receiveLimitSource,
    byte[] rootInfo,
    byte[] payload) {
  private static final int VERSION = 3;

  /** This JVM, as no other JVM anywhere names itself: ranks with the same one share memory. */
  static final String THIS_PROCESS = java.util.UUID.randomUUID().toString();

  private static final int MAX_FIELD_BYTES = 1 << 20;

  /** The operation the table's checks report in their exceptions. */
  static final String OPERATION = "rendezvous";

  byte[] toBytes() {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream(64 + rootInfo.length + payload.length);
    try (DataOutputStream out = new DataOutputStream(bytes)) {
      out.writeByte(VERSION);
      out.writeUTF(host);
      out.writeUTF(process);
      out.writeInt(deviceId);
      out.writeLong(receiveLimit);
      out.writeUTF(receiveLimitSource);
      out.writeInt(rootInfo.length);
      out.write(rootInfo);
      out.writeInt(payload.length);
      out.write(payload);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return bytes.toByteArray();
  }

  /**
   * Rank {@code rank}'s entry as {@code reader} decodes it.
   *
   * @throws NpuGatherException {@link ResultCode#INVALID_USAGE} when the entry is of another
   *     version (the ranks run different jars), {@link ResultCode#REMOTE_ERROR} when it is
   *     malformed; reported by {@code reader}
   */
  static RankEntry fromBytes(int reader, int rank, byte[] bytes) {
    try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(bytes))) {
      int version = in.readUnsignedByte();
      if (version != VERSION) {
        throw new NpuGatherException(
            ResultCode.INVALID_USAGE,
            OPERATION,
            reader,
            "rank "
                + rank
                + " sent a rendezvous entry of version "
                + version
                + "; this rank speaks version "
                + VERSION
                + " (are all executors running the same NpuGather jar?)");
      }
      String host = in.readUTF();
      String process = in.readUTF();
      int deviceId = in.readInt();
      long receiveLimit = in.readLong();
      String receiveLimitSource = in.readUTF();
      byte[] rootInfo = readField(in, reader, rank, "root info");
      byte[] payload = readField(in, reader, rank, "payload");
      if (in.available() != 0) {
        throw malformed(reader, "rank " + rank + "'s rendezvous entry has trailing bytes", null);
      }
      return new RankEntry(
          host, process, deviceId, receiveLimit, receiveLimitSource, rootInfo, payload);
    } catch (IOException e) {
      throw malformed(reader, "rank " + rank + "'s rendezvous entry is truncated", e);
    }
  }

  private static byte[] readField(DataInputStream in, int reader, int rank, String name)
      throws IOException {
    int length = in.readInt();
    if (length < 0 || length > MAX_FIELD_BYTES) {
      throw malformed(
          reader,
          "rank " + rank + "'s rendezvous entry has a " + name + " of " + length + " bytes",
          null);
    }
    byte[] field = new byte[length];
    in.readFully(field);
    return field;
  }

  private static NpuGatherException malformed(int reader, String message, Throwable cause) {
    NpuGatherException e =
        new NpuGatherException(ResultCode.REMOTE_ERROR, OPERATION, reader, message);
    if (cause != null) {
      e.initCause(cause);
    }
    return e;
  }
}
