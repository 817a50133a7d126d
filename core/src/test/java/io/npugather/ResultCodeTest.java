package io.npugather;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/** ResultCode against the C header's npg_result_t: same names, same values, both ways. */
class ResultCodeTest {
  private static final Path HEADER =
      Path.of(System.getProperty("user.dir"))
          .resolveSibling("native/src/main/cpp/include/npugather.h");

  /** npg_result_t's constants as the header declares them, without the NPG_ prefix. */
  private static Map<String, Integer> nativeResults() throws IOException {
    String header = Files.readString(HEADER);
    int end = header.indexOf("} npg_result_t;");
    int start = header.lastIndexOf("typedef enum", end);
    assertTrue(start >= 0 && end > start, "npg_result_t not found in " + HEADER);
    Matcher m = Pattern.compile("NPG_(\\w+)\\s*=\\s*(\\d+)").matcher(header.substring(start, end));
    Map<String, Integer> values = new LinkedHashMap<>();
    while (m.find()) {
      values.put(m.group(1), Integer.parseInt(m.group(2)));
    }
    return values;
  }

  @Test
  void everyNativeResultMapsToTheCodeOfTheSameNameAndBack() throws IOException {
    Map<String, Integer> natives = nativeResults();
    assertEquals(ResultCode.values().length, natives.size(), "npg_result_t has " + natives);
    natives.forEach(
        (name, value) -> {
          ResultCode code = ResultCode.fromNative(value);
          assertEquals(name, code.name(), "npg_result_t value " + value);
          assertEquals(value, code.nativeCode(), name);
        });
  }

  @Test
  void anUnknownNativeResultIsAnInternalError() {
    for (int unknown : new int[] {-1, 8, 99, Integer.MAX_VALUE, Integer.MIN_VALUE}) {
      assertEquals(ResultCode.INTERNAL_ERROR, ResultCode.fromNative(unknown), "value " + unknown);
    }
  }
}
