"""``df.allGatherOnNpu()`` on Spark Connect DataFrames: the same results, options and errors as
the classic API, through the server's relation plugin. Every gathered row is checked, on every
rank (``spark_partition_id()`` of the result is the rank)."""

from __future__ import annotations

import random

import pytest
from _support import assert_a_misspelled_session_setting_is_refused
from conftest import RANKS, by_rank
from pyspark.sql import Row, SparkSession
from pyspark.sql import functions as F

import npugather

# The operator contract's example: rank r contributes the 2 x 2 int32 tensor SPEC_X[r].
SPEC_X = {0: [[16, 56], [5, 96]], 1: [[-7, -91], [-75, 38]]}


def test_a_connect_dataframe_is_gathered_by_the_servers_plugin(spark: SparkSession) -> None:
    df = spark.range(0, 4, 1, 2)
    assert type(df).__module__.startswith("pyspark.sql.connect.")
    gathered = df.allGatherOnNpu()
    assert type(gathered).__module__.startswith("pyspark.sql.connect.")
    assert gathered.columns == ["source_rank", "id"]


def test_the_spec_example_gives_every_rank_both_inputs_stacked_in_rank_order(
    spark: SparkSession,
) -> None:
    flat = [v for rank in (0, 1) for row in SPEC_X[rank] for v in row]
    # Rows 0-1 in partition 0 (rank 0), rows 2-3 in partition 1 (rank 1), as the contract has it.
    df = spark.range(0, 4, 1, 2).select(
        (F.col("id") / 2).cast("int").alias("r"),
        F.element_at(F.array(*map(F.lit, flat[0::2])), F.col("id").cast("int") + 1)
        .cast("int")
        .alias("a"),
        F.element_at(F.array(*map(F.lit, flat[1::2])), F.col("id").cast("int") + 1)
        .cast("int")
        .alias("b"),
    )

    gathered = df.allGatherOnNpu()

    expected = [Row(source_rank=rank, r=rank, a=a, b=b) for rank in (0, 1) for a, b in SPEC_X[rank]]
    assert by_rank(gathered) == {0: expected, 1: expected}


def test_everyday_actions_see_every_row_of_every_rank(spark: SparkSession) -> None:
    values = [random.randrange(-(2**62), 2**62) for _ in range(10 * RANKS)]
    df = spark.range(0, len(values), 1, RANKS).withColumn(
        "v", F.element_at(F.array(*map(F.lit, values)), F.col("id").cast("int") + 1)
    )
    gathered = df.allGatherOnNpu(timeout="60s")

    expected = [
        Row(source_rank=r, id=i, v=values[i])
        for r in range(RANKS)
        for i in range(10 * r, 10 * (r + 1))
    ]
    assert by_rank(gathered) == {r: expected for r in range(RANKS)}
    assert gathered.collect() == expected * RANKS
    assert gathered.count() == RANKS * len(values)
    counts = gathered.groupBy("source_rank").count().orderBy("source_rank").collect()
    assert counts == [Row(source_rank=r, count=10 * RANKS) for r in range(RANKS)]
    sums = gathered.groupBy("id").agg(F.sum("v").alias("s")).orderBy("id").collect()
    assert sums == [Row(id=i, s=v * RANKS) for i, v in enumerate(values)]
    shown = gathered._show_string(n=3, truncate=False)
    cells = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in shown.splitlines()
        if line.startswith("|")
    ]
    assert cells == [["source_rank", "id", "v"]] + [["0", str(i), str(values[i])] for i in range(3)]


def test_options_give_the_classic_apis_result(spark: SparkSession) -> None:
    df = spark.range(0, 9, 1, 3)
    gathered = df.allGatherOnNpu(
        rank_size=RANKS,
        source_rank_column="from_rank",
        backend="host",
        timeout=60,
        host_transport="auto",
    )
    assert gathered.columns == ["from_rank", "id"]
    ranks = by_rank(gathered)
    assert sorted(ranks) == list(range(RANKS))
    # Round-robin onto RANKS partitions: each rank holds all 9 ids once, grouped by source rank.
    for rows in ranks.values():
        assert rows == ranks[0]
        assert sorted(row.id for row in rows) == list(range(9))
        assert [row.from_rank for row in rows] == sorted(row.from_rank for row in rows)


def test_the_session_defaults_apply(spark: SparkSession) -> None:
    spark.conf.set("spark.npugather.sourceRankColumn", "origin")
    try:
        assert spark.range(0, 2, 1, 2).allGatherOnNpu().columns == ["origin", "id"]
    finally:
        spark.conf.unset("spark.npugather.sourceRankColumn")


@pytest.mark.parametrize(
    "options, kind, message",
    [
        (dict(timeout="soon"), ValueError, "timeout = 'soon' is invalid; allowed: a duration"),
        (dict(rank_size=65537), ValueError, "rank_size = 65537 is invalid"),
        (dict(backend="nccl"), ValueError, "backend = 'nccl' is invalid; allowed: one of"),
        (dict(retryable="yes"), TypeError, "retryable = 'yes' (str) is invalid"),
        (dict(source_rank_column="ID"), ValueError, "collides with input column 'id'"),
    ],
)
def test_bad_option_values_raise_the_classic_apis_errors(
    spark: SparkSession, options, kind, message
) -> None:
    with pytest.raises(kind) as raised:
        spark.range(0, 4, 1, 2).allGatherOnNpu(**options)
    assert message in str(raised.value)


def test_unknown_keywords_raise_the_classic_apis_type_error(spark: SparkSession) -> None:
    with pytest.raises(TypeError, match="unknown option 'rankSize'; did you mean 'rank_size'"):
        spark.range(0, 4, 1, 2).allGatherOnNpu(rankSize=2)


def test_rank_root_must_be_below_the_ranks_of_the_partitions(spark: SparkSession) -> None:
    with pytest.raises(
        npugather.InvalidOptionError,
        match=r"^rank_root = 2 is invalid; allowed: 0 <= rank_root < rank_size"
        r" \(2\)$",
    ):
        spark.range(0, 4, 1, 2).allGatherOnNpu(rank_root=2)
    assert spark.range(0, 4, 1, 2).allGatherOnNpu(rank_root=1).count() == 8


def test_a_typo_in_a_session_setting_is_refused_as_by_the_classic_api(spark: SparkSession) -> None:
    assert_a_misspelled_session_setting_is_refused(spark)


def test_a_failed_rank_fails_the_action_as_with_the_classic_api(spark: SparkSession) -> None:
    gathered = spark.range(0, 8, 1, 2).allGatherOnNpu(inject_failure="1", timeout="30s")

    with pytest.raises(npugather.NpuGatherError) as raised:
        gathered.collect()

    error = raised.value
    if error.java_class == "io.npugather.NpuGatherException":
        # Rank 0 saw its peer fail first.
        assert error.result_code == "REMOTE_ERROR" and error.rank == 0
        assert "rank 1" in str(error)
    else:
        # Rank 1's own, injected, failure.
        assert error.java_class == "java.lang.IllegalStateException" and error.rank == 1
        assert "failure injected by inject_failure" in str(error)
    # Spark's error framework, as over py4j.
    assert error.error_class == error.getCondition() == "NPUGATHER_RANK_FAILED", error
    assert error.sqlstate == error.getSqlState() == "58000", error
    assert error.message_parameters["operation"] == "allGatherOnNpu", error
    assert spark.range(0, 8, 1, 2).allGatherOnNpu().count() == 16


def test_a_server_without_the_plugin_is_named_as_what_to_add(tmp_path) -> None:
    """In a process of its own: a second local Connect server, started without the plugin."""
    import os
    import subprocess
    import sys
    import textwrap

    script = tmp_path / "no_plugin.py"
    script.write_text(
        textwrap.dedent("""\
        import npugather
        from pyspark.sql import SparkSession
        spark = (SparkSession.builder.remote("local[2]").config("spark.ui.enabled", "false")
                 .getOrCreate())
        try:
            spark.range(0, 4, 1, 2).allGatherOnNpu()
        except npugather.ConnectorNotFoundError as e:
            print("refused:", e)
        spark.stop()
        """)
    )
    result = subprocess.run(
        [sys.executable, str(script)],
        env=dict(os.environ),
        text=True,
        capture_output=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (
        "refused: the Spark Connect server has no NpuGather plugin or an older one: start it"
        " with this package's jar (python -m npugather jars) and --conf"
        " spark.connect.extensions.relation.classes="
        "io.npugather.spark.connect.NpuGatherRelationPlugin"
    ) in result.stdout


def test_configure_gives_a_local_server_the_plugin_and_leaves_a_remote_one_alone() -> None:
    local = npugather.configure(
        SparkSession.builder.remote("local[2]").config(
            "spark.connect.extensions.relation.classes", "a.B"
        )
    )
    assert local._options["spark.connect.extensions.relation.classes"] == (
        "a.B,io.npugather.spark.connect.NpuGatherRelationPlugin"
    )
    assert local._options["spark.jars"].split(",") == npugather.jars()
    remote = SparkSession.builder.remote("sc://localhost:15002")
    assert npugather.configure(remote) is remote and "spark.jars" not in remote._options
