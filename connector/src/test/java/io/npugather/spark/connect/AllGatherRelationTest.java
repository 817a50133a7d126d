package io.npugather.spark.connect;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(60)
class AllGatherRelationTest {
  private static final Random RANDOM = new Random(7);

  @Test
  void aRelationSurvivesItsWireFormatByteForByte() {
    for (int size : new int[] {0, 1, 127, 128, 16_383, 16_384, 300_000}) {
      byte[] input = new byte[size];
      RANDOM.nextBytes(input);
      Map<String, String> options = new LinkedHashMap<>();
      options.put("npugather.timeout", "60000ms");
      options.put("npugather.commDomain", "домен-" + size);
      options.put("npugather.sourceRankColumn", "");

      AllGatherRelation decoded =
          AllGatherRelation.fromAny(new AllGatherRelation(input, options).toAny()).orElseThrow();

      assertArrayEquals(input, decoded.input());
      assertEquals(options, decoded.options());
      assertEquals(
          Arrays.asList(options.keySet().toArray()),
          Arrays.asList(decoded.options().keySet().toArray()));
    }
  }

  @Test
  void asARelationItIsSparksRelationWhoseExtensionItIs() throws Exception {
    byte[] input = new byte[1000];
    RANDOM.nextBytes(input);
    AllGatherRelation gather = new AllGatherRelation(input, Map.of("npugather.timeout", "60s"));

    org.apache.spark.connect.proto.Relation relation =
        org.apache.spark.connect.proto.Relation.parseFrom(gather.toRelation());

    assertTrue(relation.hasExtension());
    assertArrayEquals(gather.toAny(), relation.getExtension().toByteArray());
  }

  @Test
  void anotherPluginsRelationIsLeftAlone() {
    ByteArrayOutputStream any = new ByteArrayOutputStream();
    field(any, 1, "type.googleapis.com/spark.connect.Examples".getBytes(StandardCharsets.UTF_8));
    field(any, 2, new byte[] {1, 2, 3});
    assertTrue(AllGatherRelation.fromAny(any.toByteArray()).isEmpty());
    assertTrue(AllGatherRelation.fromAny(new byte[0]).isEmpty());
  }

  @Test
  void fieldsOfALaterVersionAreSkipped() {
    ByteArrayOutputStream message = new ByteArrayOutputStream();
    message.write(3 << 3); // field 3, varint
    message.write(0x96);
    message.write(0x01);
    message.write(4 << 3 | 1); // field 4, fixed64
    message.writeBytes(new byte[8]);
    field(message, 1, new byte[] {42});
    message.write(5 << 3 | 5); // field 5, fixed32
    message.writeBytes(new byte[4]);

    AllGatherRelation decoded = AllGatherRelation.fromAny(any(message.toByteArray())).orElseThrow();

    assertArrayEquals(new byte[] {42}, decoded.input());
    assertEquals(Map.of(), decoded.options());
  }

  @Test
  void malformedBytesAreRefusedNamingTheMessage() {
    byte[] good = new AllGatherRelation(new byte[] {1, 2, 3}, Map.of("a", "b")).toAny();
    for (int cut = 1; cut < good.length; cut++) {
      byte[] truncated = Arrays.copyOf(good, cut);
      IllegalArgumentException e =
          assertThrows(IllegalArgumentException.class, () -> AllGatherRelation.fromAny(truncated));
      assertTrue(
          e.getMessage().startsWith("malformed google.protobuf.Any: ")
              || e.getMessage().startsWith("npugather.connect.AllGatherOnNpu without its input"),
          e.getMessage());
    }
    IllegalArgumentException noInput =
        assertThrows(
            IllegalArgumentException.class, () -> AllGatherRelation.fromAny(any(new byte[0])));
    assertEquals(
        "npugather.connect.AllGatherOnNpu without its input relation (field 1)",
        noInput.getMessage());
    ByteArrayOutputStream badUtf8 = new ByteArrayOutputStream();
    field(badUtf8, 1, new byte[0]);
    ByteArrayOutputStream entry = new ByteArrayOutputStream();
    field(entry, 1, new byte[] {(byte) 0xC3});
    field(badUtf8, 2, entry.toByteArray());
    IllegalArgumentException utf8 =
        assertThrows(
            IllegalArgumentException.class,
            () -> AllGatherRelation.fromAny(any(badUtf8.toByteArray())));
    assertEquals(
        "malformed an options entry: field 1 that is not UTF-8 (at byte 3)", utf8.getMessage());
  }

  private static byte[] any(byte[] value) {
    ByteArrayOutputStream any = new ByteArrayOutputStream();
    field(any, 1, AllGatherRelation.TYPE_URL.getBytes(StandardCharsets.UTF_8));
    field(any, 2, value);
    return any.toByteArray();
  }

  /** A length-delimited field; its length below 128, or encoded as a two-byte varint. */
  private static void field(ByteArrayOutputStream out, int number, byte[] payload) {
    out.write(number << 3 | 2);
    if (payload.length < 128) {
      out.write(payload.length);
    } else {
      out.write(payload.length & 0x7F | 0x80);
      out.write(payload.length >>> 7);
    }
    out.writeBytes(payload);
  }
}
