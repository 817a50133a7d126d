package io.npugather.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;

/**
 * A line chart in SVG from the benchmarks' own CSV: {@code bin/npugather-bench --csv}, {@code
 * bin/allgather-perf --csv} and the runs {@code benchmarks/mpi/compare-with-mpi.sh --out} keeps.
 * One line per series (the values of the {@code --series} columns), one point per x value: the
 * median of the y values of the rows that share them, so repeated runs draw as one line.
 *
 * <p>The CSV is the plain form those programs write: a header line, then rows of comma-separated
 * cells without quoting; empty lines and lines that start with {@code #} are skipped. Rows whose x
 * or y cell is empty (memory of {@code memcpy}, say) are left out. No library: the SVG is text.
 */
public final class LineChart {
  static final String USAGE =
      String.join(
          "\n",
          "usage: npugather-bench --chart --x COLUMN --y COLUMN [options] CSV...",
          "  --x COLUMN          the horizontal axis (e.g. partition_bytes, ranks_per_executor,",
          "                      size_bytes_per_rank)",
          "  --y COLUMN          the vertical axis (e.g. median_ms, offheap_mib, time_us)",
          "  --series COLS       comma-separated columns whose values name a line (e.g.",
          "                      method or method,ranks); 'file' is the CSV's name up to its",
          "                      first dot (ours, mpi); default: one line",
          "  --where COL=VALUE   keep only rows whose COL is VALUE (repeatable)",
          "  --log-x, --log-y    logarithmic axis (sizes: powers of 2, labelled in KiB/MiB/GiB)",
          "  --title TEXT        default: 'Y against X'",
          "  --output FILE       write the SVG to FILE; default standard output",
          "Exit status 0, 2 for bad options or a CSV that does not fit them.");

  private static final String FILE_COLUMN = "file";
  private static final String[] COLOURS = {
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"
  };

  /** The benchmarks' own series keep one colour in every chart: ours blue, Spark's others apart. */
  private static final Map<String, String> KNOWN_COLOURS =
      Map.ofEntries(
          Map.entry("npu", "#1f77b4"),
          Map.entry("ours", "#1f77b4"),
          Map.entry("allgather", "#1f77b4"),
          Map.entry("npu-per-rank", "#17becf"),
          Map.entry("broadcast", "#d62728"),
          Map.entry("mpi", "#d62728"),
          Map.entry("barrier-strings", "#9467bd"),
          Map.entry("shuffle", "#8c564b"),
          Map.entry("sort-merge", "#8c564b"),
          Map.entry("floor", "#2ca02c"),
          Map.entry("memcpy", "#7f7f7f"),
          Map.entry("floor + memcpy", "#ff7f0e"));

  private static final int WIDTH = 760;
  private static final int HEIGHT = 460;
  private static final int LEFT = 80;
  private static final int RIGHT = 200;
  private static final int TOP = 40;
  private static final int BOTTOM = 56;

  /** The command line; see {@link #USAGE}. */
  record Options(
      List<Path> inputs,
      String x,
      String y,
      List<String> series,
      Map<String, String> where,
      boolean logX,
      boolean logY,
      String title,
      Path output) {

    static Options parse(String... args) {
      List<Path> inputs = new ArrayList<>();
      String x = null;
      String y = null;
      List<String> series = List.of();
      Map<String, String> where = new LinkedHashMap<>();
      boolean logX = false;
      boolean logY = false;
      String title = null;
      Path output = null;
      for (int i = 0; i < args.length; i++) {
        String arg = args[i];
        if (arg.equals("--log-x") || arg.equals("--log-y")) {
          logX |= arg.equals("--log-x");
          logY |= arg.equals("--log-y");
          continue;
        }
        if (!arg.startsWith("--")) {
          inputs.add(Path.of(arg));
          continue;
        }
        if (i + 1 >= args.length) {
          throw new IllegalArgumentException(arg + ": missing value\n" + USAGE);
        }
        String value = args[++i];
        switch (arg) {
          case "--x" -> x = value;
          case "--y" -> y = value;
          case "--series" -> series = List.of(value.split(","));
          case "--where" -> {
            int eq = value.indexOf('=');
            if (eq <= 0) {
              throw new IllegalArgumentException(
                  "--where: '" + value + "' is not COLUMN=VALUE\n" + USAGE);
            }
            where.put(value.substring(0, eq), value.substring(eq + 1));
          }
          case "--title" -> title = value;
          case "--output" -> output = Path.of(value);
          default -> throw new IllegalArgumentException("unknown option " + arg + "\n" + USAGE);
        }
      }
      if (x == null || y == null) {
        throw new IllegalArgumentException("--x and --y are required\n" + USAGE);
      }
      if (inputs.isEmpty()) {
        throw new IllegalArgumentException("no CSV file given\n" + USAGE);
      }
      return new Options(
          List.copyOf(inputs),
          x,
          y,
          series,
          Map.copyOf(where),
          logX,
          logY,
          title == null ? y + " against " + x + filters(where) : title,
          output);
    }
  }

  private LineChart() {}

  public static void main(String[] args) throws IOException {
    if (List.of(args).contains("--help")) {
      System.out.println(USAGE);
      return;
    }
    String svg;
    Options options;
    try {
      options = Options.parse(args);
      svg = draw(options);
    } catch (IllegalArgumentException e) {
      System.err.println("npugather-bench --chart: " + e.getMessage());
      System.exit(2);
      return;
    }
    if (options.output() == null) {
      System.out.print(svg);
    } else {
      Files.writeString(options.output(), svg, StandardCharsets.UTF_8);
    }
  }

  /** Reads every CSV and returns the chart; a missing column or a bad number is an error. */
  static String draw(Options o) throws IOException {
    // series -> x -> the y values of every row with that series and x
    Map<String, TreeMap<Double, List<Double>>> points = new TreeMap<>();
    for (Path input : o.inputs()) {
      read(o, input, points);
    }
    if (points.isEmpty()) {
      throw new IllegalArgumentException(
          "no row of " + o.inputs() + " has both " + o.x() + " and " + o.y() + filters(o.where()));
    }
    Map<String, List<double[]>> lines = new LinkedHashMap<>();
    points.forEach(
        (name, byX) -> {
          List<double[]> line = new ArrayList<>();
          byX.forEach((x, ys) -> line.add(new double[] {x, median(ys)}));
          lines.put(name, line);
        });
    return svg(o, lines);
  }

  private static void read(Options o, Path input, Map<String, TreeMap<Double, List<Double>>> points)
      throws IOException {
    List<String> header = null;
    String fileName = input.getFileName().toString();
    String fileSeries =
        fileName.contains(".") ? fileName.substring(0, fileName.indexOf('.')) : fileName;
    int lineNumber = 0;
    for (String line : Files.readAllLines(input, StandardCharsets.UTF_8)) {
      lineNumber++;
      if (line.isBlank() || line.startsWith("#")) {
        continue;
      }
      List<String> cells = List.of(line.split(",", -1));
      if (header == null) {
        header = cells;
        for (String column : columns(o)) {
          if (!column.equals(FILE_COLUMN) && !header.contains(column)) {
            throw new IllegalArgumentException(
                input
                    + " has no column '"
                    + column
                    + "'; its columns: "
                    + String.join(", ", header));
          }
        }
        continue;
      }
      Map<String, String> row = new LinkedHashMap<>();
      row.put(FILE_COLUMN, fileSeries);
      for (int i = 0; i < header.size(); i++) {
        row.put(header.get(i), i < cells.size() ? cells.get(i).trim() : "");
      }
      if (!o.where().entrySet().stream().allMatch(w -> w.getValue().equals(row.get(w.getKey())))) {
        continue;
      }
      String x = row.get(o.x());
      String y = row.get(o.y());
      if (x.isEmpty() || y.isEmpty()) {
        continue;
      }
      List<String> names = new ArrayList<>();
      for (String column : o.series()) {
        names.add(row.get(column));
      }
      String name = names.isEmpty() ? o.y() : String.join(" ", names);
      points
          .computeIfAbsent(name, k -> new TreeMap<>())
          .computeIfAbsent(number(input, lineNumber, o.x(), x), k -> new ArrayList<>())
          .add(number(input, lineNumber, o.y(), y));
    }
    if (header == null) {
      throw new IllegalArgumentException(input + " has no header line");
    }
  }

  private static List<String> columns(Options o) {
    List<String> columns = new ArrayList<>(List.of(o.x(), o.y()));
    columns.addAll(o.series());
    columns.addAll(o.where().keySet());
    return columns;
  }

  private static String filters(Map<String, String> where) {
    List<String> filters = new ArrayList<>();
    where.forEach((column, value) -> filters.add(column + "=" + value));
    return filters.isEmpty() ? "" : " (" + String.join(", ", filters) + ")";
  }

  private static double number(Path input, int line, String column, String value) {
    try {
      return Double.parseDouble(value);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(
          input + " line " + line + ": " + column + " '" + value + "' is not a number");
    }
  }

  private static double median(List<Double> values) {
    List<Double> sorted = new ArrayList<>(values);
    sorted.sort(null);
    int n = sorted.size();
    return n % 2 == 1 ? sorted.get(n / 2) : (sorted.get(n / 2 - 1) + sorted.get(n / 2)) / 2;
  }

  /** One axis: its range in data units, whether logarithmic, and its ticks. */
  private record Axis(double min, double max, boolean log, List<Double> ticks, boolean bytes) {
    static Axis of(String column, List<Double> values, boolean log, boolean fromZero) {
      double min = values.stream().mapToDouble(Double::doubleValue).min().orElseThrow();
      double max = values.stream().mapToDouble(Double::doubleValue).max().orElseThrow();
      boolean bytes = column.contains("bytes");
      if (log && min <= 0) {
        throw new IllegalArgumentException(
            "a logarithmic axis needs positive values; " + column + " has " + min);
      }
      List<Double> ticks = new ArrayList<>();
      if (log) {
        double base = bytes ? 2 : 10;
        double lo = Math.floor(Math.log(min) / Math.log(base) + 1e-9);
        double hi = Math.ceil(Math.log(max) / Math.log(base) - 1e-9);
        int stride = (int) Math.max(1, Math.ceil((hi - lo + 1) / 10));
        for (double k = lo; k <= hi; k += stride) {
          ticks.add(Math.pow(base, k));
        }
        min = Math.min(min, ticks.get(0));
        max = Math.max(max, Math.pow(base, hi));
      } else {
        if (fromZero && min > 0) {
          min = 0;
        }
        if (max == min) {
          max = min + 1;
        }
        double step = niceStep((max - min) / 5);
        min = Math.floor(min / step) * step;
        max = Math.ceil(max / step) * step;
        for (double t = min; t <= max + step / 2; t += step) {
          ticks.add(t);
        }
      }
      if (max <= min) {
        max = log ? min * 2 : min + 1;
      }
      return new Axis(min, max, log, ticks, bytes);
    }

    private static double niceStep(double rough) {
      double power = Math.pow(10, Math.floor(Math.log10(rough)));
      double f = rough / power;
      return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * power;
    }

    /** Where {@code value} falls, from 0 (min) to 1 (max). */
    double fraction(double value) {
      return log
          ? (Math.log(value) - Math.log(min)) / (Math.log(max) - Math.log(min))
          : (value - min) / (max - min);
    }

    String label(double value) {
      if (bytes && value >= 1024) {
        String[] units = {"KiB", "MiB", "GiB", "TiB"};
        double v = value / 1024;
        int u = 0;
        while (v >= 1024 && u < units.length - 1) {
          v /= 1024;
          u++;
        }
        return compact(v) + " " + units[u];
      }
      return compact(value);
    }
  }

  private static String compact(double v) {
    if (v == Math.rint(v) && Math.abs(v) < 1e15) {
      return String.format(Locale.ROOT, "%d", (long) v);
    }
    String s = String.format(Locale.ROOT, "%.3g", v);
    return s.contains("e") || !s.contains(".") ? s : s.replaceAll("0+$", "").replaceAll("\\.$", "");
  }

  private static String svg(Options o, Map<String, List<double[]>> lines) {
    List<Double> xs = new ArrayList<>();
    List<Double> ys = new ArrayList<>();
    lines
        .values()
        .forEach(
            l ->
                l.forEach(
                    p -> {
                      xs.add(p[0]);
                      ys.add(p[1]);
                    }));
    Axis ax = Axis.of(o.x(), xs, o.logX(), false);
    Axis ay = Axis.of(o.y(), ys, o.logY(), true);
    int plotW = WIDTH - LEFT - RIGHT;
    int plotH = HEIGHT - TOP - BOTTOM;
    StringBuilder s = new StringBuilder();
    s.append(
        String.format(
            Locale.ROOT,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d"
                + " %d\" font-family=\"sans-serif\" font-size=\"12\">%n",
            WIDTH,
            HEIGHT,
            WIDTH,
            HEIGHT));
    s.append("<title>").append(xml(o.title())).append("</title>\n");
    s.append(String.format("<rect width=\"%d\" height=\"%d\" fill=\"white\"/>%n", WIDTH, HEIGHT));
    s.append(
        String.format(
            Locale.ROOT,
            "<text class=\"title\" x=\"%d\" y=\"24\" font-size=\"14\">%s</text>%n",
            LEFT,
            xml(o.title())));
    s.append("<g class=\"axes\" stroke=\"#ccc\">\n");
    for (double t : ax.ticks()) {
      double px = LEFT + ax.fraction(t) * plotW;
      s.append(line(px, TOP, px, TOP + plotH));
    }
    for (double t : ay.ticks()) {
      double py = TOP + plotH - ay.fraction(t) * plotH;
      s.append(line(LEFT, py, LEFT + plotW, py));
    }
    s.append(
        String.format(
            Locale.ROOT,
            "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#333\"/>%n",
            LEFT,
            TOP,
            plotW,
            plotH));
    s.append("</g>\n<g class=\"labels\">\n");
    for (double t : ax.ticks()) {
      s.append(
          text(LEFT + ax.fraction(t) * plotW, TOP + plotH + 16, "middle", ax.label(t), "tick"));
    }
    for (double t : ay.ticks()) {
      s.append(
          text(LEFT - 6, TOP + plotH - ay.fraction(t) * plotH + 4, "end", ay.label(t), "tick"));
    }
    s.append(text(LEFT + plotW / 2.0, HEIGHT - 14, "middle", o.x(), "x-label"));
    s.append(
        String.format(
            Locale.ROOT,
            "<text class=\"y-label\" transform=\"translate(16 %.1f) rotate(-90)\""
                + " text-anchor=\"middle\">%s</text>%n",
            TOP + plotH / 2.0,
            xml(o.y())));
    s.append("</g>\n");
    int index = 0;
    for (Map.Entry<String, List<double[]>> e : lines.entrySet()) {
      String colour = KNOWN_COLOURS.getOrDefault(e.getKey(), COLOURS[index % COLOURS.length]);
      s.append(
          String.format(
              "<g class=\"series\" data-series=\"%s\" stroke=\"%s\" fill=\"%s\">%n",
              xml(e.getKey()), colour, colour));
      StringBuilder polyline = new StringBuilder();
      StringBuilder marks = new StringBuilder();
      for (double[] p : e.getValue()) {
        double px = LEFT + ax.fraction(p[0]) * plotW;
        double py = TOP + plotH - ay.fraction(p[1]) * plotH;
        polyline.append(String.format(Locale.ROOT, "%.1f,%.1f ", px, py));
        marks.append(
            String.format(
                Locale.ROOT,
                "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" data-x=\"%s\" data-y=\"%s\"/>%n",
                px,
                py,
                compact(p[0]),
                compact(p[1])));
      }
      s.append("<polyline fill=\"none\" stroke-width=\"2\" points=\"")
          .append(polyline.toString().trim())
          .append("\"/>\n")
          .append(marks);
      double ly = TOP + 10 + index * 18;
      s.append(
          line(WIDTH - RIGHT + 16, ly, WIDTH - RIGHT + 40, ly)
              .replace("/>", " stroke-width=\"2\"/>"));
      s.append(text(WIDTH - RIGHT + 46, ly + 4, "start", e.getKey(), "legend"));
      s.append("</g>\n");
      index++;
    }
    s.append("</svg>\n");
    return s.toString();
  }

  private static String line(double x1, double y1, double x2, double y2) {
    return String.format(
        Locale.ROOT, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>%n", x1, y1, x2, y2);
  }

  private static String text(double x, double y, String anchor, String value, String cls) {
    return String.format(
        Locale.ROOT,
        "<text class=\"%s\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" stroke=\"none\">%s</text>%n",
        cls,
        x,
        y,
        anchor,
        xml(value));
  }

  private static String xml(String text) {
    return text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("\"", "&quot;");
  }
}
