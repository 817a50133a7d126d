package io.npugather.spark;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class TeardownTest {
  private final List<String> closed = new ArrayList<>();

  private AutoCloseable resource(String name) {
    return () -> closed.add(name);
  }

  private AutoCloseable failing(String name, Throwable error) {
    return () -> {
      closed.add(name);
      if (error instanceof Exception e) {
        throw e;
      }
      throw (Error) error;
    };
  }

  @Test
  void closesEveryResourceInOrderAndReportsNothingWhenAllClose() {
    assertNull(Teardown.closeAll(resource("a"), null, resource("b"), resource("c")));
    assertEquals(List.of("a", "b", "c"), closed);
  }

  @Test
  void keepsTheFirstErrorAndAddsTheLaterOnesAsSuppressed() {
    IllegalStateException first = new IllegalStateException("first");
    IllegalArgumentException second = new IllegalArgumentException("second");
    Exception third = new Exception("third, checked");
    Throwable reported =
        Teardown.closeAll(
            resource("a"),
            failing("b", first),
            failing("c", second),
            resource("d"),
            failing("e", third));
    assertSame(first, reported);
    assertArrayEquals(new Throwable[] {second, third}, first.getSuppressed());
  }

  @Test
  void closesEverythingEvenWhenEveryCloseThrowsAnError() {
    Error first = new OutOfMemoryError("first");
    Error second = new AssertionError("second");
    Throwable reported =
        Teardown.closeAll(failing("a", first), failing("b", second), resource("c"));
    assertEquals(List.of("a", "b", "c"), closed);
    assertSame(first, reported);
    assertArrayEquals(new Throwable[] {second}, first.getSuppressed());
  }

  @Test
  void aFailureOfTheWorkComesFirstAndCarriesTheTeardownsErrors() {
    RuntimeException failure = new RuntimeException("the work failed");
    IllegalStateException leak = new IllegalStateException("leak");
    Throwable reported = Teardown.closeAll(failure, failing("a", leak), resource("b"));
    assertSame(failure, reported);
    assertArrayEquals(new Throwable[] {leak}, failure.getSuppressed());
    assertEquals(List.of("a", "b"), closed);
  }

  @Test
  void aFailureWithACleanTeardownIsReturnedUnchanged() {
    RuntimeException failure = new RuntimeException("the work failed");
    assertSame(failure, Teardown.closeAll(failure, resource("a")));
    assertEquals(0, failure.getSuppressed().length);
  }

  @Test
  void anErrorThrownAgainByALaterCloseIsNotSuppressedOnItself() {
    IllegalStateException shared = new IllegalStateException("shared");
    Throwable reported = Teardown.closeAll(failing("a", shared), failing("b", shared));
    assertSame(shared, reported);
    assertEquals(0, shared.getSuppressed().length);
    assertEquals(List.of("a", "b"), closed);
  }
}
