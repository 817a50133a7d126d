package io.npugather;

/** How ranks map onto processes (ATB's {@code CommMode}). */
public enum CommMode {
  /** Each rank is its own process (the default). */
  COMM_MULTI_PROCESS(0),
  /** Ranks are threads of one process. */
  COMM_MULTI_THREAD(1);

  private final int nativeCode;

  CommMode(int nativeCode) {
    this.nativeCode = nativeCode;
  }

  int nativeCode() {
    return nativeCode;
  }
}
