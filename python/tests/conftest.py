"""A Spark session per local master, with the connector's jars (``npugather.configure``)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest
from _support import start_session
from pyspark.sql import SparkSession

MASTERS = ("local[2]", "local[4]")
# Python workers (mapInArrow) run this interpreter, which has pyarrow and numpy.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


@pytest.fixture(scope="session", params=MASTERS)
def spark(request: pytest.FixtureRequest) -> Iterator[SparkSession]:
    """One session at a time (one SparkContext per process); tests that need a single master
    say so with ``@pytest.mark.parametrize("spark", ["local[2]"], indirect=True)``."""
    session = start_session(SparkSession.builder.master(request.param), "npugather-python-tests")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def ranks_of(spark: SparkSession) -> int:
    """One rank per core of the local master."""
    return spark.sparkContext.defaultParallelism
