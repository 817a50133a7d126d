package io.npugather.examples;

import static org.apache.spark.sql.functions.rand;

import io.npugather.spark.AllGatherOptions;
import io.npugather.spark.ClusterCheck;
import io.npugather.spark.GatherMetrics;
import io.npugather.spark.NpuGather;
import io.npugather.spark.arrow.ArrowBackedColumn;
import java.io.IOException;
import java.io.Serializable;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.arrow.vector.complex.ListVector;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.SparkContext;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.util.CollectionAccumulator;

/**
 * Batch feature sharding: every rank gets the whole item-embedding table through {@code
 * allGatherOnNpu} and scores its own shard of queries against it.
 *
 * <ol>
 *   <li>Items {@code (id bigint, embedding array<float>)} and queries (same schema) are read from
 *       Parquet, or generated first ({@code --items}, {@code --queries}, {@code --dim}, {@code
 *       --seed}).
 *   <li>The item table, split into N shards (one per rank), is all-gathered: afterwards every rank
 *       holds every item ({@link NpuGather#allGatherOnNpu}).
 *   <li>The queries are split into the same N shards; rank r zips its gathered partition with query
 *       shard r, loads the items once into a flat {@code float[]} and keeps, for each of its
 *       queries, the top-k items by dot product in a small heap.
 *   <li>The recommendations {@code (query_id, item_id, score, rank)} are written as Parquet, and a
 *       random sample of queries is checked against the same top-k computed with plain Spark SQL (a
 *       cross join with every item, a dot-product UDF, a window rank).
 * </ol>
 *
 * <p>With {@code --scoring sql}, steps 2 and 3 are one SQL query instead ({@link SqlScoring}): the
 * queries joined with the items by the {@code ALLGATHER} hint, so every executor gathers the items
 * once, and the top-k ranked by a window.
 *
 * <p>Scores are float dot products summed in dimension order (so the check's UDF, or Spark SQL's
 * {@code aggregate(zip_with(q, e, (x, y) -> x * y), 0f, (acc, v) -> acc + v)}, gives the same
 * floats); ties are broken by the smaller item id. Run {@code bin/npugather-example --help} for the
 * options.
 *
 * <p>This class runs the job and holds the work of a rank ({@link Scorer}, {@link FlatTable},
 * {@link TopK}, {@link Heap}); {@link FeatureShardingOptions} is the command line, {@link
 * EmbeddingTables} the data, {@link PlainSparkCheck} the check and {@link RunReport} what a run
 * prints.
 */
public final class FeatureSharding {
  private FeatureSharding() {}

  /** What a run did; {@link #passed} is what the exit code reports. */
  public record Result(
      int ranks,
      long items,
      int dim,
      long queries,
      int topK,
      Path output,
      long recommendationRows,
      int checkedQueries,
      int matchingQueries) {
    /** Every checked query matched plain Spark. */
    public boolean checkPassed() {
      return checkedQueries == matchingQueries;
    }

    /** The check passed and every query got its top-k. */
    public boolean passed() {
      return checkPassed() && recommendationRows == queries * topK;
    }

    public Path recommendations() {
      return output.resolve("recommendations");
    }
  }

  public static void main(String[] args) throws Exception {
    System.exit(runCommandLine(args));
  }

  /**
   * The command line: 0 when the run passed, 1 when its check failed, 2 on a bad option, path or
   * rank count, which is one line on stderr ("error: ..."), never a stack trace.
   */
  static int runCommandLine(String... args) throws Exception {
    if (args.length > 0 && args[0].equals("--demo")) {
      AllGatherDemo.main(Arrays.copyOfRange(args, 1, args.length));
      return 0;
    }
    try {
      FeatureShardingOptions options = parse(args);
      if (options.help) {
        System.out.println(FeatureShardingOptions.USAGE);
        return 0;
      }
      return run(options).passed() ? 0 : 1;
    } catch (IllegalArgumentException | IOException e) {
      System.err.println("error: " + firstLine(e.getMessage()) + " (--help lists the options)");
      return 2;
    }
  }

  private static String firstLine(String message) {
    String text = message == null ? "" : message.strip();
    int newline = text.indexOf('\n');
    return newline < 0 ? text : text.substring(0, newline);
  }

  /** Runs the job with command-line arguments; see {@link FeatureShardingOptions#USAGE}. */
  public static Result run(String... args) throws IOException {
    return run(parse(args));
  }

  /** The options of a command line; see {@link FeatureShardingOptions#parse}. */
  static FeatureShardingOptions parse(String[] args) {
    return FeatureShardingOptions.parse(args);
  }

  static Result run(FeatureShardingOptions o) throws IOException {
    // Checked before Spark starts, so a mistake costs neither start-up nor generated data.
    Configuration hadoop = new Configuration();
    if (o.itemsPath != null) {
      requireExists(hadoop, "--items-path", o.itemsPath);
      requireExists(hadoop, "--queries-path", o.queriesPath);
    }
    String master =
        o.master != null
            ? o.master
            : System.getProperty(
                "spark.master", "local[*]"); // local[*]: not launched by spark-submit
    int localSlots = localSlots(master);
    if (o.ranks > 0 && localSlots > 0 && o.ranks > localSlots) {
      throw new IllegalArgumentException(tooManyRanks(o.ranks, localSlots, master));
    }
    Path output =
        o.output != null
            ? Path.of(o.output).toAbsolutePath()
            : Files.createTempDirectory("npugather-feature-sharding-");
    SparkSession spark =
        SparkSession.builder()
            .master(master)
            .appName("FeatureSharding")
            .config("spark.ui.enabled", "false")
            .config("spark.log.level", "WARN")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.sql.extensions", "io.npugather.spark.NpuGatherExtensions")
            .getOrCreate();
    try {
      spark.sparkContext().setLogLevel("WARN");
      return run(spark, o, output);
    } finally {
      spark.stop();
    }
  }

  private static void requireExists(Configuration hadoop, String option, String path)
      throws IOException {
    org.apache.hadoop.fs.Path p = new org.apache.hadoop.fs.Path(path);
    if (!p.getFileSystem(hadoop).exists(p)) {
      throw new IllegalArgumentException(option + " = '" + path + "': no such file or directory");
    }
  }

  /** Task slots of a local master (local, local[N], local[*], local[N,F]); 0 for a cluster. */
  static int localSlots(String master) {
    Matcher m = Pattern.compile("local(?:\\[(\\d+|\\*)(?:,\\d+)?\\])?").matcher(master.trim());
    if (!m.matches()) {
      return 0;
    }
    String n = m.group(1);
    return n == null
        ? 1
        : n.equals("*") ? Runtime.getRuntime().availableProcessors() : Integer.parseInt(n);
  }

  static String tooManyRanks(int ranks, int slots, String cluster) {
    return "--ranks = "
        + ranks
        + ", but "
        + cluster
        + " runs at most "
        + slots
        + " tasks at once and every"
        + " rank needs a slot of its own (barrier mode); pass --ranks "
        + slots
        + " or fewer, or a --master"
        + " with more cores";
  }

  /** A cluster's slots, counted as allGatherOnNpu counts them, before any data is generated. */
  private static void requireSlots(SparkSession spark, int ranks) {
    SparkContext sc = spark.sparkContext();
    try {
      ClusterCheck.requireBarrierSlots(sc, ranks);
    } catch (IllegalStateException e) {
      int slots = sc.maxNumConcurrentTasks(sc.resourceProfileManager().defaultResourceProfile());
      if (slots < ranks) {
        throw new IllegalArgumentException(tooManyRanks(ranks, slots, sc.master()), e);
      }
      throw new IllegalArgumentException(e.getMessage(), e);
    }
  }

  private static Result run(SparkSession spark, FeatureShardingOptions o, Path output) {
    RunReport report = new RunReport();
    int ranks = o.ranks > 0 ? o.ranks : spark.sparkContext().defaultParallelism();
    requireSlots(spark, ranks);
    if (o.itemsPath != null) {
      return run(spark, o, output, ranks, o.itemsPath, o.queriesPath, report);
    }
    String itemsPath = output.resolve("items").toString();
    String queriesPath = output.resolve("queries").toString();
    try {
      return run(spark, o, output, ranks, itemsPath, queriesPath, report);
    } finally {
      if (o.keep) {
        System.out.printf("generated data kept: %s, %s%n", itemsPath, queriesPath);
      } else {
        EmbeddingTables.remove(spark, itemsPath);
        EmbeddingTables.remove(spark, queriesPath);
        System.out.println("generated data removed (--keep keeps it)");
      }
    }
  }

  private static Result run(
      SparkSession spark,
      FeatureShardingOptions o,
      Path output,
      int ranks,
      String itemsPath,
      String queriesPath,
      RunReport report) {
    if (o.itemsPath == null) {
      report.stage(
          "[1/4] generating %d items x %d dims and %d queries" + " (seed %d) -> %s%n",
          o.items, o.dim, o.queries, o.seed, output);
      EmbeddingTables.generate(spark, o.items, o.dim, o.seed, ranks)
          .write()
          .mode(SaveMode.Overwrite)
          .parquet(itemsPath);
      EmbeddingTables.generate(spark, o.queries, o.dim, o.seed + 0x9E3779B97F4A7C15L, ranks)
          .write()
          .mode(SaveMode.Overwrite)
          .parquet(queriesPath);
    } else {
      report.stage("[1/4] reading items from %s and queries from %s%n", itemsPath, queriesPath);
    }

    Dataset<Row> items = EmbeddingTables.readParquet(spark, "--items-path", itemsPath);
    Dataset<Row> queries = EmbeddingTables.readParquet(spark, "--queries-path", queriesPath);
    EmbeddingTables.checkSchema(items, itemsPath);
    EmbeddingTables.checkSchema(queries, queriesPath);
    long itemCount = items.count();
    long queryCount = queries.count();
    if (itemCount == 0) {
      throw new IllegalArgumentException("no items in " + itemsPath);
    }
    Row first = items.selectExpr("size(embedding)").first();
    int dim = first.isNullAt(0) ? -1 : first.getInt(0);
    if (dim <= 0) {
      throw new IllegalArgumentException(
          "the first item of " + itemsPath + " has no embedding (null or empty)");
    }
    if (itemCount * dim > Integer.MAX_VALUE - 64) {
      throw new IllegalArgumentException(
          itemCount
              + " items x "
              + dim
              + " dims do not fit in"
              + " one Java array on a rank; allowed: at most "
              + (Integer.MAX_VALUE - 64)
              + " floats");
    }
    int k = (int) Math.min(o.topK, itemCount);

    // [2/4] Shard: N ranks, each with one shard of the items and one of the queries, in memory.
    report.stage(
        "[2/4] sharding %d items x %d dims and %d queries over %d ranks (master %s,"
            + " backend %s)%n",
        itemCount, dim, queryCount, ranks, spark.sparkContext().master(), o.backend);
    spark.conf().set("spark.sql.shuffle.partitions", String.valueOf(ranks));
    Dataset<Row> itemShards =
        (items.rdd().getNumPartitions() == ranks ? items : items.repartition(ranks)).cache();
    Dataset<Row> queryShards =
        (queries.rdd().getNumPartitions() == ranks ? queries : queries.repartition(ranks)).cache();
    itemShards.count();
    queryShards.count();
    AllGatherOptions gatherOptions =
        AllGatherOptions.defaults()
            .withBackend(o.backend)
            .withTimeout(o.timeout)
            .withRankSize(ranks);
    Dataset<Row> gathered = NpuGather.allGatherOnNpu(itemShards, gatherOptions);

    // [3/4] Gather, then score on every rank, and write.
    Path recommendationsPath = output.resolve("recommendations");
    report.stage(
        "[3/4] all-gathering the item table onto every rank and"
            + " scoring top-%d per query%s -> %s%n",
        k, o.sqlScoring ? " with SQL (the ALLGATHER join hint)" : "", recommendationsPath);
    long start = System.nanoTime();
    List<long[]> perRank = new ArrayList<>();
    GatherMetrics metrics; // the figures of the gather that ran: the plan's node holds them
    if (o.sqlScoring) {
      Dataset<Row> recommendations = SqlScoring.recommendations(spark, itemShards, queryShards, k);
      recommendations.write().mode(SaveMode.Overwrite).parquet(recommendationsPath.toString());
      metrics = GatherMetrics.of(recommendations);
    } else {
      StructType gatheredSchema = gathered.schema();
      Scorer scorer =
          new Scorer(
              gatheredSchema.fieldIndex("id"),
              gatheredSchema.fieldIndex("embedding"),
              0,
              1,
              dim,
              k,
              itemCount,
              spark.sparkContext().collectionAccumulator("featureSharding.ranks"));
      // Every rank reads the gathered items whole, column by column, from the Arrow vectors.
      JavaRDD<ColumnarBatch> gatheredItems = NpuGather.gatheredBatches(gathered);
      JavaRDD<InternalRow> queryRows = queryShards.queryExecution().toRdd().toJavaRDD();
      JavaRDD<Row> recommendations = gatheredItems.zipPartitions(queryRows, scorer::score);
      spark
          .createDataFrame(recommendations, RECOMMENDATION_SCHEMA)
          .write()
          .mode(SaveMode.Overwrite)
          .parquet(recommendationsPath.toString());
      perRank.addAll(scorer.stats.value());
      perRank.sort((a, b) -> Long.compare(a[0], b[0]));
      metrics = GatherMetrics.of(gathered);
    }
    long jobNanos = System.nanoTime() - start;

    Dataset<Row> written = spark.read().parquet(recommendationsPath.toString());
    long rows = written.count();

    // [4/4] Check a random sample against plain Spark SQL.
    int checked = 0;
    int matching = 0;
    if (o.checkQueries > 0 && queryCount > 0) {
      int sample = (int) Math.min(o.checkQueries, queryCount);
      report.stage(
          "[4/4] checking %d random queries against plain Spark SQL (cross join with every"
              + " item, dot-product UDF, window rank)%n",
          sample);
      Dataset<Row> sampleIds =
          spark.createDataFrame(
              queryShards.select("id").orderBy(rand(o.seed)).limit(sample).collectAsList(),
              queryShards.select("id").schema());
      List<String> mismatches = new ArrayList<>();
      checked = sample;
      matching = PlainSparkCheck.check(itemShards, queryShards, sampleIds, written, k, mismatches);
      for (String mismatch : mismatches.subList(0, Math.min(5, mismatches.size()))) {
        System.out.println("  MISMATCH " + mismatch);
      }
    } else {
      report.stage("[4/4] check skipped (--check 0)%n");
    }

    report.stage(null);
    itemShards.unpersist();
    queryShards.unpersist();
    Result result =
        new Result(ranks, itemCount, dim, queryCount, k, output, rows, checked, matching);
    report.printSummary(result, metrics, perRank, jobNanos, rows, queryCount * k);
    return result;
  }

  static final StructType RECOMMENDATION_SCHEMA =
      new StructType()
          .add("query_id", DataTypes.LongType, false)
          .add("item_id", DataTypes.LongType, false)
          .add("score", DataTypes.FloatType, false)
          .add("rank", DataTypes.IntegerType, false);

  /**
   * The work of one rank: its gathered partition (every item) and its query shard in, its queries'
   * recommendations out.
   */
  static final class Scorer implements Serializable {
    private static final long serialVersionUID = 1L;

    private final int itemIdOrdinal;
    private final int itemEmbeddingOrdinal;
    private final int queryIdOrdinal;
    private final int queryEmbeddingOrdinal;
    private final int dim;
    private final int k;
    private final long expectedItems;

    /** Per rank: {rank, items, queries, load nanos, score nanos}. */
    final CollectionAccumulator<long[]> stats;

    Scorer(
        int itemIdOrdinal,
        int itemEmbeddingOrdinal,
        int queryIdOrdinal,
        int queryEmbeddingOrdinal,
        int dim,
        int k,
        long expectedItems,
        CollectionAccumulator<long[]> stats) {
      this.itemIdOrdinal = itemIdOrdinal;
      this.itemEmbeddingOrdinal = itemEmbeddingOrdinal;
      this.queryIdOrdinal = queryIdOrdinal;
      this.queryEmbeddingOrdinal = queryEmbeddingOrdinal;
      this.dim = dim;
      this.k = k;
      this.expectedItems = expectedItems;
      this.stats = stats;
    }

    Iterator<Row> score(Iterator<ColumnarBatch> gatheredItems, Iterator<InternalRow> queries) {
      int rank = TaskContext.getPartitionId();
      long t0 = System.nanoTime();
      FlatTable items =
          FlatTable.loadColumns(
              gatheredItems,
              itemIdOrdinal,
              itemEmbeddingOrdinal,
              dim,
              (int) expectedItems,
              "item",
              rank);
      FlatTable shard =
          FlatTable.load(queries, queryIdOrdinal, queryEmbeddingOrdinal, dim, 1024, "query", rank);
      long t1 = System.nanoTime();
      int kk = Math.min(k, items.rows);
      List<Row> out = new ArrayList<>(shard.rows * kk);
      TopK.score(items, shard, kk, out);
      long t2 = System.nanoTime();
      stats.add(new long[] {rank, items.rows, shard.rows, t1 - t0, t2 - t1});
      return out.iterator();
    }
  }

  /** Rows as a flat row-major {@code float[rows * dim]} and their ids. */
  static final class FlatTable {
    final int dim;
    int rows;
    long[] ids;
    float[] values;

    private FlatTable(int dim, int capacity) {
      this.dim = dim;
      this.ids = new long[Math.max(1, capacity)];
      this.values = new float[Math.max(1, capacity) * dim];
    }

    /**
     * The gathered batches' rows: per batch, the ids in one copy and every embedding's values in
     * one copy of the array column's elements, after checking that no value is null and that every
     * embedding has {@code dim} values.
     */
    static FlatTable loadColumns(
        Iterator<ColumnarBatch> batches,
        int idOrdinal,
        int embeddingOrdinal,
        int dim,
        int capacityHint,
        String what,
        int rank) {
      FlatTable table = new FlatTable(dim, capacityHint);
      while (batches.hasNext()) {
        ColumnarBatch batch = batches.next();
        int n = batch.numRows();
        if (n == 0) {
          continue;
        }
        ColumnVector ids = batch.column(idOrdinal);
        ColumnVector embeddings = batch.column(embeddingOrdinal);
        ColumnVector values = embeddings.getChild(0);
        if (ids.hasNull() || embeddings.hasNull() || values.hasNull()) {
          throw new IllegalArgumentException(
              "rank " + rank + ": an " + what + " has a null id, embedding or embedding value");
        }
        for (int i = 0; i < n; i++) {
          int length = embeddings.getArray(i).numElements();
          if (length != dim) {
            throw new IllegalArgumentException(
                "rank "
                    + rank
                    + ": "
                    + what
                    + " "
                    + ids.getLong(i)
                    + " has "
                    + length
                    + " dims, the first item "
                    + dim);
          }
        }
        while (table.ids.length - table.rows < n) {
          table.grow();
        }
        ListVector list = (ListVector) ((ArrowBackedColumn) embeddings).getValueVector();
        int first = list.getOffsetBuffer().getInt(0);
        System.arraycopy(ids.getLongs(0, n), 0, table.ids, table.rows, n);
        System.arraycopy(
            values.getFloats(first, n * dim), 0, table.values, table.rows * dim, n * dim);
        table.rows += n;
      }
      return table;
    }

    static FlatTable load(
        Iterator<InternalRow> it,
        int idOrdinal,
        int embeddingOrdinal,
        int dim,
        int capacityHint,
        String what,
        int rank) {
      FlatTable table = new FlatTable(dim, capacityHint);
      while (it.hasNext()) {
        InternalRow row = it.next();
        if (row.isNullAt(idOrdinal) || row.isNullAt(embeddingOrdinal)) {
          throw new IllegalArgumentException(
              "rank " + rank + ": a " + what + " has a null id or embedding");
        }
        long id = row.getLong(idOrdinal);
        ArrayData embedding = row.getArray(embeddingOrdinal);
        int n = embedding.numElements();
        if (n != dim) {
          throw new IllegalArgumentException(
              "rank "
                  + rank
                  + ": "
                  + what
                  + " "
                  + id
                  + " has "
                  + n
                  + " dims, the first item "
                  + dim);
        }
        if (table.rows == table.ids.length) {
          table.grow();
        }
        int base = table.rows * dim;
        float[] values = table.values;
        for (int j = 0; j < dim; j++) {
          if (embedding.isNullAt(j)) {
            throw new IllegalArgumentException(
                "rank " + rank + ": " + what + " " + id + " has a null at dimension " + j);
          }
          values[base + j] = embedding.getFloat(j);
        }
        table.ids[table.rows++] = id;
      }
      return table;
    }

    private void grow() {
      long capacity = Math.min((long) ids.length * 2, (Integer.MAX_VALUE - 64) / dim);
      if (capacity <= ids.length) {
        throw new IllegalStateException(
            "more than " + ids.length + " rows of " + dim + " dims do not fit in one Java array");
      }
      ids = Arrays.copyOf(ids, (int) capacity);
      values = Arrays.copyOf(values, (int) capacity * dim);
    }
  }

  /** Brute-force top-k by dot product, four queries at a time, one small heap per query. */
  static final class TopK {
    private static final int BLOCK = 4;

    private TopK() {}

    static void score(FlatTable items, FlatTable queries, int k, List<Row> out) {
      int dim = items.dim;
      float[] e = items.values;
      int n = items.rows;
      Heap[] heaps = new Heap[BLOCK];
      for (int b = 0; b < BLOCK; b++) {
        heaps[b] = new Heap(k, items.ids);
      }
      // Queries padded to whole blocks with zeros; the padding's results are dropped.
      int blocks = (queries.rows + BLOCK - 1) / BLOCK;
      float[] q = Arrays.copyOf(queries.values, Math.max(blocks * BLOCK * dim, 1));
      for (int block = 0; block < blocks; block++) {
        for (Heap heap : heaps) {
          heap.clear();
        }
        Heap h0 = heaps[0];
        Heap h1 = heaps[1];
        Heap h2 = heaps[2];
        Heap h3 = heaps[3];
        int o0 = block * BLOCK * dim;
        int o1 = o0 + dim;
        int o2 = o1 + dim;
        int o3 = o2 + dim;
        for (int i = 0, base = 0; i < n; i++, base += dim) {
          // Four independent sums, each in dimension order (as Spark SQL's aggregate).
          float s0 = 0f;
          float s1 = 0f;
          float s2 = 0f;
          float s3 = 0f;
          for (int j = 0; j < dim; j++) {
            float v = e[base + j];
            s0 += q[o0 + j] * v;
            s1 += q[o1 + j] * v;
            s2 += q[o2 + j] * v;
            s3 += q[o3 + j] * v;
          }
          if (s0 >= h0.threshold) {
            h0.offer(s0, i);
          }
          if (s1 >= h1.threshold) {
            h1.offer(s1, i);
          }
          if (s2 >= h2.threshold) {
            h2.offer(s2, i);
          }
          if (s3 >= h3.threshold) {
            h3.offer(s3, i);
          }
        }
        for (int b = 0; b < BLOCK; b++) {
          int query = block * BLOCK + b;
          if (query < queries.rows) {
            heaps[b].drainTo(queries.ids[query], out);
          }
        }
      }
    }
  }

  /**
   * The best k (score, item) pairs seen so far: a binary heap with the worst at the root, in
   * primitive arrays. Better = higher score, then smaller item id.
   */
  static final class Heap {
    private final int k;
    private final long[] itemIds;
    private final float[] scores;
    private final int[] items;
    private int size;

    /** Scores below this cannot enter: the root's score once full, else -infinity. */
    float threshold;

    Heap(int k, long[] itemIds) {
      this.k = k;
      this.itemIds = itemIds;
      this.scores = new float[k];
      this.items = new int[k];
      clear();
    }

    void clear() {
      size = 0;
      threshold = Float.NEGATIVE_INFINITY;
    }

    /** True when (sa, a) ranks below (sb, b). */
    private boolean worse(float sa, int a, float sb, int b) {
      return sa < sb || (sa == sb && itemIds[a] > itemIds[b]);
    }

    void offer(float score, int item) {
      if (Float.isNaN(score)) {
        return;
      }
      if (size < k) {
        int i = size++;
        while (i > 0) {
          int parent = (i - 1) >>> 1;
          if (!worse(score, item, scores[parent], items[parent])) {
            break;
          }
          scores[i] = scores[parent];
          items[i] = items[parent];
          i = parent;
        }
        scores[i] = score;
        items[i] = item;
      } else if (worse(scores[0], items[0], score, item)) {
        siftDown(score, item);
      } else {
        return;
      }
      if (size == k) {
        threshold = scores[0];
      }
    }

    private void siftDown(float score, int item) {
      int i = 0;
      while (true) {
        int child = 2 * i + 1;
        if (child >= size) {
          break;
        }
        if (child + 1 < size
            && worse(scores[child + 1], items[child + 1], scores[child], items[child])) {
          child++;
        }
        if (!worse(scores[child], items[child], score, item)) {
          break;
        }
        scores[i] = scores[child];
        items[i] = items[child];
        i = child;
      }
      scores[i] = score;
      items[i] = item;
    }

    /** Appends (queryId, itemId, score, rank) best first, rank from 1, and empties the heap. */
    void drainTo(long queryId, List<Row> out) {
      int n = size;
      Row[] sorted = new Row[n];
      // Popping the worst repeatedly fills the result from the back.
      for (int r = n - 1; r >= 0; r--) {
        float score = scores[0];
        int item = items[0];
        size--;
        if (size > 0) {
          siftDown(scores[size], items[size]);
        }
        sorted[r] = RowFactory.create(queryId, itemIds[item], score, r + 1);
      }
      Collections.addAll(out, sorted);
      clear();
    }
  }
}
