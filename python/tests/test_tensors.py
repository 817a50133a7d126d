"""gathered_tensor: a gathered partition as one [rank_size, rows, features] array, bit for bit,
inside mapInArrow; mapInArrow hands each rank the whole gathered table."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from conftest import ranks_of
from pyspark.sql import SparkSession

import npugather

ROWS, DIM = 64, 5


def _vectors(spark: SparkSession, ranks: int, seed: int):
    rng = np.random.default_rng(seed)
    # Random bit patterns: every float32 value, subnormals and NaN payloads aside.
    values = rng.integers(0, 2**32, size=(ranks, ROWS, DIM), dtype=np.uint32).view(np.float32)
    values[~np.isfinite(values)] = 1.5
    rows = [(r, r * ROWS + i, values[r, i].tolist()) for r in range(ranks) for i in range(ROWS)]
    rdd = spark.sparkContext.parallelize(rows, ranks)
    return values, spark.createDataFrame(rdd, "r int, id bigint, v array<float>")


def test_an_array_column_becomes_the_ranks_stacked_bit_for_bit_on_every_rank(
    spark: SparkSession,
) -> None:
    ranks = ranks_of(spark)
    values, df = _vectors(spark, ranks, seed=1)

    def digest(batches):
        x = npugather.gathered_tensor(batches, ["v"])
        from pyspark import TaskContext

        yield pa.RecordBatch.from_pydict(
            {
                "rank": [TaskContext.get().partitionId()],
                "shape": [list(x.shape)],
                "dtype": [str(x.dtype)],
                "bits": [x.tobytes()],
            }
        )

    results = (
        df.allGatherOnNpu()
        .mapInArrow(digest, "rank bigint, shape array<bigint>, dtype string, bits binary")
        .collect()
    )

    assert sorted(r.rank for r in results) == list(range(ranks))
    for r in results:
        assert r.shape == [ranks, ROWS, DIM] and r.dtype == "float32"
        assert r.bits == values.tobytes(), f"rank {r.rank}"


def test_numeric_columns_become_one_feature_each_as_the_driver_converts_them(
    spark: SparkSession,
) -> None:
    ranks = ranks_of(spark)
    rng = np.random.default_rng(2)
    columns = dict(
        f=rng.standard_normal(ranks * ROWS).astype(np.float32),
        d=rng.standard_normal(ranks * ROWS) * 1e10,
        i=rng.integers(-(2**31), 2**31, ranks * ROWS),
        l=rng.integers(-(2**62), 2**62, ranks * ROWS),
        s=rng.integers(-(2**15), 2**15, ranks * ROWS),
        b=rng.integers(-128, 128, ranks * ROWS),
    )
    rows = [tuple(c[k].item() for c in columns.values()) for k in range(ranks * ROWS)]
    df = spark.createDataFrame(
        spark.sparkContext.parallelize(rows, ranks),
        "f float, d double, i int, l bigint, s smallint, b tinyint",
    )
    names = list(columns)
    expected = np.stack([c.astype(np.float32) for c in columns.values()], axis=1)
    expected64 = np.stack([c.astype(np.float64) for c in columns.values()], axis=1)

    def both(batches):
        table = pa.Table.from_batches(list(batches))
        x = npugather.gathered_tensor(table, names)
        x64 = npugather.gathered_tensor(table, names, dtype=np.float64)
        yield pa.RecordBatch.from_pydict(
            {"bits": [x.tobytes()], "bits64": [x64.tobytes()], "shape": [list(x.shape)]}
        )

    results = (
        df.allGatherOnNpu()
        .mapInArrow(both, "bits binary, bits64 binary, shape array<bigint>")
        .collect()
    )

    assert len(results) == ranks
    for r in results:
        assert r.shape == [ranks, ROWS, len(names)]
        assert r.bits == expected.tobytes()
        assert r.bits64 == expected64.tobytes()


def test_map_in_arrow_hands_every_rank_every_row_of_the_gather(spark: SparkSession) -> None:
    ranks = ranks_of(spark)
    df = spark.range(0, 50 * ranks, 1, ranks)

    def summary(batches):
        from pyspark import TaskContext

        table = pa.Table.from_batches(list(batches))
        yield pa.RecordBatch.from_pydict(
            {
                "rank": [TaskContext.get().partitionId()],
                "ids": [table.column("id").to_pylist()],
                "sources": [table.column("source_rank").to_pylist()],
            }
        )

    results = (
        df.allGatherOnNpu()
        .mapInArrow(summary, "rank bigint, ids array<bigint>, sources array<bigint>")
        .collect()
    )

    assert sorted(r.rank for r in results) == list(range(ranks))
    for r in results:
        assert r.ids == list(range(50 * ranks))
        assert r.sources == [i // 50 for i in range(50 * ranks)]


def _table(**columns) -> pa.Table:
    return pa.table(columns)


def test_ranks_with_different_row_counts_are_refused_listing_every_rank() -> None:
    table = _table(source_rank=pa.array([0, 0, 1], pa.int32()), v=pa.array([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match="same number of rows.*rank 0: 2 rows, rank 1: 1 rows"):
        npugather.gathered_tensor(table, ["v"])
    with pytest.raises(ValueError, match="rank 2: 0 rows"):
        npugather.gathered_tensor(
            _table(source_rank=pa.array([0, 1], pa.int32()), v=pa.array([1.0, 2.0])),
            ["v"],
            rank_size=3,
        )


def test_nulls_ragged_arrays_other_types_and_order_are_refused_naming_the_row() -> None:
    ranks = pa.array([0, 0, 1, 1], pa.int32())
    with pytest.raises(ValueError, match="column 'v' has a null at row 1 of rank 1"):
        npugather.gathered_tensor(_table(source_rank=ranks, v=pa.array([1.0, 2, 3, None])), ["v"])
    with pytest.raises(ValueError, match="row 0 of rank 1 has 1 elements, the first row 2"):
        npugather.gathered_tensor(
            _table(
                source_rank=ranks, e=pa.array([[1, 2], [3, 4], [5], [6, 7]], pa.list_(pa.float32()))
            ),
            ["e"],
        )
    with pytest.raises(ValueError, match="a null at row 1 of the values"):
        npugather.gathered_tensor(
            _table(source_rank=ranks, e=pa.array([[1], [None], [5], [6]], pa.list_(pa.float32()))),
            ["e"],
        )
    with pytest.raises(TypeError, match="column 's' is string; allowed: numeric columns"):
        npugather.gathered_tensor(_table(source_rank=ranks, s=pa.array(list("abcd"))), ["s"])
    with pytest.raises(ValueError, match="not in rank-major order"):
        npugather.gathered_tensor(
            _table(source_rank=pa.array([1, 0], pa.int32()), v=pa.array([1.0, 2.0])), ["v"]
        )
    with pytest.raises(TypeError, match="columns = 'v' is invalid"):
        npugather.gathered_tensor(_table(source_rank=ranks, v=pa.array([1.0] * 4)), "v")


def test_gathered_matrix_stacks_ranks_of_any_size_in_rank_order() -> None:
    table = _table(
        source_rank=pa.array([0, 0, 0, 1, 2, 2], pa.int32()),
        e=pa.array([[i, -i] for i in range(6)], pa.list_(pa.float32())),
    )
    x = npugather.gathered_matrix(table, ["e"])
    assert x.dtype == np.float32 and x.tolist() == [[i, -i] for i in range(6)]
    with pytest.raises(ValueError, match="a null at row 1 of rank 2"):
        npugather.gathered_matrix(
            _table(source_rank=pa.array([0, 2, 2], pa.int32()), v=pa.array([1.0, 2.0, None])), ["v"]
        )
