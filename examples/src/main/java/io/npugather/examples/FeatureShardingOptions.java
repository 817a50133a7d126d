package io.npugather.examples;

import io.npugather.Backend;
import io.npugather.spark.AllGatherOptions;
import java.time.Duration;
import java.util.Locale;
import org.apache.spark.network.util.JavaUtils;

/** The command-line options of {@link FeatureSharding}; see {@link #USAGE}. */
final class FeatureShardingOptions {
  long items = 100_000;
  int dim = 64;
  long queries = 2_000;
  int topK = 10;

  /** How the ranks score: their own top-k over arrays, or SQL over the items' join. */
  boolean sqlScoring;

  long seed = 7;
  int checkQueries = 20;
  String itemsPath;
  String queriesPath;
  String output;

  /** Null: spark-submit's master when launched by it, else local[*]. */
  String master;

  String backend = Backend.SPARK_DEFAULT.wireName();
  int ranks;
  Duration timeout = Duration.ofSeconds(120);
  boolean keep;
  boolean help;

  static final String USAGE =
      String.join(
          "\n",
          "usage: bin/npugather-example [options]",
          "  Feature sharding: all-gather an item-embedding table onto every rank, score each rank's",
          "  shard of queries against every item (top-k by dot product), write the recommendations",
          "  as Parquet and check a sample of queries against plain Spark SQL.",
          "",
          "  data (generated unless both paths are given):",
          "    --items N            items to generate (default 100000)",
          "    --dim D              embedding dimension of generated data (default 64)",
          "    --queries N          queries to generate (default 2000)",
          "    --seed S             seed of the generated data and of the checked sample (default 7)",
          "    --items-path P       Parquet items: id bigint, embedding array<float>",
          "    --queries-path P     Parquet queries: id bigint, embedding array<float>",
          "  job:",
          "    --top-k K            recommendations per query (default 10)",
          "    --scoring S          arrays (default): each rank scores its queries against the gathered",
          "                         items in Java arrays; sql: a SQL query joins the queries with the",
          "                         items by the ALLGATHER hint (every executor gathers the items once)",
          "                         and ranks the dot products with a window (slower: one row per pair)",
          "    --output DIR         where generated data and recommendations go (default: a new temp dir)",
          "    --keep               keep the generated data (removed after the run otherwise)",
          "    --master URL         Spark master (default: spark-submit's --master, else local[*])",
          "    --ranks N            ranks = shards, at most the cluster's task slots (default: one rank per",
          "                         slot)",
          "    --backend B          host, hccl or lccl (default host)",
          "    --timeout T          bound of every wait of the gather (default 120s)",
          "    --check N            queries checked against plain Spark (default 20; 0 skips the check)",
          "  example run with bin/npugather-example; the operator demo with",
          "  bin/npugather-example --demo [--ranks N --rows N --features N]");

  /**
   * The options of a command line.
   *
   * @throws IllegalArgumentException naming the flag, the value and what is allowed
   */
  static FeatureShardingOptions parse(String[] args) {
    FeatureShardingOptions o = new FeatureShardingOptions();
    for (int i = 0; i < args.length; i++) {
      String option = args[i];
      if (option.equals("--help") || option.equals("-h")) {
        o.help = true;
        continue;
      }
      if (option.equals("--keep")) {
        o.keep = true;
        continue;
      }
      if (i + 1 >= args.length) {
        throw new IllegalArgumentException("option " + option + " needs a value");
      }
      String value = args[++i];
      switch (option) {
        case "--items" -> o.items = positiveLong(option, value);
        case "--dim" -> o.dim = (int) positiveLong(option, value);
        case "--queries" -> o.queries = positiveLong(option, value);
        case "--top-k" -> o.topK = (int) positiveLong(option, value);
        case "--scoring" -> {
          String scoring = value.trim().toLowerCase(Locale.ROOT);
          if (!scoring.equals("arrays") && !scoring.equals("sql")) {
            throw new IllegalArgumentException(
                option + " = '" + value + "'; allowed: arrays or sql");
          }
          o.sqlScoring = scoring.equals("sql");
        }
        case "--seed" -> o.seed = parseLong(option, value);
        case "--check" ->
            o.checkQueries =
                (int) Math.min(Integer.MAX_VALUE, Math.max(0, parseLong(option, value)));
        case "--items-path" -> o.itemsPath = value;
        case "--queries-path" -> o.queriesPath = value;
        case "--output" -> o.output = value;
        case "--master" -> o.master = value;
        case "--backend" -> o.backend = value.trim().toLowerCase(Locale.ROOT);
        case "--ranks" -> o.ranks = (int) positiveLong(option, value);
        case "--timeout" -> {
          try {
            o.timeout = Duration.ofMillis(JavaUtils.timeStringAsMs(value.trim()));
          } catch (NumberFormatException e) {
            throw new IllegalArgumentException(
                option + " = '" + value + "'; allowed: a duration such as 120s, 5m or 500ms");
          }
        }
        default -> throw new IllegalArgumentException("unknown option '" + option + "'");
      }
    }
    if ((o.itemsPath == null) != (o.queriesPath == null)) {
      throw new IllegalArgumentException(
          "--items-path and --queries-path go together (or neither, to generate the data)");
    }
    if (o.dim > 1 << 20) {
      throw new IllegalArgumentException("--dim = " + o.dim + "; allowed: at most 1048576");
    }
    if (o.topK > 100_000) {
      throw new IllegalArgumentException("--top-k = " + o.topK + "; allowed: at most 100000");
    }
    // Fails here, naming the flag, rather than inside the job.
    AllGatherOptions.defaults().withBackend(o.backend).withTimeout(o.timeout);
    return o;
  }

  private static long parseLong(String option, String value) {
    try {
      return Long.parseLong(value.trim().replace("_", ""));
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(option + " = '" + value + "'; allowed: an integer");
    }
  }

  private static long positiveLong(String option, String value) {
    long parsed = parseLong(option, value);
    if (parsed <= 0
        || parsed > Integer.MAX_VALUE && !option.equals("--items") && !option.equals("--queries")) {
      throw new IllegalArgumentException(option + " = " + value + "; allowed: a positive integer");
    }
    return parsed;
  }
}
