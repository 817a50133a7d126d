"""Batch feature sharding from PySpark: every rank gets the whole item-embedding table through
``allGatherOnNpu`` and scores its shard of the queries against it.

The pipeline of the Java example (io.npugather.examples.FeatureSharding):

1. Items ``(id bigint, embedding array<float>)`` and queries (same schema) are read from
   Parquet, or generated first (``--items``, ``--queries``, ``--dim``, ``--seed``).
2. The item table, split into N shards (one per rank), is all-gathered: afterwards every rank
   holds every item.
3. Every rank turns its gathered partition into one NumPy matrix (``npugather.gathered_matrix``
   inside ``mapInArrow``) and scores its shard of the queries (query i belongs to rank i mod N;
   the few queries are broadcast): candidates by one matrix product, then the best
   ``top-k + 32`` rescored exactly (a float sum in dimension order, as Spark SQL sums), best
   first, ties to the smaller item id.
   With ``--scoring sql``, steps 2 and 3 are one SQL query instead (the Java example's
   ``SqlScoring``): the queries joined with the items by the ``ALLGATHER`` hint, so every
   executor gathers the items once, and the top-k ranked by a window.
4. The recommendations ``(query_id, item_id, score, rank)`` are written as Parquet, and a random
   sample of queries is checked against the same top-k computed with plain Spark SQL (a cross
   join with every item, ``aggregate(zip_with(...))``, a window rank).

Run: ``python3 examples/python/feature_sharding.py`` (``--help`` for the options), after
``pip install "./python[tensors]"`` and ``mvn -B -DskipTests install``. Exits 1 on a mismatch.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from py4j.protocol import Py4JJavaError
from pyspark import Broadcast, TaskContext
from pyspark.sql import DataFrame, Row, SparkSession, Window
from pyspark.sql import functions as F

import npugather

# Candidates kept from the matrix product beyond k before the exact rescoring.
CANDIDATE_MARGIN = 32
RECOMMENDATIONS = pa.schema(
    [
        ("query_id", pa.int64()),
        ("item_id", pa.int64()),
        ("score", pa.float32()),
        ("rank", pa.int32()),
    ]
)
DOT = "aggregate(zip_with(q, e, (x, y) -> x * y), cast(0 as float), (acc, v) -> acc + v)"
# --scoring sql: the queries joined with every item by the ALLGATHER hint, top-k by a window.
SQL_SCORING = """
SELECT query_id, item_id, score, rank FROM (
  SELECT query_id, item_id, score,
         row_number() OVER (PARTITION BY query_id ORDER BY score DESC, item_id) AS rank
  FROM (
    SELECT /*+ ALLGATHER(i) */ q.id AS query_id, i.id AS item_id,
           aggregate(zip_with(q.embedding, i.embedding, (x, y) -> x * y),
                     CAST(0 AS FLOAT), (acc, v) -> acc + v) AS score
    FROM feature_sharding_queries q CROSS JOIN feature_sharding_items i))
WHERE rank <= {k}"""


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="feature_sharding.py",
        description="Feature sharding: all-gather an item-embedding table onto every rank, score"
        " each rank's shard of queries against every item (top-k by dot product),"
        " write the recommendations as Parquet and check a sample against plain"
        " Spark SQL.",
    )
    data = parser.add_argument_group("data (generated unless both paths are given)")
    data.add_argument("--items", type=int, default=100_000, help="items to generate")
    data.add_argument("--dim", type=int, default=64, help="embedding dimension of generated data")
    data.add_argument("--queries", type=int, default=2_000, help="queries to generate")
    data.add_argument("--seed", type=int, default=7, help="seed of the data and of the sample")
    data.add_argument("--items-path", help="Parquet items: id bigint, embedding array<float>")
    data.add_argument("--queries-path", help="Parquet queries: id bigint, embedding array<float>")
    job = parser.add_argument_group("job")
    job.add_argument("--top-k", type=int, default=10, help="recommendations per query")
    job.add_argument(
        "--scoring",
        choices=["arrays", "sql"],
        default="arrays",
        help="arrays: each rank scores its queries against the gathered items in"
        " NumPy; sql: a SQL query joins the queries with the items by the"
        " ALLGATHER hint and ranks the dot products with a window (slower: one"
        " row per pair)",
    )
    job.add_argument("--output", help="where generated data and recommendations go")
    job.add_argument(
        "--keep",
        action="store_true",
        help="keep the generated data (removed after the run otherwise)",
    )
    job.add_argument("--master", help="Spark master (default: spark-submit's, else local[*])")
    job.add_argument("--ranks", type=int, default=0, help="ranks = shards (default: the cores)")
    job.add_argument("--backend", default="host", help="host, hccl or lccl")
    job.add_argument("--timeout", default="120s", help="bound of every wait of the gather")
    job.add_argument(
        "--check",
        type=int,
        default=20,
        help="queries checked against plain Spark (0 skips the check)",
    )
    args = parser.parse_args(argv)
    if (args.items_path is None) != (args.queries_path is None):
        parser.error("--items-path and --queries-path go together (or neither)")
    for name in ("items", "dim", "queries", "top_k"):
        if getattr(args, name) <= 0:
            parser.error(
                f"--{name.replace('_', '-')} = {getattr(args, name)}; allowed: a positive integer"
            )
    return args


def generate(spark: SparkSession, n: int, dim: int, seed: int, partitions: int) -> DataFrame:
    """``n`` rows ``(id, embedding)``, each value uniform in [-1, 1), seeded per column."""
    values = [(F.rand(seed * 1_000_003 + j) * 2 - 1).cast("float") for j in range(dim)]
    return spark.range(0, n, 1, partitions).select("id", F.array(*values).alias("embedding"))


def top_k(items: np.ndarray, item_ids: np.ndarray, queries: np.ndarray, k: int) -> list[np.ndarray]:
    """Per query the best k items: (item indices, exact float32 scores), best first."""
    approximate = queries @ items.T
    c = min(len(items), k + CANDIDATE_MARGIN)
    candidates = np.argpartition(-approximate, c - 1, axis=1)[:, :c]
    # Exact: float32 products summed in dimension order, as the SQL check computes them.
    exact = np.zeros(candidates.shape, dtype=np.float32)
    for j in range(items.shape[1]):
        exact += queries[:, j, None] * items[candidates, j]
    # Best first: higher score, then the smaller item id.
    order = np.lexsort((item_ids[candidates], -exact), axis=1)[:, :k]
    return [np.take_along_axis(candidates, order, axis=1), np.take_along_axis(exact, order, axis=1)]


def scorer(
    query_ids: Broadcast[np.ndarray], query_vectors: Broadcast[np.ndarray], ranks: int, k: int
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The work of one rank: its gathered partition (every item) in, its queries' top-k out."""

    def score(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        context = TaskContext.get()
        assert context is not None, "score runs in a Spark task"
        rank = context.partitionId()
        table = pa.Table.from_batches(list(batches))
        items = npugather.gathered_matrix(table, ["embedding"])
        item_ids = table.column("id").to_numpy()
        ids = query_ids.value[rank::ranks]
        vectors = query_vectors.value[rank::ranks]
        kk = min(k, len(items))
        for start in range(0, len(ids), 256):
            best, scores = top_k(items, item_ids, vectors[start : start + 256], kk)
            n = len(best)
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array(np.repeat(ids[start : start + 256], kk)),
                    pa.array(item_ids[best].ravel()),
                    pa.array(scores.ravel()),
                    pa.array(np.tile(np.arange(1, kk + 1, dtype=np.int32), n)),
                ],
                schema=RECOMMENDATIONS,
            )

    return score


def check(
    items: DataFrame, queries: DataFrame, sample: DataFrame, written: DataFrame, k: int
) -> list[str]:
    """Plain Spark SQL's top-k of the sampled queries against the job's: the same items in the
    same order, scores within 1e-5 relative. Returns the mismatches."""
    sampled = queries.join(F.broadcast(sample), "id").select(
        F.col("id").alias("query_id"), F.col("embedding").alias("q")
    )
    expected = (
        sampled.crossJoin(items.select(F.col("id").alias("item_id"), F.col("embedding").alias("e")))
        .select("query_id", "item_id", F.expr(DOT).alias("score"))
        .withColumn(
            "rank",
            F.row_number().over(
                Window.partitionBy("query_id").orderBy(F.desc("score"), F.asc("item_id"))
            ),
        )
        .where(F.col("rank") <= k)
    )
    want = _by_query(expected.collect())
    got = _by_query(
        written.join(F.broadcast(sample.withColumnRenamed("id", "query_id")), "query_id")
        .select("query_id", "item_id", "score", "rank")
        .collect()
    )
    mismatches = []
    for query, rows in sorted(want.items()):
        mine = got.get(query, [])
        if len(mine) != len(rows):
            mismatches.append(
                f"query {query}: plain Spark has {len(rows)} recommendations, the job {len(mine)}"
            )
            continue
        for w, g in zip(rows, mine, strict=True):
            score_differs = abs(w.score - g.score) > 1e-5 * max(1.0, abs(w.score))
            if (w.item_id, w.rank) != (g.item_id, g.rank) or score_differs:
                mismatches.append(
                    f"query {query} rank {w.rank}: plain Spark item {w.item_id}"
                    f" score {w.score}, the job item {g.item_id} score {g.score}"
                )
                break
    return mismatches


def _by_query(rows: Iterable[Row]) -> dict[int, list[Row]]:
    grouped: dict[int, list[Row]] = {}
    for row in rows:
        grouped.setdefault(row.query_id, []).append(row)
    return {q: sorted(r, key=lambda row: row.rank) for q, r in grouped.items()}


def run(spark: SparkSession, args: argparse.Namespace, output: Path) -> bool:
    started = time.monotonic()
    ranks = args.ranks or spark.sparkContext.defaultParallelism
    items_path, queries_path = args.items_path, args.queries_path
    if items_path is None:
        items_path, queries_path = str(output / "items"), str(output / "queries")
        print(
            f"[1/4] generating {args.items} items x {args.dim} dims and {args.queries} queries"
            f" (seed {args.seed}) -> {output}"
        )
        generate(spark, args.items, args.dim, args.seed, ranks).write.mode("overwrite").parquet(
            items_path
        )
        generate(spark, args.queries, args.dim, args.seed + 1, ranks).write.mode(
            "overwrite"
        ).parquet(queries_path)
    else:
        print(f"[1/4] reading items from {items_path} and queries from {queries_path}")
    items = spark.read.parquet(items_path).select("id", "embedding")
    queries = spark.read.parquet(queries_path).select("id", "embedding")
    for df, path in ((items, items_path), (queries, queries_path)):
        if dict(df.dtypes) != {"id": "bigint", "embedding": "array<float>"}:
            raise SystemExit(
                f"{path} has columns {df.dtypes}; expected: id bigint, embedding array<float>"
            )

    print(
        f"[2/4] sharding the items over {ranks} ranks (master {spark.sparkContext.master},"
        f" backend {args.backend})"
    )
    item_shards = items.repartition(ranks).cache()
    item_count = item_shards.count()
    local_queries = queries.orderBy("id").toArrow()
    query_ids = spark.sparkContext.broadcast(local_queries.column("id").to_numpy())
    query_vectors = spark.sparkContext.broadcast(
        npugather.gathered_matrix(local_queries, ["embedding"], source_rank_column=None)
    )
    gathered = npugather.all_gather_on_npu(
        item_shards, backend=args.backend, timeout=args.timeout, rank_size=ranks
    )

    recommendations_path = str(output / "recommendations")
    k = min(args.top_k, item_count)
    sql = args.scoring == "sql"
    print(
        f"[3/4] all-gathering the item table onto every rank and scoring top-{k} per query"
        f"{' with SQL (the ALLGATHER join hint)' if sql else ''} -> {recommendations_path}"
    )
    job_started = time.monotonic()
    if sql:
        item_shards.createOrReplaceTempView("feature_sharding_items")
        queries.repartition("id").createOrReplaceTempView("feature_sharding_queries")
        recommendations = spark.sql(SQL_SCORING.format(k=k))
    else:
        recommendations = gathered.mapInArrow(
            scorer(query_ids, query_vectors, ranks, k),
            "query_id bigint, item_id bigint, score float, rank int",
        )
    recommendations.write.mode("overwrite").parquet(recommendations_path)
    job_seconds = time.monotonic() - job_started
    written = spark.read.parquet(recommendations_path)
    rows = written.count()
    metrics = npugather.gather_metrics(recommendations)  # of the gather that ran in its plan

    mismatches: list[str] = []
    checked = min(args.check, len(local_queries))
    if checked > 0:
        print(f"[4/4] checking {checked} random queries against plain Spark SQL")
        sample = spark.createDataFrame(
            queries.select("id").orderBy(F.rand(args.seed)).limit(checked).collect(), "id bigint"
        )
        mismatches = check(item_shards, queries, sample, written, k)
        for mismatch in mismatches[:5]:
            print(f"  MISMATCH {mismatch}")
    else:
        print("[4/4] check skipped (--check 0)")
    item_shards.unpersist()

    print("\nsummary")
    print(f"  ranks               {ranks}")
    print(
        f"  gathered            {metrics.rows_gathered} rows on all ranks"
        f" ({item_count} items x {ranks} ranks), {metrics.bytes_received} bytes received"
    )
    print(
        f"  gather time         rendezvous {metrics.rendezvous_nanos / 1e6:.1f} ms,"
        f" conversion {metrics.conversion_nanos / 1e6:.1f} ms, collective"
        f" {metrics.collective_nanos / 1e6:.1f} ms (summed over ranks)"
    )
    print(f"  gather+score+write  {job_seconds * 1e3:.1f} ms (the Spark job)")
    expected_rows = len(local_queries) * k
    print(
        f"  recommendations     {rows} rows ({len(local_queries)} queries x top-{k}"
        f"{'' if rows == expected_rows else f', EXPECTED {expected_rows}'}) ->"
        f" {recommendations_path}"
    )
    if checked > 0:
        print(f"check: {checked - len(mismatches)}/{checked} queries match plain Spark")
    print(f"  total               {time.monotonic() - started:.1f} s")
    return not mismatches and rows == expected_rows


def connector(spark: SparkSession) -> Any:
    """The connector's JVM package, io.npugather.spark, on the session's driver (py4j)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None, "a classic session has a driver JVM"
    return jvm.io.npugather.spark


def bad_input(message: str) -> int:
    """A bad option, path or rank count: one line on stderr and exit code 2, as the Java job."""
    print(f"error: {message} (--help lists the options)", file=sys.stderr)
    return 2


def missing_path(option: str, path: str | None) -> str | None:
    """The error of a local path (no scheme, or file:) that does not exist; None otherwise."""
    if path is None or ("://" in path and not path.startswith("file:")):
        return None
    local = path[len("file:") :] if path.startswith("file:") else path
    return None if Path(local).exists() else f"{option} = '{path}': no such file or directory"


def main(argv: list[str]) -> int:
    args = parse(argv)
    # Checked before Spark starts, so a mistake costs neither start-up nor generated data.
    for option, path in (("--items-path", args.items_path), ("--queries-path", args.queries_path)):
        problem = missing_path(option, path)
        if problem:
            return bad_input(problem)
    output = (
        Path(args.output).resolve()
        if args.output
        else Path(tempfile.mkdtemp(prefix="npugather-feature-sharding-"))
    )
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.appName("FeatureSharding")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
    )
    if args.master:
        builder = builder.master(args.master)
    elif "PYSPARK_GATEWAY_PORT" not in os.environ:  # not launched by spark-submit
        builder = builder.master("local[*]")
    spark = npugather.configure(builder).getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    generated = args.items_path is None
    try:
        # Every rank needs a task slot of its own (barrier mode): counted as allGatherOnNpu
        # counts them, before any data is generated.
        ranks = args.ranks or spark.sparkContext.defaultParallelism
        try:
            connector(spark).ClusterCheck.requireBarrierSlots(spark.sparkContext._jsc.sc(), ranks)
        except (Py4JJavaError, npugather.NpuGatherError) as e:
            generated = False
            master = spark.sparkContext.master or ""
            if master.startswith("local"):
                slots = spark.sparkContext.defaultParallelism
                return bad_input(
                    f"--ranks = {ranks}, but {master} runs at most {slots} tasks at"
                    " once and every rank needs a slot of its own (barrier mode);"
                    f" pass --ranks {slots} or fewer, or a --master with more cores"
                )
            return bad_input(f"--ranks = {ranks}: {str(e).strip().splitlines()[0]}")
        return 0 if run(spark, args, output) else 1
    finally:
        spark.stop()
        if generated:
            paths = [output / "items", output / "queries"]
            if args.keep:
                print(f"generated data kept: {paths[0]}, {paths[1]}")
            else:
                for path in paths:
                    shutil.rmtree(path, ignore_errors=True)
                print("generated data removed (--keep keeps it)")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
