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
    Path ours1 =
        write(
            dir,
            "ours.n2.r1.csv",
            HEADER
                + "65536,65536,uint8,10,,,0,0\n"
                + "131072,131072,uint8,20,,,0,0\n"
                + "262144,262144,uint8,40,,,0,0\n");
    Path ours2 =
        write(
            dir,
            "ours.n2.r2.csv",
            HEADER
                + "65536,65536,uint8,30,,,0,0\n"
                + "131072,131072,uint8,20,,,0,0\n"
                + "262144,262144,uint8,50,,,0,0\n");
    Path mpi =
        write(
            dir,
            "mpi.n2.r1.csv",
            HEADER
                + "65536,65536,uint8,15,,,0,0\n"
                + "131072,131072,uint8,25,,,0,0\n"
                + "262144,262144,uint8,45,,,0,0\n");

    Document svg =
        parse(
            LineChart.draw(
                LineChart.Options.parse(
                    "--x",
                    "size_bytes_per_rank",
                    "--y",
                    "time_us",
                    "--series",
                    "file",
                    "--log-x",
                    "--title",
                    "time & size <2 ranks>",
                    ours1.toString(),
                    ours2.toString(),
                    mpi.toString())));

    Map<String, List<String>> lines = points(svg);
    assertEquals(List.of("mpi", "ours"), List.copyOf(lines.keySet()));
    assertEquals(List.of("65536:15", "131072:25", "262144:45"), lines.get("mpi"));
    assertEquals(List.of("65536:20", "131072:20", "262144:45"), lines.get("ours"));
    NodeList ticks = svg.getElementsByTagName("text");
    List<String> labels = new ArrayList<>();
    for (int i = 0; i < ticks.getLength(); i++) {
      labels.add(ticks.item(i).getTextContent());
    }
    assertTrue(
        labels.containsAll(List.of("64 KiB", "128 KiB", "256 KiB", "time_us", "ours")),
        labels.toString());
  }

  /** What bin/npugather-bench --csv writes, drawn per method; memory leaves out memcpy's row. */
  @Test
  void theSparkBenchmarksCsvDrawsTimeAndMemoryPerMethod(@TempDir Path dir) throws Exception {
    List<Measurement> measured = new ArrayList<>();
    for (long size : List.of(4L << 20, 64L << 20)) {
      for (String method : List.of("npu", "broadcast", "floor", SparkBenchmark.MEMCPY)) {
        Measurement m = new Measurement("local", 2, Shape.VECTOR, size, method, 2 * size);
        m.nanos.addAll(List.of(3_000_000L * (size >> 20), 1_000_000L * (size >> 20)));
        m.addMemory(1 << 20, 0, method.equals("npu") ? 2 * size : 0, 1 << 20);
        measured.add(m);
      }
    }
    Path csv =
        write(dir, "local2.csv", new Report(measured, List.of(), "--ranks 2", "0.1", "0.2").csv());

    Map<String, List<String>> time =
        points(
            parse(
                LineChart.draw(
                    LineChart.Options.parse(
                        "--x",
                        "partition_bytes",
                        "--y",
                        "median_ms",
                        "--series",
                        "method",
                        "--where",
                        "ranks=2",
                        "--log-x",
                        "--log-y",
                        csv.toString()))));
    assertEquals(
        List.of("broadcast", "floor", "floor + memcpy", "memcpy", "npu"),
        List.copyOf(time.keySet()));
    assertEquals(List.of("4194304:8", "67108864:128"), time.get("npu"));
    assertEquals(List.of("4194304:16", "67108864:256"), time.get("floor + memcpy"));

    Map<String, List<String>> memory =
        points(
            parse(
                LineChart.draw(
                    LineChart.Options.parse(
                        "--x",
                        "partition_bytes",
                        "--y",
                        "offheap_mib",
                        "--series",
                        "method",
                        csv.toString()))));
    assertEquals(List.of("broadcast", "floor", "npu"), List.copyOf(memory.keySet()));
    assertEquals(List.of("4194304:8", "67108864:128"), memory.get("npu"));
  }

  @Test
  void aColumnTheCsvLacksIsRefusedNamingTheColumnsItHas(@TempDir Path dir) throws Exception {
    Path csv = write(dir, "ours.csv", HEADER + "65536,65536,uint8,10,,,0,0\n");
    IllegalArgumentException e =
        assertThrows(
            IllegalArgumentException.class,
            () ->
                LineChart.draw(
                    LineChart.Options.parse(
                        "--x", "size_bytes_per_rank", "--y", "median_ms", csv.toString())));
    assertTrue(
        e.getMessage().contains("no column 'median_ms'") && e.getMessage().contains("time_us"),
        e.getMessage());

    IllegalArgumentException empty =
        assertThrows(
            IllegalArgumentException.class,
            () ->
                LineChart.draw(
                    LineChart.Options.parse(
                        "--x",
                        "size_bytes_per_rank",
                        "--y",
                        "time_us",
                        "--where",
                        "type=float32",
                        csv.toString())));
    assertTrue(empty.getMessage().contains("type=float32"), empty.getMessage());

    IllegalArgumentException log =
        assertThrows(
            IllegalArgumentException.class,
            () ->
                LineChart.draw(
                    LineChart.Options.parse(
                        "--x", "size_bytes_per_rank", "--y", "wrong", "--log-y", csv.toString())));
    assertTrue(log.getMessage().contains("wrong has 0"), log.getMessage());
  }

  private static Path write(Path dir, String name, String text) throws Exception {
    return Files.writeString(dir.resolve(name), text, StandardCharsets.UTF_8);
  }

  private static Document parse(String svg) throws Exception {
    return DocumentBuilderFactory.newInstance()
        .newDocumentBuilder()
        .parse(new ByteArrayInputStream(svg.getBytes(StandardCharsets.UTF_8)));
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
