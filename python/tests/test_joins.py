"""Joins whose build side is all-gathered onto the executors answer as Spark's own join."""

from __future__ import annotations

import pytest
from pyspark.sql import DataFrame, SparkSession

import npugather


def _sides(spark: SparkSession) -> tuple[DataFrame, DataFrame]:
    stream = spark.range(0, 2000, 1, 3).selectExpr(
        "IF(id % 17 = 0, NULL, CAST(id % 150 AS INT)) AS k", "id AS v"
    )
    build = spark.range(0, 300, 1, 2).selectExpr(
        "IF(id % 13 = 0, NULL, CAST((id * 7) % 200 AS INT)) AS rk", "id * 3 AS w"
    )
    return stream, build


def _plan(df: DataFrame) -> str:
    return df._jdf.queryExecution().explainString(
        df.sparkSession._jvm.org.apache.spark.sql.execution.ExplainMode.fromString("simple")
    )


@pytest.mark.parametrize("how", ["inner", "left_outer", "left_semi", "left_anti"])
def test_the_allgather_hint_joins_as_spark_does(spark: SparkSession, how: str) -> None:
    stream, build = _sides(spark)
    condition = stream.k == build.rk
    expected = sorted(map(str, stream.join(build, condition, how).collect()))
    for marked in (build.hint("allgather"), npugather.broadcast_on_executors(build)):
        joined = stream.join(marked, condition, how)
        assert "ExecutorBuild" in _plan(joined)
        assert sorted(map(str, joined.collect())) == expected


def test_the_sql_hint_names_the_build_side(spark: SparkSession) -> None:
    stream, build = _sides(spark)
    stream.createOrReplaceTempView("stream")
    build.createOrReplaceTempView("build")
    query = "SELECT {} k, v, w FROM stream JOIN build ON k = rk"
    hinted = spark.sql(query.format("/*+ ALLGATHER(build) */"))
    assert "ExecutorBroadcastHashJoin" in _plan(hinted)
    plain = spark.sql(query.format(""))
    assert sorted(map(str, hinted.collect())) == sorted(map(str, plain.collect()))


def test_broadcast_on_executors_refuses_what_is_no_dataframe() -> None:
    with pytest.raises(TypeError, match="df"):
        npugather.broadcast_on_executors("items")  # type: ignore[arg-type]
