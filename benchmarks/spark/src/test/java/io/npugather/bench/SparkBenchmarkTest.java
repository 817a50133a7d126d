package io.npugather.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The benchmark program on tiny inputs in local[2] and in executor JVMs of 2 ranks each: every
 * method's output verified against the input, the report written. (The measurements themselves are
 * runs of bin/npugather-bench.)
 */
class SparkBenchmarkTest {
  /**
   * What {@code bin/npugather-bench --joins} runs, on tiny tables: the three joins agree, with the
   * build side in one partition per slot (gathered where it lies) and in another number (moved to
   * the ranks first), on a long key and on a string key.
   */
  @Test
  void theJoinBenchmarkComparesTheThreeJoinsOfOneQuery() throws Exception {
    for (String partitions : List.of("0", "3")) {
      String key = partitions.equals("0") ? "long" : "string";
      String table =
          JoinBenchmark.run(new String[] {"local[2]", "1", "20000", "1", "0", partitions, key});
      assertTrue(table.contains(key + " key"), table);
      for (String method : List.of("| allgather |", "| broadcast |", "| sort-merge |")) {
        assertTrue(table.contains(method), table);
      }
      assertTrue(
          table.contains("build side in " + (partitions.equals("0") ? "2" : "3") + " partitions"),
          table);
    }
  }

  /**
   * With {@code spark.driver.maxResultSize} below the build side, Spark's broadcast fails (reported
   * in its row) and the ALLGATHER join, which passes nothing through the driver, completes.
   */
  @Test
  void aBuildSideAboveTheDriversResultLimitFailsOnlyTheBroadcast() throws Exception {
    String table = JoinBenchmark.run(new String[] {"local[2]", "4", "20000", "1", "1m"});
    assertTrue(table.matches("(?s).*\\| allgather \\| \\d+ \\|.*"), table);
    assertTrue(table.contains("| broadcast | fails: ") && table.contains("maxResultSize"), table);
    assertTrue(table.matches("(?s).*\\| sort-merge \\| \\d+ \\|.*"), table);
  }

  @Test
  void everyMethodDeliversEveryRowToEveryRankAndTheReportIsWritten(@TempDir Path dir)
      throws Exception {
    Path output = dir.resolve("report.md");
    Path csv = dir.resolve("report.csv");
    String[] args = {
      "--ranks",
      "2",
      "--sizes",
      "16K",
      "--masters",
      "local",
      "--runs",
      "1",
      "--warmup",
      "0",
      "--check-hash-repartition",
      "--output",
      output.toString(),
      "--csv",
      csv.toString()
    };
    Report report = new SparkBenchmark(BenchOptions.parse(args)).run(String.join(" ", args));

    assertTrue(report.allVerified(), report::markdown);
    Set<String> measured =
        report.measurements().stream()
            .map(m -> m.shape.label() + "/" + m.method)
            .collect(Collectors.toSet());
    for (Shape shape : Shape.values()) {
      for (String method : GatherMethod.NAMES) {
        assertTrue(measured.contains(shape.label() + "/" + method), shape + " " + method);
      }
    }
    String markdown = Files.readString(output);
    assertTrue(markdown.contains("| master | ranks | ranks/executor | shape |"), markdown);
    String[] parts = markdown.split("The gather's phases, per rank");
    assertEquals(2, parts.length, markdown);
    String results = parts[0];
    for (String method :
        List.of(
            "| npu |",
            "| broadcast |",
            "| barrier-strings |",
            "| shuffle |",
            "| floor |",
            "| memcpy |",
            "| floor + memcpy |")) {
      assertEquals(
          Shape.values().length,
          results
              .lines()
              .filter(line -> line.startsWith("| local[2] |") && line.contains(method))
              .count(),
          method + " once per shape in\n" + markdown);
    }
    // The phases: a row per shape for each gather, its conversion against the copy rate and its
    // read against the floor's.
    for (String gather : List.of("| npu |", "| npu-per-rank |")) {
      List<String> phases =
          parts[1].lines().filter(line -> line.contains(gather)).collect(Collectors.toList());
      assertEquals(Shape.values().length, phases.size(), gather + " in\n" + parts[1]);
      String header =
          parts[1].lines().filter(line -> line.startsWith("| master |")).findFirst().orElseThrow();
      for (String line : phases) {
        assertEquals(header.split("\\|").length, line.split("\\|").length, line);
        String[] cells = line.split("\\|");
        assertTrue(cells[8].trim().matches("\\d+\\.\\d\\d"), line); // conversion / memcpy
        assertTrue(cells[14].trim().matches("\\d+\\.\\d\\d"), line); // read / memcpy
        assertTrue(cells[15].trim().matches("\\d+\\.\\d\\d"), line); // read / floor's
      }
    }
    // The CSV: its header, then a verified row per shape and method (floor + memcpy included).
    List<String> rows = Files.readAllLines(csv);
    assertEquals(Report.CSV_HEADER, rows.get(0));
    assertEquals(
        Shape.values().length * (GatherMethod.NAMES.size() + 2), rows.size() - 1, rows::toString);
    assertTrue(
        rows.stream().skip(1).allMatch(row -> row.endsWith(",yes") || row.endsWith(",n/a")),
        rows::toString);
    // With 2 targets, murmur3 puts both in one partition: the check must say so.
    assertTrue(markdown.contains("WRONG (targets collide under hash partitioning)"), markdown);
  }

  /**
   * 4 ranks in 2 executor JVMs of 2 ranks each: every rank gets every row, and the report and CSV
   * give the ranks per executor beside each method's memory.
   */
  @Test
  @Timeout(600)
  void severalRanksPerExecutorJvmAcrossJvmsAreMeasuredAndReported(@TempDir Path dir)
      throws Exception {
    Path csv = dir.resolve("report.csv");
    String[] args = {
      "--masters", "cluster",
      "--ranks", "4",
      "--ranks-per-executor", "2",
      "--sizes", "16K",
      "--shapes", "vector",
      "--methods", "npu,npu-per-rank,floor",
      "--runs", "1",
      "--warmup", "0",
      "--executor-memory-mb", "512",
      "--csv", csv.toString()
    };
    Report report = new SparkBenchmark(BenchOptions.parse(args)).run(String.join(" ", args));

    assertTrue(report.allVerified(), report::markdown);
    assertEquals(
        List.of("npu", "npu-per-rank", "floor", "memcpy"),
        report.measurements().stream().map(m -> m.method).toList());
    assertTrue(report.measurements().stream().allMatch(m -> m.ranksPerExecutor == 2));
    String markdown = report.markdown();
    assertTrue(markdown.contains("| 2 executor JVMs | 4 | 2 | vector |"), markdown);
    List<String> rows = Files.readAllLines(csv);
    assertEquals(Report.CSV_HEADER, rows.get(0));
    int perExecutor = List.of(rows.get(0).split(",")).indexOf("ranks_per_executor");
    int toTable = List.of(rows.get(0).split(",")).indexOf("offheap_x_table_and_partition");
    for (String row : rows.subList(1, rows.size())) {
      String[] cells = row.split(",", -1);
      assertEquals("cluster", cells[0], row);
      assertEquals("2", cells[perExecutor], row);
      boolean offHeapMethod = row.contains(",npu,") || row.contains(",npu-per-rank,");
      assertEquals(offHeapMethod, !cells[toTable].isEmpty(), row);
    }
  }

  @Test
  void verificationRejectsAMissingRowAndAWrongChecksum() {
    BenchInput input = new BenchInput(null, null, Shape.FLOATS, 2, 10);
    GatherMethod npu = GatherMethod.named("npu");
    long expected = 12345;
    Outcome right =
        Outcome.of(List.of(Outcome.digest(0, 20, expected), Outcome.digest(1, 20, expected)));
    assertTrue(SparkBenchmark.verify(input, npu, right, expected).isEmpty());

    Outcome missingRow =
        Outcome.of(List.of(Outcome.digest(0, 20, expected), Outcome.digest(1, 19, expected)));
    assertEquals(
        List.of("partition 1: 19 rows, expected 20"),
        SparkBenchmark.verify(input, npu, missingRow, expected));

    Outcome wrongValue =
        Outcome.of(List.of(Outcome.digest(0, 20, expected + 1), Outcome.digest(1, 20, expected)));
    assertEquals(
        List.of("partition 0: checksum differs"),
        SparkBenchmark.verify(input, npu, wrongValue, expected));

    Outcome onePartition = Outcome.of(List.of(Outcome.digest(0, 20, expected)));
    assertFalse(SparkBenchmark.verify(input, npu, onePartition, expected).isEmpty());

    GatherMethod floor = GatherMethod.named("floor");
    Outcome floorSwapped = Outcome.of(List.of(Outcome.digest(0, 10, 5), Outcome.digest(1, 10, 6)));
    assertTrue(SparkBenchmark.verify(input, floor, floorSwapped, 11).isEmpty());
    assertFalse(SparkBenchmark.verify(input, floor, floorSwapped, 12).isEmpty());
  }

  @Test
  void badOptionsAreRefusedNamingTheFlagAndWhatIsAllowed() {
    IllegalArgumentException e =
        assertThrows(
            IllegalArgumentException.class, () -> BenchOptions.parse("--methods", "npu,gossip"));
    assertTrue(
        e.getMessage().contains("'gossip'") && e.getMessage().contains("barrier-strings"),
        e.getMessage());
    e = assertThrows(IllegalArgumentException.class, () -> BenchOptions.parse("--ranks", "1"));
    assertTrue(e.getMessage().contains("--ranks"), e.getMessage());
    e = assertThrows(IllegalArgumentException.class, () -> BenchOptions.parse("--sizes", "4Q"));
    assertTrue(
        e.getMessage().contains("--sizes") && e.getMessage().contains("'4Q'"), e.getMessage());
    assertEquals(List.of(4L << 20, 64L << 20), BenchOptions.parse("--sizes", "4M,64m").sizes());
  }

  @Test
  void ranksPerExecutorMustDivideEveryRankCountAndNeedExecutorJvms() {
    assertEquals(List.of(1), BenchOptions.parse().ranksPerExecutor());
    assertEquals(
        List.of(1, 2, 4),
        BenchOptions.parse("--ranks", "4,8", "--ranks-per-executor", "1,2,4").ranksPerExecutor());
    IllegalArgumentException e =
        assertThrows(
            IllegalArgumentException.class,
            () -> BenchOptions.parse("--ranks", "2,4", "--ranks-per-executor", "1,4"));
    assertTrue(
        e.getMessage().contains("--ranks-per-executor: 4 does not divide --ranks 2"),
        e.getMessage());
    e =
        assertThrows(
            IllegalArgumentException.class,
            () -> BenchOptions.parse("--masters", "local", "--ranks-per-executor", "2"));
    assertTrue(
        e.getMessage().contains("--ranks-per-executor") && e.getMessage().contains("cluster"),
        e.getMessage());
    e =
        assertThrows(
            IllegalArgumentException.class, () -> BenchOptions.parse("--ranks-per-executor", "0"));
    assertTrue(e.getMessage().contains("'0' is not an integer >= 1"), e.getMessage());
  }
}
