"""``all_gather_on_npu(TABLE(t), option => value ...)`` from a classic PySpark session: a
DataFrame as the ``TABLE`` argument, the rows ``df.allGatherOnNpu()`` gives on every rank, and the
JVM API's message for a refused option. (Over Spark Connect: tests_connect/test_sql.py.)"""

from __future__ import annotations

import random

import pytest
from conftest import ranks_of
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import npugather


@pytest.mark.parametrize("spark", ["local[2]"], indirect=True)
def test_a_dataframe_argument_gives_allgatheronnpus_rows_on_every_rank(spark: SparkSession) -> None:
    ranks = ranks_of(spark)
    rng = random.Random(11)
    rows = [
        (n, rng.choice([None, rng.random()]), f"s{rng.randrange(1000)}") for n in range(10 * ranks)
    ]
    df = spark.createDataFrame(rows, "id bigint, score double, name string").repartition(
        ranks, "id"
    )

    gathered = spark.sql(
        "SELECT * FROM all_gather_on_npu(TABLE({items}), timeout => '60s')", items=df
    )

    def by_rank(result):  # type: ignore[no-untyped-def]
        return result.select(F.spark_partition_id().alias("_rank"), "*").collect()

    assert gathered.columns == ["source_rank", "id", "score", "name"]
    expected = by_rank(df.allGatherOnNpu(timeout="60s"))
    assert len(expected) == ranks * len(rows)
    assert by_rank(gathered) == expected


@pytest.mark.parametrize("spark", ["local[2]"], indirect=True)
def test_a_refused_option_fails_the_query_with_the_jvm_apis_message(spark: SparkSession) -> None:
    with pytest.raises(
        npugather.InvalidOptionError, match="^option 'bakend' is unknown; did you mean 'backend'\\?"
    ):
        spark.sql(
            "SELECT * FROM all_gather_on_npu(TABLE({df}), bakend => 'host')",
            df=spark.range(0, 4, 1, 2),
        )
