"""The operator's contract (docs/allgather-contract.md) through ``df.allGatherOnNpu()``."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ranks_of
from pyspark.sql import Row, SparkSession

import npugather

SPEC_X = {0: [[16, 56], [5, 96]], 1: [[-7, -91], [-75, 38]]}


@pytest.mark.parametrize("spark", ["local[2]"], indirect=True)
def test_the_spec_example_gives_every_rank_both_inputs_stacked_in_rank_order(
    spark: SparkSession,
) -> None:
    rows = [(rank, a, b) for rank in (0, 1) for a, b in SPEC_X[rank]]
    df = spark.createDataFrame(spark.sparkContext.parallelize(rows, 2), "r int, a int, b int")

    gathered = df.allGatherOnNpu()

    assert gathered.columns == ["source_rank", "r", "a", "b"]
    expected = [Row(source_rank=rank, r=rank, a=a, b=b) for rank in (0, 1) for a, b in SPEC_X[rank]]
    partitions = gathered.rdd.glom().collect()
    assert len(partitions) == 2
    for partition in partitions:
        assert partition == expected

    def as_spec_output(batches):
        import pyarrow as pa

        x = npugather.gathered_tensor(batches, ["a", "b"], dtype="int32")
        yield pa.RecordBatch.from_pydict({"x": [x.ravel().tolist()]})

    tensors = df.allGatherOnNpu().mapInArrow(as_spec_output, "x array<bigint>").collect()
    assert len(tensors) == 2
    for row in tensors:
        assert np.array(row.x).reshape(2, 2, 2).tolist() == [SPEC_X[0], SPEC_X[1]]


def test_the_function_and_the_method_are_the_same_gather(spark: SparkSession) -> None:
    ranks = ranks_of(spark)
    df = spark.range(0, 10 * ranks, 1, ranks)

    by_method = df.allGatherOnNpu(timeout="60s").rdd.glom().collect()
    by_function = npugather.all_gather_on_npu(df, timeout="60s").rdd.glom().collect()

    expected = [Row(source_rank=r, id=i) for r in range(ranks) for i in range(10 * r, 10 * (r + 1))]
    assert by_method == [expected] * ranks
    assert by_function == by_method
