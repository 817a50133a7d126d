"""What a session's set-up gets wrong, as a user sees it: each case in a Python process of its own
(a process starts its Spark JVM once, with the jars and settings it was built with)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import npugather

EXTENSIONS = "io.npugather.spark.NpuGatherExtensions"


def _run(
    script: str, conf: dict[str, str], tmp_path: Path, jars: list[str] | None = None
) -> subprocess.CompletedProcess:
    """``script`` after a session on local[2] with ``conf`` (and the connector's jars, or
    ``jars``) is built as ``spark``; its JVM logs at WARN to stderr."""
    preamble = textwrap.dedent(f"""
        import npugather
        from pyspark.sql import SparkSession
        builder = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
        for key, value in {conf!r}.items():
            builder = builder.config(key, value)
        spark = npugather.configure(builder).getOrCreate()
        spark.sparkContext.setLogLevel("WARN")
        """)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    if jars is not None:
        env["NPUGATHER_JARS"] = os.pathsep.join(jars)
    return subprocess.run(
        [sys.executable, "-c", preamble + textwrap.dedent(script)],
        cwd=tmp_path,
        env=env,
        text=True,
        capture_output=True,
        timeout=300,
    )


def test_a_bad_default_fails_only_the_queries_that_gather_with_the_same_message(
    tmp_path: Path,
) -> None:
    result = _run(
        """
        print("count", spark.range(3).count())
        print("sql", spark.sql("SELECT sum(id) FROM range(4)").first()[0])
        try:
            spark.range(0, 4, 1, 2).allGatherOnNpu().collect()
        except npugather.InvalidOptionError as e:
            print("gather:", e)
        """,
        {"spark.sql.extensions": EXTENSIONS, "spark.npugather.timeout": "soon"},
        tmp_path,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == [
        "count 3",
        "sql 6",
        "gather: spark.npugather.timeout = 'soon' is invalid; allowed: a duration such as 120s,"
        " 5m or 500ms",
    ], result.stdout + result.stderr


def test_a_misspelled_key_is_reported_once_per_session_not_per_query(tmp_path: Path) -> None:
    result = _run(
        """
        spark.range(3).count()
        spark.range(5).filter("id > 1").collect()
        spark.sql("SELECT count(*) FROM range(4)").collect()
        print("done")
        """,
        {"spark.sql.extensions": EXTENSIONS, "spark.npugather.retriable": "true"},
        tmp_path,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    warning = (
        "spark.npugather.retriable is not a setting of NpuGather; did you mean"
        " spark.npugather.retryable?"
    )
    assert result.stderr.count(warning) == 1, result.stderr


def test_the_thin_jars_without_the_native_jar_are_one_line_naming_the_jars_to_add(
    tmp_path: Path,
) -> None:
    # The connector's thin jar and the operator API's (npugather-core) it builds on.
    thin = [
        jar
        for jar in npugather.jars()
        if Path(jar).name.startswith(("npugather-spark_", "npugather-core-"))
        and not jar.endswith("-all.jar")
    ]
    if not thin:
        pytest.skip("only the self-contained jar is at hand: " + ", ".join(npugather.jars()))
    result = _run(
        """
        try:
            spark.range(0, 4, 1, 2).allGatherOnNpu().collect()
        except npugather.NpuGatherError as e:
            print("error:", type(e).__name__, repr(str(e)))
        """,
        {},
        tmp_path,
        jars=thin,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("error: NpuGatherError "), result.stdout + result.stderr
    message = ast.literal_eval(result.stdout.split(" ", 2)[2])  # the repr printed above
    assert "\n" not in message and "NoClassDefFoundError" not in message, message
    assert message.startswith("NpuGather's native library is not on the classpath"), message
    assert "add io.npugather:npugather-native and org.bytedeco:javacpp" in message, message
    assert "npugather-spark_2.13-<version>-all.jar" in message, message


@pytest.mark.parametrize(
    "conf",
    [{}, {"spark.plugins": "io.npugather.spark.NpuGatherPlugin"}],
    ids=["extension", "extension-and-plugin"],
)
def test_the_connector_jar_without_the_operator_api_is_one_line_naming_the_jars_to_add(
    conf: dict[str, str], tmp_path: Path
) -> None:
    # The connector's thin jar alone (configure() lists its SQL extension): the session starts,
    # what does not gather runs, and a gather fails with one line.
    thin = [
        jar
        for jar in npugather.jars()
        if Path(jar).name.startswith("npugather-spark_") and not jar.endswith("-all.jar")
    ]
    if not thin:
        pytest.skip("only the self-contained jar is at hand: " + ", ".join(npugather.jars()))
    result = _run(
        """
        print("count", spark.range(3).count())
        try:
            spark.range(0, 4, 1, 2).allGatherOnNpu().collect()
        except npugather.NpuGatherError as e:
            print("error:", type(e).__name__, repr(str(e)))
        """,
        conf,
        tmp_path,
        jars=thin,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    count, error = result.stdout.splitlines()
    assert count == "count 3"
    assert error.startswith("error: ConnectorNotFoundError "), result.stdout + result.stderr
    message = ast.literal_eval(error.split(" ", 2)[2])  # the repr printed above
    assert "\n" not in message, message
    assert message.startswith("NpuGather's operator API is not on the classpath"), message
    assert "add io.npugather:npugather-core, io.npugather:npugather-native and" in message
    assert "npugather-spark_2.13-<version>-all.jar" in message, message
    # The extension (and the plugin) say it in a line of their own, without a stack trace.
    assert "NoClassDefFoundError" not in result.stderr, result.stderr
    warnings = [line for line in result.stderr.splitlines() if message in line]
    assert len(warnings) == 1 + len(conf), result.stderr


def test_a_retryable_gather_that_spark_gives_up_on_raises_the_ranks_error(tmp_path: Path) -> None:
    # With one attempt allowed, Spark aborts the retryable gather's stage at its first failure,
    # quoting the rank's exception in its message only; the action raises the rank's own error.
    result = _run(
        """
        try:
            spark.range(0, 6, 1, 2).allGatherOnNpu(retryable=True, inject_failure="1").collect()
        except npugather.NpuGatherError as e:
            print("error:", e.error_class, e.sqlstate, e.rank, e.java_class, repr(str(e)))
        """,
        {"spark.stage.maxConsecutiveAttempts": "1"},
        tmp_path,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == [
        "error: NPUGATHER_RANK_FAILED 58000 1 java.lang.IllegalStateException"
        " 'allGatherOnNpu rank 1/2 (stage 0.0): failure injected by inject_failure'"
    ], result.stdout + result.stderr
