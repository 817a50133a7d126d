"""A gather's figures come from its own plan node: gather_metrics(df)."""

from __future__ import annotations

import pytest
from conftest import ranks_of
from pyspark.sql import SparkSession

import npugather


def test_a_gathers_figures_are_read_from_the_dataframes_made_from_it(spark: SparkSession) -> None:
    ranks = ranks_of(spark)
    gathered = spark.range(0, 1000, 1, ranks).allGatherOnNpu(timeout="60s")
    per_rank = gathered.groupBy("source_rank").sum("id")
    assert npugather.gather_metrics(gathered).rows_gathered == 0  # before any action
    assert len(per_rank.collect()) == ranks
    figures = npugather.gather_metrics(gathered)
    assert figures == npugather.gather_metrics(per_rank)
    assert figures.rows_gathered == ranks * 1000
    assert figures.input_rows == 1000
    assert figures.input == "rows"
    assert figures.input_bytes >= 1000 * 8  # the ids, in Arrow
    assert figures.output_bytes == ranks * figures.input_bytes
    assert figures.transports == {"executor": ranks}  # one executor: one output, no exchange

    other = spark.range(0, 10, 1, 2).allGatherOnNpu(timeout="60s")
    assert other.count() == 2 * 10
    assert npugather.gather_metrics(other).rows_gathered == 2 * 10
    assert npugather.gather_metrics(gathered) == figures, "another gather changes nothing here"


@pytest.mark.parametrize("spark", ["local[2]"], indirect=True)
def test_gather_metrics_names_what_it_refuses(spark: SparkSession) -> None:
    with pytest.raises(TypeError, match="df"):
        npugather.gather_metrics("gathered")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="holds no gather"):
        npugather.gather_metrics(spark.range(4))
    two = (
        spark.range(4)
        .allGatherOnNpu()
        .crossJoin(spark.range(4).withColumnRenamed("id", "other").allGatherOnNpu())
    )
    with pytest.raises(ValueError, match="holds 2 gathers"):
        npugather.gather_metrics(two)
