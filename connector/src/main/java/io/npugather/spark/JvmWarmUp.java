package io.npugather.spark;

import io.npugather.NativeLibrary;
import io.npugather.block.BlockLayout;
import io.npugather.block.LocalBlock;
import io.npugather.spark.arrow.read.GatheredPartitions;
import io.npugather.spark.arrow.write.PartitionWriter;
import io.npugather.spark.memory.GatherMemory;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import javax.crypto.Cipher;
import javax.crypto.Mac;
import javax.crypto.spec.GCMParameterSpec;
import javax.crypto.spec.SecretKeySpec;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The one-time costs a JVM pays for its first gather, paid ahead of it: the native library, Arrow's
 * schema machinery (its JSON mapper) and vector classes, the conversion's classes and the task
 * memory, the receiving side's (Arrow's vector loader and its codec lookup, the checks of the
 * peers' blocks, the gathered batches), and the first use of the JDK's cryptography (AES-GCM,
 * HMAC-SHA256, SHA-256, the secure random source) that the rendezvous uses. Once per JVM; a failure
 * is logged and left to the gather, which meets it again and reports it there.
 */
public final class JvmWarmUp {
  private static final Logger LOG = LoggerFactory.getLogger(JvmWarmUp.class);

  /** Every column kind the conversion writes, so that each vector class is loaded. */
  private static final StructType SCHEMA =
      new StructType()
          .add("boolean", DataTypes.BooleanType)
          .add("byte", DataTypes.ByteType)
          .add("short", DataTypes.ShortType)
          .add("int", DataTypes.IntegerType)
          .add("long", DataTypes.LongType)
          .add("float", DataTypes.FloatType)
          .add("double", DataTypes.DoubleType)
          .add("date", DataTypes.DateType)
          .add("timestamp", DataTypes.TimestampType)
          .add("string", DataTypes.StringType)
          .add("binary", DataTypes.BinaryType)
          .add("floats", DataTypes.createArrayType(DataTypes.FloatType))
          .add("doubles", DataTypes.createArrayType(DataTypes.DoubleType))
          .add("longs", DataTypes.createArrayType(DataTypes.LongType));

  private static final CountDownLatch DONE = new CountDownLatch(1);
  private static boolean started;

  private JvmWarmUp() {}

  /**
   * Starts the warm-up on a daemon thread, the first time this JVM asks; later calls do nothing.
   */
  public static synchronized void startInBackground() {
    if (started) {
      return;
    }
    started = true;
    Thread thread = new Thread(JvmWarmUp::runOnce, "npugather-warm-up");
    thread.setDaemon(true);
    thread.start();
  }

  /** Waits for the warm-up started by {@link #startInBackground}; false if it has not ended. */
  public static boolean awaitDone(long timeoutMillis) throws InterruptedException {
    return DONE.await(timeoutMillis, TimeUnit.MILLISECONDS);
  }

  private static void runOnce() {
    long start = System.nanoTime();
    try {
      run();
      LOG.info("NpuGather warmed up in {} ms", (System.nanoTime() - start) / 1_000_000);
    } catch (RuntimeException | Error | GeneralSecurityException e) {
      LOG.warn("NpuGather warm-up failed; the first gather pays its costs", e);
    } finally {
      DONE.countDown();
    }
  }

  /** Pays the costs now, on the calling thread. */
  static void run() throws GeneralSecurityException {
    NativeLibrary.load();
    try (BufferAllocator allocator = GatherMemory.newTaskAllocator("npugather-warm-up");
        LocalBlock block =
            PartitionWriter.fromRows(Collections.emptyIterator(), SCHEMA, "UTC", allocator)) {
      readBack(block, BlockLayout.fromBytes(block.layout().toBytes()), allocator);
    }
    byte[] key = new byte[32];
    new SecureRandom().nextBytes(key);
    Mac mac = Mac.getInstance("HmacSHA256");
    mac.init(new SecretKeySpec(key, "HmacSHA256"));
    mac.doFinal(key);
    MessageDigest.getInstance("SHA-256").digest(key);
    Cipher cipher = Cipher.getInstance("AES/GCM/NoPadding");
    cipher.init(
        Cipher.ENCRYPT_MODE,
        new SecretKeySpec(key, 0, 16, "AES"),
        new GCMParameterSpec(128, new byte[12]));
    cipher.doFinal(key);
  }

  /**
   * The receiving side of a gather over {@code block}: its bytes copied into a receive buffer as a
   * peer's, both ranks' vectors loaded and checked (Arrow's loader and its codec lookup), and their
   * batches made.
   */
  private static void readBack(LocalBlock block, BlockLayout layout, BufferAllocator allocator) {
    try (ArrowBuf recv = allocator.buffer(layout.blockBytes())) {
      block.copyTo(recv.memoryAddress());
      try (GatheredPartitions gathered =
          GatheredPartitions.wrap(
              recv, List.of(layout, layout), new long[] {0, 0}, 0, block, SCHEMA, allocator)) {
        for (int rank = 0; rank < 2; rank++) {
          gathered.batch(rank).rowIterator().forEachRemaining(row -> row.numFields());
        }
      }
    }
  }
}
