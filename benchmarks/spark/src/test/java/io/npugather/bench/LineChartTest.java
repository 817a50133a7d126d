package io.npugather.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import javax.xml.parsers.DocumentBuilderFactory;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.w3c.dom.Document;
import org.w3c.dom.Element;
import org.w3c.dom.NodeList;

/** The chart drawn from the benchmarks' own CSV: well-formed SVG, one line per series, medians. */
@Timeout(60)
class LineChartTest {
  /** allgather-perf's CSV as compare-with-mpi.sh keeps it: comments first, one file per run. */
  private static final String HEADER =
      "# allgather-perf: backend host, ranks 2\n"
          + "size_bytes_per_rank,count,type,time_us,algbw_gbps,busbw_gbps,wrong,device_bytes\n";

  @Test
  void repeatedRunsDrawAsOneLinePerSeriesThroughTheirMedians(@TempDir Path dir) throws Exception {
    Path ours1 = write(dir, "ours.n2.r1.csv", sweep(10, 20, 40));
    Path ours2 = write(dir, "ours.n2.r2.csv", sweep(30, 20, 50));
    Path mpi = write(dir, "mpi.n2.r1.csv", sweep(15, 25, 45));

    Document svg =
        svg(
            "--x size_bytes_per_rank --y time_us --series file --log-x --title time&size<2ranks>",
            ours1,
            ours2,
            mpi);

    Map<String, List<String>> lines = points(svg);
    assertEquals(List.of("mpi", "ours"), List.copyOf(lines.keySet()));
    assertEquals(List.of("65536:15", "131072:25", "262144:45"), lines.get("mpi"));
    assertEquals(List.of("65536:20", "131072:20", "262144:45"), lines.get("ours"));
    NodeList texts = svg.getElementsByTagName("text");
    List<String> labels = new ArrayList<>();
    for (int i = 0; i < texts.getLength(); i++) {
      labels.add(texts.item(i).getTextContent());
    }
    assertTrue(
        labels.containsAll(
            List.of("time&size<2ranks>", "64 KiB", "128 KiB", "256 KiB", "time_us", "ours")),
        labels.toString());
  }

  /** What bin/npugather-bench --csv writes, drawn per method; memory leaves out memcpy's row. */
  @Test
  void theSparkBenchmarksCsvDrawsTimeAndMemoryPerMethod(@TempDir Path dir) throws Exception {
    List<Measurement> measured = new ArrayList<>();
    for (long size : List.of(4L << 20, 64L << 20)) {
      for (String method : List.of("npu", "broadcast", "floor", SparkBenchmark.MEMCPY)) {
        Measurement m = new Measurement("local", 2, 2, Shape.VECTOR, size, method, 2 * size);
        m.nanos.addAll(List.of(3_000_000L * (size >> 20), 1_000_000L * (size >> 20)));
        m.addMemory(1 << 20, 0, method.equals("npu") ? 2 * size : 0, 1 << 20);
        measured.add(m);
      }
    }
    Path csv =
        write(dir, "local2.csv", new Report(measured, List.of(), "--ranks 2", "0.1", "0.2").csv());

    Map<String, List<String>> time =
        points(
            svg(
                "--x partition_bytes --y median_ms --series method --where ranks=2 --log-x --log-y",
                csv));
    assertEquals(
        List.of("broadcast", "floor", "floor + memcpy", "memcpy", "npu"),
        List.copyOf(time.keySet()));
    assertEquals(List.of("4194304:8", "67108864:128"), time.get("npu"));
    assertEquals(List.of("4194304:16", "67108864:256"), time.get("floor + memcpy"));

    Map<String, List<String>> memory =
        points(svg("--x partition_bytes --y offheap_mib --series method", csv));
    assertEquals(List.of("broadcast", "floor", "npu"), List.copyOf(memory.keySet()));
    assertEquals(List.of("4194304:8", "67108864:128"), memory.get("npu"));
  }

  /** Memory per executor against ranks per executor JVM, one line per method. */
  @Test
  void theSparkBenchmarksCsvDrawsMemoryAgainstRanksPerExecutor(@TempDir Path dir) throws Exception {
    long size = 16L << 20;
    List<Measurement> measured = new ArrayList<>();
    for (int perExecutor : List.of(1, 2, 4)) {
      for (String method : List.of("npu", "npu-per-rank")) {
        Measurement m = new Measurement("cluster", 4, perExecutor, Shape.VECTOR, size, method, 0);
        m.nanos.add(1_000_000L);
        long copies = method.equals("npu") ? 1 : perExecutor;
        m.addMemory(1 << 20, 0, copies * 4 * size, 1 << 20);
        measured.add(m);
      }
    }
    Path csv =
        write(dir, "jvms.csv", new Report(measured, List.of(), "--ranks 4", "0.1", "0.2").csv());

    Map<String, List<String>> memory =
        points(svg("--x ranks_per_executor --y offheap_mib --series method", csv));
    assertEquals(List.of("1:64", "2:64", "4:64"), memory.get("npu"));
    assertEquals(List.of("1:64", "2:128", "4:256"), memory.get("npu-per-rank"));
    Map<String, List<String>> toTable =
        points(
            svg("--x ranks_per_executor --y offheap_x_table_and_partition --series method", csv));
    assertEquals(List.of("1:0.8", "2:0.8", "4:0.8"), toTable.get("npu"));
  }

  @Test
  void aColumnTheCsvLacksIsRefusedNamingTheColumnsItHas(@TempDir Path dir) throws Exception {
    Path csv = write(dir, "ours.csv", sweep(10, 20, 40));
    String missing = refusal("--x size_bytes_per_rank --y median_ms", csv);
    assertTrue(missing.contains("no column 'median_ms'") && missing.contains("time_us"), missing);
    String empty = refusal("--x size_bytes_per_rank --y time_us --where type=float32", csv);
    assertTrue(empty.contains("type=float32"), empty);
    String log = refusal("--x size_bytes_per_rank --y wrong --log-y", csv);
    assertTrue(log.contains("wrong has 0"), log);
  }

  /** One rank count's sweep over 64, 128 and 256 KiB per rank, taking these times. */
  private static String sweep(int... micros) {
    StringBuilder csv = new StringBuilder(HEADER);
    for (int i = 0; i < micros.length; i++) {
      long bytes = 65536L << i;
      csv.append(bytes + "," + bytes + ",uint8," + micros[i] + ",,,0,0\n");
    }
    return csv.toString();
  }

  private static Path write(Path dir, String name, String text) throws Exception {
    return Files.writeString(dir.resolve(name), text, StandardCharsets.UTF_8);
  }

  /** The chart of {@code options} (split at spaces) over {@code csvs}, parsed as XML. */
  private static Document svg(String options, Path... csvs) throws Exception {
    String svg = LineChart.draw(LineChart.Options.parse(args(options, csvs)));
    return DocumentBuilderFactory.newInstance()
        .newDocumentBuilder()
        .parse(new ByteArrayInputStream(svg.getBytes(StandardCharsets.UTF_8)));
  }

  private static String refusal(String options, Path... csvs) {
    return assertThrows(
            IllegalArgumentException.class,
            () -> LineChart.draw(LineChart.Options.parse(args(options, csvs))))
        .getMessage();
  }

  private static String[] args(String options, Path... csvs) {
    return Stream.concat(Stream.of(options.split(" ")), Stream.of(csvs).map(Path::toString))
        .toArray(String[]::new);
  }

  /** Per series its points as "x:y", in the order the polyline draws them. */
  private static Map<String, List<String>> points(Document svg) {
    Map<String, List<String>> lines = new LinkedHashMap<>();
    NodeList groups = svg.getElementsByTagName("g");
    for (int i = 0; i < groups.getLength(); i++) {
      Element g = (Element) groups.item(i);
      if (!g.getAttribute("class").equals("series")) {
        continue;
      }
      List<String> points = new ArrayList<>();
      NodeList circles = g.getElementsByTagName("circle");
      for (int c = 0; c < circles.getLength(); c++) {
        Element circle = (Element) circles.item(c);
        points.add(circle.getAttribute("data-x") + ":" + circle.getAttribute("data-y"));
      }
      String polyline =
          ((Element) g.getElementsByTagName("polyline").item(0)).getAttribute("points");
      assertEquals(points.size(), polyline.split(" ").length, polyline);
      lines.put(g.getAttribute("data-series"), points);
    }
    return lines;
  }
}
