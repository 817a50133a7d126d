package io.npugather.spark;

/**
 * The one teardown rule of the connector's tasks: close everything, keep the first error, add the
 * later ones to it as suppressed.
 */
final class Teardown {
  private Teardown() {}

  /**
   * Closes every resource that is not null, in order, whatever the others throw.
   *
   * @return the first error a close threw, with every later one added to it as suppressed; null
   *     when all closed
   */
  static Throwable closeAll(AutoCloseable... resources) {
    return closeAll(null, resources);
  }

  /**
   * Closes every resource that is not null, in order, whatever the others throw, after {@code
   * failure} (null when the work succeeded).
   *
   * @return {@code failure} with every error a close threw added to it as suppressed; without a
   *     failure, the first error a close threw with the later ones as suppressed, or null
   */
  static Throwable closeAll(Throwable failure, AutoCloseable... resources) {
    Throwable first = failure;
    for (AutoCloseable resource : resources) {
      if (resource == null) {
        continue;
      }
      try {
        resource.close();
      } catch (Throwable e) {
        if (first == null) {
          first = e;
        } else if (first != e) {
          first.addSuppressed(e);
        }
      }
    }
    return first;
  }
}
