package io.npugather.spark.connect;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * The relation a Spark Connect client sends for {@code allGatherOnNpu}: the relation's extension, a
 * {@code google.protobuf.Any} whose type URL is {@link #TYPE_URL} and whose value is the message
 *
 * <pre>
 * package npugather.connect;
 * message AllGatherOnNpu {
 *   spark.connect.Relation input = 1;  // the DataFrame to gather
 *   map&lt;string, string&gt; options = 2;  // npugather.* keys, as NpuGather.allGatherOnNpu takes them
 * }
 * </pre>
 *
 * <p>Encoded and decoded here in protobuf's wire format, which is a stable specification: Spark's
 * server carries protobuf relocated under a name of its own, so a plugin that named it would break
 * with Spark's packaging. {@code input} stays bytes, which Spark's own {@code Relation} parses.
 * Fields this version does not know are skipped, as protobuf does.
 */
public final class AllGatherRelation {
  /** The type URL of the message: protobuf's prefix and the message's full name. */
  public static final String TYPE_URL = "type.googleapis.com/npugather.connect.AllGatherOnNpu";

  // Field numbers of google.protobuf.Any, of AllGatherOnNpu and of a map entry.
  private static final int ANY_TYPE_URL = 1;
  private static final int ANY_VALUE = 2;
  private static final int INPUT = 1;
  private static final int OPTIONS = 2;
  private static final int ENTRY_KEY = 1;
  private static final int ENTRY_VALUE = 2;
  // The field of spark.connect.Relation that holds a plugin's relation.
  private static final int RELATION_EXTENSION = 998;

  private final byte[] input;
  private final Map<String, String> options;

  /**
   * @param input a serialized {@code spark.connect.Relation}
   * @param options {@code npugather.*} keys and their values
   */
  public AllGatherRelation(byte[] input, Map<String, String> options) {
    this.input = Objects.requireNonNull(input, "input").clone();
    this.options = Collections.unmodifiableMap(new LinkedHashMap<>(options));
  }

  /** The serialized {@code spark.connect.Relation} to gather. */
  public byte[] input() {
    return input.clone();
  }

  /** The options, in the order the client sent them. */
  public Map<String, String> options() {
    return options;
  }

  /**
   * The relation a serialized {@code google.protobuf.Any} carries, or empty when its type URL is
   * another message's (another plugin's relation).
   *
   * @throws IllegalArgumentException when the bytes are not a well-formed message
   */
  public static Optional<AllGatherRelation> fromAny(byte[] any) {
    String typeUrl = "";
    byte[] value = new byte[0];
    for (WireReader reader = new WireReader(any, "google.protobuf.Any"); reader.next(); ) {
      switch (reader.field()) {
        case ANY_TYPE_URL -> typeUrl = reader.string();
        case ANY_VALUE -> value = reader.bytes();
        default -> reader.skip();
      }
    }
    if (!TYPE_URL.equals(typeUrl)) {
      return Optional.empty();
    }
    byte[] input = null;
    Map<String, String> options = new LinkedHashMap<>();
    for (WireReader reader = new WireReader(value, "npugather.connect.AllGatherOnNpu");
        reader.next(); ) {
      switch (reader.field()) {
        case INPUT -> input = reader.bytes();
        case OPTIONS -> readEntry(reader.bytes(), options);
        default -> reader.skip();
      }
    }
    if (input == null) {
      throw new IllegalArgumentException(
          "npugather.connect.AllGatherOnNpu without its input relation (field 1)");
    }
    return Optional.of(new AllGatherRelation(input, options));
  }

  private static void readEntry(byte[] entry, Map<String, String> options) {
    String key = "";
    String value = "";
    for (WireReader reader = new WireReader(entry, "an options entry"); reader.next(); ) {
      switch (reader.field()) {
        case ENTRY_KEY -> key = reader.string();
        case ENTRY_VALUE -> value = reader.string();
        default -> reader.skip();
      }
    }
    options.put(key, value);
  }

  /** This relation as a serialized {@code google.protobuf.Any}: what a client sends. */
  public byte[] toAny() {
    ByteArrayOutputStream message = new ByteArrayOutputStream();
    writeField(message, INPUT, input);
    for (Map.Entry<String, String> option : options.entrySet()) {
      ByteArrayOutputStream entry = new ByteArrayOutputStream();
      writeField(entry, ENTRY_KEY, option.getKey().getBytes(StandardCharsets.UTF_8));
      writeField(entry, ENTRY_VALUE, option.getValue().getBytes(StandardCharsets.UTF_8));
      writeField(message, OPTIONS, entry.toByteArray());
    }
    ByteArrayOutputStream any = new ByteArrayOutputStream();
    writeField(any, ANY_TYPE_URL, TYPE_URL.getBytes(StandardCharsets.UTF_8));
    writeField(any, ANY_VALUE, message.toByteArray());
    return any.toByteArray();
  }

  /**
   * A serialized {@code spark.connect.Relation} whose extension is this relation: what a client's
   * plan holds.
   */
  public byte[] toRelation() {
    ByteArrayOutputStream relation = new ByteArrayOutputStream();
    writeField(relation, RELATION_EXTENSION, toAny());
    return relation.toByteArray();
  }

  private static void writeField(ByteArrayOutputStream out, int field, byte[] payload) {
    writeVarint(out, ((long) field << 3) | WireReader.LENGTH_DELIMITED);
    writeVarint(out, payload.length);
    out.writeBytes(payload);
  }

  private static void writeVarint(ByteArrayOutputStream out, long value) {
    while ((value & ~0x7FL) != 0) {
      out.write((int) ((value & 0x7F) | 0x80));
      value >>>= 7;
    }
    out.write((int) value);
  }
}
