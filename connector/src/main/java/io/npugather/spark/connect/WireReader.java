package io.npugather.spark.connect;

import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * Reads the fields of one protobuf message in wire format, one after the other: {@link #next} moves
 * to a field, then {@link #bytes}, {@link #string} or {@link #skip} consumes its value. Malformed
 * input (truncated, over-long varints, bad UTF-8, unknown wire types) is an {@link
 * IllegalArgumentException} naming the message.
 */
final class WireReader {
  static final int VARINT = 0;
  static final int FIXED64 = 1;
  static final int LENGTH_DELIMITED = 2;
  static final int FIXED32 = 5;

  private final byte[] buffer;
  private final String message;
  private int position;
  private int field;
  private int wireType;

  WireReader(byte[] buffer, String message) {
    this.buffer = buffer;
    this.message = message;
  }

  /** Moves to the next field; false at the end of the message. */
  boolean next() {
    if (position == buffer.length) {
      return false;
    }
    long tag = varint();
    field = (int) (tag >>> 3);
    wireType = (int) (tag & 7);
    if (field <= 0) {
      throw malformed("a field number of 0");
    }
    return true;
  }

  int field() {
    return field;
  }

  byte[] bytes() {
    if (wireType != LENGTH_DELIMITED) {
      throw malformed("field " + field + " of wire type " + wireType + ", not length-delimited");
    }
    long length = varint();
    if (length > buffer.length - position) {
      throw malformed("field " + field + " longer than the message");
    }
    byte[] value = Arrays.copyOfRange(buffer, position, position + (int) length);
    position += (int) length;
    return value;
  }

  String string() {
    try {
      return StandardCharsets.UTF_8
          .newDecoder()
          .onMalformedInput(CodingErrorAction.REPORT)
          .onUnmappableCharacter(CodingErrorAction.REPORT)
          .decode(java.nio.ByteBuffer.wrap(bytes()))
          .toString();
    } catch (CharacterCodingException e) {
      throw malformed("field " + field + " that is not UTF-8");
    }
  }

  void skip() {
    switch (wireType) {
      case VARINT -> varint();
      case FIXED64 -> advance(8);
      case LENGTH_DELIMITED -> bytes();
      case FIXED32 -> advance(4);
      default -> throw malformed("field " + field + " of unknown wire type " + wireType);
    }
  }

  private void advance(int count) {
    if (count > buffer.length - position) {
      throw malformed("field " + field + " longer than the message");
    }
    position += count;
  }

  private long varint() {
    long value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (position == buffer.length) {
        throw malformed("a varint cut off at the end");
      }
      byte b = buffer[position++];
      value |= (long) (b & 0x7F) << shift;
      if (b >= 0) {
        return value;
      }
    }
    throw malformed("a varint of more than 10 bytes");
  }

  private IllegalArgumentException malformed(String what) {
    return new IllegalArgumentException(
        "malformed " + message + ": " + what + " (at byte " + position + ")");
  }
}
