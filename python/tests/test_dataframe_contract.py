"""The gathered result is a DataFrame like any other, used the way PySpark users use one."""

from __future__ import annotations

import pytest
from conftest import ranks_of
from pyspark.sql import Row, SparkSession


def _expected(ranks: int, per_rank: int):
    return [
        Row(source_rank=r, id=i)
        for r in range(ranks)
        for i in range(per_rank * r, per_rank * (r + 1))
    ]


def test_show_prints_the_first_gathered_rows(spark: SparkSession, capsys) -> None:
    ranks = ranks_of(spark)
    spark.range(0, 3 * ranks, 1, ranks).allGatherOnNpu().show(4)
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == ["|source_rank|", "id|"] or "source_rank" in lines[1]
    assert [line.replace("|", " ").split() for line in lines[3:7]] == [
        ["0", "0"],
        ["0", "1"],
        ["0", "2"],
        ["1", "3"],
    ]
    assert "only showing top 4 rows" in capsys.readouterr().out + "\n".join(lines)


def test_take_first_and_limit_read_rank_zeros_partition_in_order(spark: SparkSession) -> None:
    ranks = ranks_of(spark)
    gathered = spark.range(0, 5 * ranks, 1, ranks).allGatherOnNpu()
    assert gathered.take(7) == _expected(ranks, 5)[:7]
    assert gathered.first() == Row(source_rank=0, id=0)
    assert gathered.limit(3).collect() == _expected(ranks, 5)[:3]


def test_a_second_action_runs_the_gather_again_with_the_same_result(spark: SparkSession) -> None:
    ranks = ranks_of(spark)
    gathered = spark.range(0, 4 * ranks, 1, ranks).allGatherOnNpu()
    assert gathered.count() == 4 * ranks * ranks
    assert gathered.collect() == _expected(ranks, 4) * ranks
    assert gathered.groupBy("source_rank").count().orderBy("source_rank").collect() == [
        Row(source_rank=r, count=4 * ranks) for r in range(ranks)
    ]


def test_coalesce_keeps_every_ranks_rows(spark: SparkSession) -> None:
    ranks = ranks_of(spark)
    gathered = spark.range(0, 2 * ranks, 1, ranks).allGatherOnNpu().coalesce(1)
    assert gathered.collect() == _expected(ranks, 2) * ranks


def test_an_empty_input_gathers_to_an_empty_result(spark: SparkSession) -> None:
    ranks = ranks_of(spark)
    empty = spark.range(0, 0, 1, ranks)
    gathered = empty.allGatherOnNpu()
    assert gathered.collect() == []
    assert gathered.columns == ["source_rank", "id"]


def test_a_cached_gather_is_read_from_the_cache(spark: SparkSession) -> None:
    ranks = ranks_of(spark)
    gathered = spark.range(0, 3 * ranks, 1, ranks).allGatherOnNpu().cache()
    try:
        assert gathered.count() == 3 * ranks * ranks
        assert gathered.collect() == _expected(ranks, 3) * ranks
    finally:
        gathered.unpersist()


@pytest.mark.parametrize("spark", ["local[2]"], indirect=True)
def test_retryable_gathers_survive_a_failed_rank(spark: SparkSession) -> None:
    gathered = spark.range(0, 6, 1, 2).allGatherOnNpu(retryable=True, inject_failure="1:0")
    assert gathered.collect() == _expected(2, 3) * 2
