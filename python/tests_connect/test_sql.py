"""``all_gather_on_npu(TABLE(t), option => value ...)``, the SQL form of ``allGatherOnNpu``, over
Spark Connect: the same rows on every rank as ``df.allGatherOnNpu()`` and the errors of the JVM
API. Every gathered row is checked, on every rank (``spark_partition_id()`` is the rank)."""

from __future__ import annotations

import random

import pytest
from _support import ROOT, code_blocks
from conftest import RANKS, by_rank
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import npugather


def items(spark: SparkSession, seed: int) -> DataFrame:
    """Random rows of several column types, nulls included, over RANKS partitions."""
    rng = random.Random(seed)
    rows = [
        (
            n,
            rng.choice([None, rng.random()]),
            rng.choice([None, f"s{rng.randrange(1000)}é"]),
            [rng.random(), rng.random()],
            rng.choice([None, rng.randrange(-(2**40), 2**40)]),
        )
        for n in range(60)
    ]
    df = spark.createDataFrame(
        rows, "id bigint, score double, name string, embedding array<float>, big bigint"
    )
    return df.repartition(RANKS, "id")


def test_a_dataframe_argument_gives_allgatheronnpus_rows_on_every_rank(spark: SparkSession) -> None:
    df = items(spark, 1)
    gathered = spark.sql(
        "SELECT * FROM all_gather_on_npu(TABLE({items}), timeout => '60s')", items=df
    )

    assert type(gathered).__module__.startswith("pyspark.sql.connect.")
    assert gathered.columns == ["source_rank", "id", "score", "name", "embedding", "big"]
    expected = by_rank(df.allGatherOnNpu(timeout="60s"))
    assert sorted(expected) == list(range(RANKS))
    assert by_rank(gathered) == expected
    assert sum(len(rows) for rows in expected.values()) == RANKS * 60


def test_options_by_name_give_the_keywords_result(spark: SparkSession) -> None:
    df = spark.range(0, 9, 1, 3)
    gathered = spark.sql(
        "SELECT * FROM all_gather_on_npu(TABLE({df}), rankSize => 2,"
        " sourceRankColumn => 'from_rank', backend => 'host', hostTransport => 'auto')",
        df=df,
    )
    expected = df.allGatherOnNpu(
        rank_size=2, source_rank_column="from_rank", backend="host", host_transport="auto"
    )
    assert gathered.columns == ["from_rank", "id"]
    ranks = by_rank(gathered)
    assert sorted(ranks) == [0, 1]
    # Round-robin onto 2 partitions: the same rows as the keywords give, grouped by source rank.
    for rows in ranks.values():
        assert sorted(rows) == sorted(by_rank(expected)[0])
        assert [row.from_rank for row in rows] == sorted(row.from_rank for row in rows)


@pytest.mark.parametrize("adaptive", ["true", "false"])
def test_a_shuffled_input_gives_the_same_rows_with_and_without_adaptive_execution(
    spark: SparkSession, adaptive: str
) -> None:
    spark.conf.set("spark.sql.adaptive.enabled", adaptive)
    spark.conf.set("spark.sql.shuffle.partitions", str(RANKS))  # one rank per task slot
    try:
        df = (
            items(spark, 2)
            .groupBy((F.col("id") % 7).alias("k"))
            .agg(F.count("*").alias("n"), F.max("name").alias("name"))
        )
        gathered = by_rank(spark.sql("SELECT * FROM all_gather_on_npu(TABLE({df}))", df=df))
        expected = by_rank(df.allGatherOnNpu())
        assert sorted(gathered) == sorted(expected)
        for rank, rows in gathered.items():
            assert len(rows) == 7
            assert sorted(rows) == sorted(expected[rank])
    finally:
        spark.conf.unset("spark.sql.adaptive.enabled")
        spark.conf.set("spark.sql.shuffle.partitions", "4")


def test_a_cached_view_gives_the_same_rows(spark: SparkSession) -> None:
    df = items(spark, 3).select("id", "score", "big").cache()
    try:
        df.count()
        df.createOrReplaceTempView("cached_items")
        gathered = spark.sql("SELECT * FROM all_gather_on_npu(TABLE(cached_items))")
        assert by_rank(gathered) == by_rank(df.allGatherOnNpu())
    finally:
        spark.catalog.dropTempView("cached_items")
        df.unpersist()


@pytest.mark.parametrize(
    "option, message",
    [
        ("timeout => 'soon'", "timeout = 'soon' is invalid; allowed: a duration such as 120s"),
        ("backend => 'nccl'", "backend = nccl is invalid; allowed: one of [hccl, lccl, host]"),
        ("bakend => 'host'", "option 'bakend' is unknown; did you mean 'backend'?"),
        ("sourceRankColumn => 'ID'", "sourceRankColumn 'ID' collides with input column 'id'"),
        ("'host'", "all_gather_on_npu: argument 2 ('host') has no name; options are named"),
    ],
)
def test_a_refused_option_fails_the_query_with_the_jvm_apis_message(
    spark: SparkSession, option: str, message: str
) -> None:
    """As from a classic session: npugather.InvalidOptionError, a ValueError, with the message."""
    df = spark.range(0, 4, 1, 2)
    with pytest.raises(npugather.InvalidOptionError) as raised:
        _ = spark.sql(f"SELECT * FROM all_gather_on_npu(TABLE({{df}}), {option})", df=df).schema
    assert str(raised.value).startswith(message)
    assert raised.value.java_class == "java.lang.IllegalArgumentException"


def _operations_sql_snippet() -> str:
    """The SQL snippet of docs/operations.md's Spark Connect section, as written."""
    blocks = code_blocks(ROOT / "docs" / "operations.md", "sql", "## Spark Connect")
    assert len(blocks) == 1, "the Spark Connect section's SQL snippet"
    return blocks[0]


def test_the_documented_sql_snippet_runs_as_written(spark: SparkSession) -> None:
    statements = [s.strip() for s in _operations_sql_snippet().split(";") if s.strip()]
    try:
        for statement in statements[:-1]:
            spark.sql(statement).collect()
        rows = spark.sql(statements[-1]).collect()
    finally:
        spark.catalog.dropTempView("items")
    # 2 input partitions (ranks) of 4 rows each, on each of the 2 ranks.
    assert [tuple(row) for row in rows] == [(rank, 4 * RANKS) for rank in range(RANKS)]


def test_the_tensor_api_reaches_every_rank_over_connect(spark: SparkSession) -> None:
    """Python's tensor API is ``mapInArrow`` with ``gathered_tensor`` on the gathered DataFrame,
    which Spark Connect carries as it is: each rank's function sees every rank's rows."""
    import pyarrow

    rng = random.Random(5)
    values = [[rng.uniform(-1, 1) for _ in range(3)] for _ in range(4 * RANKS)]
    df = spark.range(0, len(values), 1, RANKS).select(
        F.element_at(
            F.array(*[F.array(*map(F.lit, v)) for v in values]), F.col("id").cast("int") + 1
        )
        .cast("array<float>")
        .alias("f")
    )

    def tensor(batches):  # type: ignore[no-untyped-def]
        x = npugather.gathered_tensor(batches, ["f"])
        yield pyarrow.RecordBatch.from_pydict({"shape": [list(x.shape)], "x": [x.ravel().tolist()]})

    gathered = spark.sql("SELECT * FROM all_gather_on_npu(TABLE({df}))", df=df)
    for source in (gathered, df.allGatherOnNpu()):
        results = source.mapInArrow(tensor, "shape array<bigint>, x array<double>").collect()
        assert len(results) == RANKS
        for result in results:
            assert result.shape == [RANKS, 4, 3]
            assert result.x == pytest.approx([v for row in values for v in row], rel=1e-6)
