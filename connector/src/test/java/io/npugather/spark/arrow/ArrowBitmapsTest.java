package io.npugather.spark.arrow;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.BitSet;
import java.util.Random;
import org.apache.arrow.memory.ArrowBuf;
import org.junit.jupiter.api.Test;

class ArrowBitmapsTest extends WithRootAllocator {
  private static final int BITS = 1 << 15;

  @Test
  void setValidSetsExactlyItsRangeWhateverItsLengthAndAlignment() {
    Random rnd = new Random(11);
    try (ArrowBuf buf = root.buffer(BITS / 8)) {
      long bitmap = buf.memoryAddress();
      for (int trial = 0; trial < 2000; trial++) {
        BitSet model = new BitSet(BITS);
        for (int i = 0; i < BITS / 8; i++) {
          byte b = (byte) rnd.nextInt(256);
          buf.setByte(i, b);
          for (int k = 0; k < 8; k++) {
            model.set(i * 8 + k, (b >> k & 1) != 0);
          }
        }
        // Short runs (an array's elements) and runs past the setMemory threshold.
        int n = trial % 4 == 0 ? rnd.nextInt(BITS / 2) : rnd.nextInt(600);
        int from = rnd.nextInt(BITS - n + 1);
        ArrowBitmaps.setValid(bitmap, from, n);
        model.set(from, from + n);
        for (int i = 0; i < BITS; i++) {
          if (model.get(i) != ArrowBitmaps.isSet(bitmap, i)) {
            assertEquals(
                model.get(i),
                ArrowBitmaps.isSet(bitmap, i),
                "bit " + i + ", run " + from + " + " + n);
          }
        }
      }
    }
  }
}
