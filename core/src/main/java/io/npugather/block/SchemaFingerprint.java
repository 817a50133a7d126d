package io.npugather.block;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Map;
import java.util.TreeMap;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.Schema;

/** The schema a block was written with, as the 64-bit value every rank's layout carries. */
public final class SchemaFingerprint {
  private SchemaFingerprint() {}

  /**
   * A stable 64-bit hash of an Arrow schema: every field's name, nullability, Arrow type (with its
   * parameters, e.g. time zone, precision, scale), dictionary encoding and metadata, recursively
   * through nested children, in order. Equal on every JVM for equal schemas.
   */
  public static long of(Schema schema) {
    StringBuilder sb = new StringBuilder(256);
    sb.append("npugather-arrow-schema-v1|");
    for (Field f : schema.getFields()) {
      appendField(sb, f);
    }
    appendMetadata(sb, schema.getCustomMetadata());
    MessageDigest md;
    try {
      md = MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("SHA-256 is not available", e);
    }
    byte[] d = md.digest(sb.toString().getBytes(StandardCharsets.UTF_8));
    long h = 0;
    for (int i = 0; i < 8; i++) {
      h = (h << 8) | (d[i] & 0xFFL);
    }
    return h;
  }

  private static void appendField(StringBuilder sb, Field f) {
    sb.append('(');
    appendString(sb, f.getName());
    sb.append(f.isNullable() ? "?" : "!");
    appendString(sb, f.getType().toString());
    if (f.getDictionary() != null) {
      sb.append("dict:");
      appendString(sb, f.getDictionary().toString());
    }
    appendMetadata(sb, f.getMetadata());
    sb.append('[');
    for (Field c : f.getChildren()) {
      appendField(sb, c);
    }
    sb.append("])");
  }

  private static void appendMetadata(StringBuilder sb, Map<String, String> md) {
    if (md == null || md.isEmpty()) {
      return;
    }
    sb.append('{');
    for (Map.Entry<String, String> e : new TreeMap<>(md).entrySet()) {
      appendString(sb, e.getKey());
      appendString(sb, e.getValue());
    }
    sb.append('}');
  }

  private static void appendString(StringBuilder sb, String s) {
    // Length-prefixed, so no choice of names can make two different schemas collide textually.
    String v = s == null ? "" : s;
    sb.append(v.length()).append(':').append(v);
  }
}
