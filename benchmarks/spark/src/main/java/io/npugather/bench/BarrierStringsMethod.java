package io.npugather.bench;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.List;
import org.apache.spark.BarrierTaskContext;

/**
 * A barrier stage in which every task serialises its partition (binary, Base64) into one String and
 * exchanges it with {@code BarrierTaskContext.allGather}, then decodes every rank's string.
 */
final class BarrierStringsMethod implements GatherMethod {
  @Override
  public String name() {
    return "barrier-strings";
  }

  @Override
  public Outcome run(BenchInput input) {
    Shape shape = input.shape();
    int initialBytes =
        (int) Math.min(Integer.MAX_VALUE / 2, input.rowsPerPartition() * (shape.bytesPerRow() + 4));
    List<long[]> digests =
        Barrier.collect(
            input.data().queryExecution().toRdd(),
            long[].class,
            (partition, rows) -> {
              GrowableBuffer own = new GrowableBuffer(initialBytes);
              while (rows.hasNext()) {
                shape.write(rows.next(), 0, own);
              }
              String message =
                  new String(
                      Base64.getEncoder().encode(own.toByteArray()), StandardCharsets.ISO_8859_1);
              String[] all = BarrierTaskContext.get().allGather(message);
              long count = 0;
              long checksum = 0;
              for (String each : all) {
                ByteBuffer in = ByteBuffer.wrap(Base64.getDecoder().decode(each));
                while (in.hasRemaining()) {
                  checksum += Shape.readHash(in);
                  count++;
                }
              }
              return Outcome.digest(partition, count, checksum);
            });
    return Outcome.of(digests);
  }
}
