"""JVM-side failures arrive as npugather.NpuGatherError, with the connector's fields."""

from __future__ import annotations

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

import npugather

pytestmark = pytest.mark.parametrize("spark", ["local[2]"], indirect=True)


def test_more_ranks_than_task_slots_is_an_npugather_error_before_any_task(
    spark: SparkSession,
) -> None:
    gathered = spark.range(0, 9, 1, 3).allGatherOnNpu()

    with pytest.raises(npugather.NpuGatherError) as raised:
        gathered.collect()

    error = raised.value
    assert str(error).startswith(
        "allGatherOnNpu needs 3 concurrent task slots (one per rank,"
        " barrier mode) but the cluster offers 2"
    )
    assert "rank_size = 2" in str(error) and "npugather.rankSize" not in str(error), str(error)
    assert error.java_class == "java.lang.IllegalStateException"
    assert error.result_code is None and error.rank is None
    assert error.error_class is None and error.sqlstate is None  # a check, not a rank's failure
    assert not isinstance(error, Py4JJavaError)


def test_a_rank_that_fails_in_the_collective_fails_the_action_with_its_own_error_every_time(
    spark: SparkSession,
) -> None:
    # Its peer fails too, reporting it ("rank 1 aborted its communicator"); the action raises the
    # failing rank's own error, whichever report reaches the driver first.
    for run in range(20):
        failing = run % 2
        gathered = spark.range(0, 8, 1, 2).allGatherOnNpu(
            inject_failure=str(failing), timeout="30s"
        )

        with pytest.raises(npugather.NpuGatherError) as raised:
            gathered.collect()

        error = raised.value
        context = f"run {run}, rank {failing} failing: {error}"
        assert error.java_class == "java.lang.IllegalStateException", context
        assert error.rank == failing, context
        assert str(error).startswith(f"allGatherOnNpu rank {failing}/2 (stage "), context
        assert "failure injected by inject_failure" in str(error), context
        assert error.result_code is None and error.library is None, context
        # Spark's error framework, as PySpark's own exceptions carry it.
        assert isinstance(error, PySparkException), context
        assert error.error_class == error.condition == "NPUGATHER_RANK_FAILED", context
        assert error.getCondition() == "NPUGATHER_RANK_FAILED", context
        assert error.sqlstate == error.getSqlState() == "58000", context
        assert error.getMessageParameters() == {
            "operation": "allGatherOnNpu",
            "rank": str(failing),
            "message": error.java_exception.getMessage(),
        }, context


def test_the_gather_works_again_after_a_failed_one(spark: SparkSession) -> None:
    with pytest.raises(npugather.NpuGatherError):
        spark.range(0, 8, 1, 2).allGatherOnNpu(inject_failure="0").collect()
    assert spark.range(0, 8, 1, 2).allGatherOnNpu().count() == 16


def test_failures_that_are_not_the_gathers_keep_pysparks_own_exceptions(
    spark: SparkSession,
) -> None:
    from pyspark.errors import AnalysisException

    with pytest.raises(AnalysisException):
        spark.range(0, 8, 1, 2).allGatherOnNpu().select("no_such_column")
