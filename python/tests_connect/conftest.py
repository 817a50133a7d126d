"""A local Spark Connect server with the connector (``npugather.configure`` of a ``remote``
builder) and a Connect session to it, for the whole run: this process's only Spark driver."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest
from _support import start_session
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
# PySpark's local Connect server then binds an ephemeral port, so parallel builds do not clash.
os.environ.setdefault("SPARK_TESTING", "1")
RANKS = 2


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = start_session(
        SparkSession.builder.remote(f"local[{RANKS}]"), "npugather-connect-tests"
    )
    yield session
    session.stop()


def by_rank(gathered: DataFrame) -> dict[int, list[Row]]:
    """The gathered rows of each rank (= output partition), in their order there."""
    rows = gathered.select(F.spark_partition_id().alias("_rank"), "*").collect()
    ranks: dict[int, list[Row]] = {}
    for row in rows:
        values = row.asDict()
        ranks.setdefault(values.pop("_rank"), []).append(Row(**values))
    return ranks
