package io.npugather.spark;

import io.npugather.spark.memory.GatherMemory;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;

/**
 * What one rank contributes to the rendezvous round: the root info (root rank only), where it
 * runs (host, device), the most bytes it may receive in a gather and where that limit comes from
 * ({@link GatherMemory#receiveLimit}), and a payload of the caller's (for {@code allGatherOnNpu},
 * the partition's layout; empty for {@code onRanks}). Every rank decodes the same table.
 */
record RankEntry(String host, int deviceId, long receiveLimit, String receiveLimitSource, byte[] rootInfo,
    byte[] payload) {
  private static final int VERSION = 2;
  private static final int MAX_FIELD_BYTES = 1 << 20;

  byte[] toBytes() {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream(64 + rootInfo.length + payload.length);
    try (DataOutputStream out = new DataOutputStream(bytes)) {
      out.writeByte(VERSION);
      out.writeUTF(host);
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

  static RankEntry fromBytes(int rank, byte[] bytes) {
    try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(bytes))) {
      int version = in.readUnsignedByte();
      if (version != VERSION) {
        throw new IllegalStateException("rank " + rank + " sent a rendezvous entry of version "
            + version + "; this rank speaks version " + VERSION
            + " (are all executors running the same NpuGather jar?)");
      }
      String host = in.readUTF();
      int deviceId = in.readInt();
      long receiveLimit = in.readLong();
      String receiveLimitSource = in.readUTF();
      byte[] rootInfo = readField(in, rank, "root info");
      byte[] payload = readField(in, rank, "payload");
      if (in.available() != 0) {
        throw new IllegalStateException("rank " + rank + "'s rendezvous entry has trailing bytes");
      }
      return new RankEntry(host, deviceId, receiveLimit, receiveLimitSource, rootInfo, payload);
    } catch (IOException e) {
      throw new IllegalStateException("rank " + rank + "'s rendezvous entry is truncated", e);
    }
  }

  private static byte[] readField(DataInputStream in, int rank, String name) throws IOException {
    int length = in.readInt();
    if (length < 0 || length > MAX_FIELD_BYTES) {
      throw new IllegalStateException(
          "rank " + rank + "'s rendezvous entry has a " + name + " of " + length + " bytes");
    }
    byte[] field = new byte[length];
    in.readFully(field);
    return field;
  }
}
