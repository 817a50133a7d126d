package io.npugather.bench;

import java.nio.ByteBuffer;

/** A heap byte buffer that doubles when a write needs more room. */
final class GrowableBuffer {
  private ByteBuffer buffer;

  GrowableBuffer(int initialBytes) {
    buffer = ByteBuffer.allocate(Math.max(64, initialBytes));
  }

  /** The buffer, positioned for writing, with at least {@code bytes} remaining. */
  ByteBuffer reserve(int bytes) {
    if (buffer.remaining() < bytes) {
      long needed = (long) buffer.position() + bytes;
      long capacity = Math.max(needed, 2L * buffer.capacity());
      if (capacity > Integer.MAX_VALUE - 16) {
        throw new IllegalStateException("a serialised partition exceeds 2 GiB");
      }
      ByteBuffer larger = ByteBuffer.allocate((int) capacity);
      buffer.flip();
      larger.put(buffer);
      buffer = larger;
    }
    return buffer;
  }

  /** The bytes written so far (a copy). */
  byte[] toByteArray() {
    byte[] bytes = new byte[buffer.position()];
    System.arraycopy(buffer.array(), 0, bytes, 0, bytes.length);
    return bytes;
  }
}
