package io.npugather.spark.testing;

/** The chain of causes of a failure as one text, for assertions on what a user would read. */
public final class Causes {
  private Causes() {}

  /** The message of {@code e} and of each of its causes, outermost first, each ended by " | ". */
  public static String messages(Throwable e) {
    StringBuilder all = new StringBuilder();
    for (Throwable t = e; t != null; t = t.getCause()) {
      all.append(t.getMessage()).append(" | ");
    }
    return all.toString();
  }
}
