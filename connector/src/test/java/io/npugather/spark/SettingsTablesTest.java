package io.npugather.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Predicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * What is made from {@link NpuGatherConf#SETTINGS} and kept in the repository: the settings' tables
 * of docs/operations.md and the Python package's keywords (python/npugather/options.json, which the
 * wheel carries). Each test makes its file's part again and fails when the file differs; run with
 * {@code -Dnpugather.settings.write=true} to write them instead.
 */
class SettingsTablesTest {
  private static final Path PROJECT = Path.of(System.getProperty("user.dir")).getParent();
  private static final Path OPERATIONS = PROJECT.resolve("docs/operations.md");
  private static final Path PYTHON_KEYWORDS = PROJECT.resolve("python/npugather/options.json");
  private static final boolean WRITE = Boolean.getBoolean("npugather.settings.write");

  /** A table's place in the docs: between this comment and the next blank line. */
  private static final Pattern TABLE =
      Pattern.compile(
          "(<!-- settings: (?<name>[a-z]+), made from NpuGatherConf.SETTINGS -->\n)"
              + "[^\n]+\n(?:\\|[^\n]*\n)*");

  @Test
  void theDocsTablesAreTheSettings() throws IOException {
    String docs = Files.readString(OPERATIONS, StandardCharsets.UTF_8);
    Matcher tables = TABLE.matcher(docs);
    StringBuilder made = new StringBuilder();
    int found = 0;
    while (tables.find()) {
      String name = tables.group("name");
      Predicate<Setting<?>> shown =
          switch (name) {
            case "options" -> s -> s.scope() == Setting.Scope.OPTION;
            case "others" -> s -> s.scope() != Setting.Scope.OPTION;
            default -> throw new AssertionError("no settings table named " + name);
          };
      tables.appendReplacement(made, Matcher.quoteReplacement(tables.group(1) + table(shown)));
      found++;
    }
    tables.appendTail(made);
    assertEquals(2, found, "the settings tables of " + OPERATIONS);
    check(OPERATIONS, docs, made.toString());
  }

  @Test
  void thePythonKeywordsAreTheOptions() throws IOException {
    List<Map<String, String>> keywords =
        AllGatherOptions.OPTIONS.stream().map(SettingsTablesTest::keyword).toList();
    String made =
        new ObjectMapper()
                .enable(SerializationFeature.INDENT_OUTPUT)
                .writeValueAsString(Map.of("options", keywords))
            + "\n";
    String existing =
        Files.exists(PYTHON_KEYWORDS)
            ? Files.readString(PYTHON_KEYWORDS, StandardCharsets.UTF_8)
            : "";
    check(PYTHON_KEYWORDS, existing, made);
  }

  /** A Markdown table of the settings {@code shown} selects, one row each. */
  private static String table(Predicate<Setting<?>> shown) {
    StringBuilder table = new StringBuilder("| key | default | meaning |\n| --- | --- | --- |\n");
    for (Setting<?> setting : NpuGatherConf.SETTINGS) {
      if (shown.test(setting)) {
        String defaultText = setting.defaultText();
        table
            .append("| `")
            .append(setting.key())
            .append("` | ")
            .append(
                defaultText == null
                    ? "derived"
                    : "`" + (defaultText.isEmpty() ? "\"\"" : defaultText) + "`")
            .append(" | ")
            .append(setting.doc())
            .append(" |\n");
      }
    }
    return table.toString();
  }

  /** An option as the Python package reads it: its keyword is the key's name in snake case. */
  private static Map<String, String> keyword(Setting<?> option) {
    String name = option.key().substring(option.key().lastIndexOf('.') + 1);
    Map<String, String> keyword = new LinkedHashMap<>();
    keyword.put("keyword", name.replaceAll("([A-Z])", "_$1").toLowerCase(Locale.ROOT));
    keyword.put("key", option.key());
    keyword.put("kind", option.type().kind());
    keyword.put("default", option.defaultText());
    keyword.put("allowed", option.allowed());
    keyword.put("doc", option.doc());
    return keyword;
  }

  private static void check(Path file, String existing, String made) throws IOException {
    if (WRITE) {
      Files.writeString(file, made, StandardCharsets.UTF_8);
      return;
    }
    assertEquals(
        made,
        existing,
        file
            + " is not what the settings make; rewrite it with mvn -pl connector test"
            + " -Dtest=SettingsTablesTest -Dnpugather.settings.write=true");
  }
}
