"""Every Spark type, with nulls, row by row: each output partition is the input's rows
(``df.collect()`` of each input partition) in rank-major order."""

from __future__ import annotations

import datetime
import decimal
import math
import random
import struct
from typing import Any

from conftest import ranks_of
from pyspark.sql import Row, SparkSession
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DateType,
    DayTimeIntervalType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

SCHEMA = StructType(
    [
        StructField("id", LongType(), False),
        StructField("flag", BooleanType()),
        StructField("b", ByteType()),
        StructField("s", ShortType()),
        StructField("i", IntegerType()),
        StructField("l", LongType()),
        StructField("f", FloatType()),
        StructField("d", DoubleType()),
        StructField("dec", DecimalType(12, 3)),
        StructField("wide_dec", DecimalType(38, 18)),
        StructField("str", StringType()),
        StructField("bin", BinaryType()),
        StructField("date", DateType()),
        StructField("ts", TimestampType()),
        StructField("ts_ntz", TimestampNTZType()),
        StructField("interval", DayTimeIntervalType()),
        StructField("features", ArrayType(FloatType())),
        StructField("nested", ArrayType(ArrayType(IntegerType()))),
        StructField(
            "point",
            StructType(
                [StructField("x", DoubleType()), StructField("tags", ArrayType(StringType()))]
            ),
        ),
        StructField("attrs", MapType(StringType(), IntegerType())),
    ]
)
EPOCH = datetime.datetime(1970, 1, 1)


def _maybe(rng: random.Random, value: Any) -> Any:
    return None if rng.random() < 0.15 else value


def _row(rng: random.Random, row_id: int) -> tuple:
    text = "".join(rng.choice("aé✓z ") for _ in range(rng.randrange(0, 12)))
    special = rng.choice([0.0, -0.0, math.inf, -math.inf, math.nan, 1e-300])
    return (
        row_id,
        _maybe(rng, rng.random() < 0.5),
        _maybe(rng, rng.randint(-128, 127)),
        _maybe(rng, rng.randint(-(2**15), 2**15 - 1)),
        _maybe(rng, rng.randint(-(2**31), 2**31 - 1)),
        _maybe(rng, rng.randint(-(2**63), 2**63 - 1)),
        _maybe(rng, struct.unpack("f", struct.pack("f", rng.uniform(-1e6, 1e6)))[0]),
        _maybe(rng, rng.uniform(-1e300, 1e300) if rng.random() < 0.8 else special),
        _maybe(rng, decimal.Decimal(rng.randint(-(10**11), 10**11)).scaleb(-3)),
        _maybe(rng, decimal.Decimal(rng.randint(-(10**37), 10**37)).scaleb(-18)),
        _maybe(rng, text),
        _maybe(rng, bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 9)))),
        _maybe(rng, datetime.date(1, 1, 1) + datetime.timedelta(days=rng.randrange(3_652_058))),
        _maybe(
            rng,
            datetime.datetime(1900, 1, 1, tzinfo=datetime.timezone.utc)
            + datetime.timedelta(microseconds=rng.randrange(2**62 // 1000)),
        ),
        _maybe(rng, EPOCH + datetime.timedelta(microseconds=rng.randrange(-(2**50), 2**50))),
        _maybe(rng, datetime.timedelta(microseconds=rng.randrange(-(2**50), 2**50))),
        _maybe(
            rng, [_maybe(rng, float(rng.randint(-99, 99)) / 8) for _ in range(rng.randrange(4))]
        ),
        _maybe(rng, [_maybe(rng, [rng.randint(-9, 9)] * rng.randrange(3)) for _ in range(2)]),
        _maybe(rng, (_maybe(rng, rng.random()), _maybe(rng, [text, None][: rng.randrange(3)]))),
        _maybe(rng, {f"k{k}": _maybe(rng, k) for k in range(rng.randrange(3))}),
    )


def _canonical(value: Any) -> Any:
    """Comparable values: floats by their bits (NaN as one value), containers element-wise."""
    if isinstance(value, float):
        return "nan" if math.isnan(value) else struct.pack(">d", value)
    if isinstance(value, Row):
        return ("row",) + tuple(_canonical(v) for v in value)
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, dict):
        return sorted((k, _canonical(v)) for k, v in value.items())
    return value


def _rows_of(partitions: list[list[Row]]) -> list[list[Any]]:
    return [[_canonical(row) for row in partition] for partition in partitions]


def test_every_type_with_nulls_reaches_every_rank_row_by_row(spark: SparkSession) -> None:
    ranks = ranks_of(spark)
    rng = random.Random(19)
    data = [_row(rng, row_id) for row_id in range(40 * ranks + 3)]
    df = spark.createDataFrame(spark.sparkContext.parallelize(data, ranks), SCHEMA)
    inputs = df.rdd.glom().collect()
    assert sum(map(len, inputs)) == len(data) and all(inputs)

    gathered = df.allGatherOnNpu()
    outputs = gathered.rdd.glom().collect()

    assert gathered.columns == ["source_rank"] + df.columns
    assert gathered.schema.fields[1:] == df.schema.fields
    expected = [
        Row(source_rank=rank, **row.asDict()) for rank, rows in enumerate(inputs) for row in rows
    ]
    assert len(outputs) == ranks
    for rank, partition in enumerate(outputs):
        assert len(partition) == len(expected), f"output partition {rank}"
        assert _rows_of([partition]) == _rows_of([expected]), f"output partition {rank}"
