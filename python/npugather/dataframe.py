"""``all_gather_on_npu``: every partition of a DataFrame, on every rank.

The JVM does the work (``io.npugather.spark.NpuGather.allGatherOnNpu``, reached through py4j
from the DataFrame's session, or on a Spark Connect server through its relation plugin,
:mod:`npugather._connect`), which checks the options when it is called; this module turns the
keywords into the JVM's options and adds ``DataFrame.allGatherOnNpu``.
"""

from __future__ import annotations

import datetime
import inspect
import os
import re
from typing import TYPE_CHECKING, Any, TypeGuard

from pyspark.sql import DataFrame

from npugather import _options
from npugather._jars import connector_loaded
from npugather.errors import ConnectorNotFoundError, InvalidOptionError, from_java

if TYPE_CHECKING:
    from pyspark.sql.connect.dataframe import DataFrame as ConnectDataFrame

Duration = str | datetime.timedelta | float

METHOD_NAME = "allGatherOnNpu"
METHOD_ENV = "NPUGATHER_DATAFRAME_METHOD"
"""Set to ``0`` before ``import npugather`` to leave ``pyspark.sql.DataFrame`` unchanged."""


def all_gather_on_npu(
    df: DataFrame,
    *,
    backend: str | None = None,
    rank_size: int | None = None,
    rank_root: int | None = None,
    comm_domain: str | None = None,
    timeout: Duration | None = None,
    source_rank_column: str | None = None,
    resource_name: str | None = None,
    retryable: bool | None = None,
    host_transport: str | None = None,
    inject_failure: str | None = None,
) -> DataFrame:
    """Every partition of ``df``, on every rank: an AllGather of DataFrame partitions.

    A barrier stage runs one task per partition (rank = partition id, rank_size = number of
    partitions). The result has one partition per rank; partition ``r`` holds every input row,
    ordered by source rank and then by the original order within each source partition, after
    an ``int`` column naming the source rank. Lazy like any transformation: the gather runs
    when an action (``show()``, ``collect()``, ``write``, ``mapInArrow(...)``...) needs it.

    Every keyword left at None takes the session's ``spark.npugather.*`` entry, else the
    default shown. Bad values raise before any job runs, naming the keyword, the value and
    what is allowed; ``rank_root`` is checked against the ranks of ``df``.

    Args:
        df: the input, a classic or a Spark Connect DataFrame; its partitions are the ranks'
            contributions.
        {keywords}

    Returns:
        The gathered DataFrame: ``source_rank int`` then the columns of ``df``.

    Raises:
        TypeError: an option of the wrong type, or an unknown keyword.
        npugather.InvalidOptionError: a ``ValueError``: an option out of range, or a session
            default the JVM refuses.
        npugather.NpuGatherError: raised by the action that runs the gather when a rank, the
            rendezvous or a cluster check fails (``result_code``, ``rank``, vendor fields).
    """
    options = {name: value for name, value in locals().items() if name in _options.NAMES}
    if not isinstance(df, DataFrame):
        raise _options.wrong_type("df", df, "a pyspark.sql.DataFrame")
    entries = _options.to_jvm(options)
    try:
        if is_connect(df):
            from npugather import _connect

            return _connect.all_gather_on_npu(df, entries)
        return _all_gather_classic(df, entries)
    except InvalidOptionError as e:  # the JVM's checks, in the keywords' words
        e.message = _options.refusal_of_keywords(e.message, options)
        e.args = (e.message,)
        raise


def _all_gather_classic(df: DataFrame, entries: dict[str, str]) -> DataFrame:
    jdf, session, jvm = _classic(df, "all_gather_on_npu")
    jvm_options = jvm.java.util.LinkedHashMap()
    for key, value in entries.items():
        jvm_options.put(key, value)
    entry = getattr(jvm, "io.npugather.spark.NpuGather")
    # Records the ranks' exceptions, which a failed barrier stage does not pass to its job.
    getattr(jvm, "io.npugather.spark.TaskFailures").installOn(session.sparkContext._jsc.sc())
    try:
        gathered = entry.allGatherOnNpu(jdf, jvm_options)
    except Exception as e:  # the JVM's checks: the options, the spark.npugather.* defaults
        converted = from_java(getattr(e, "java_exception", None) or getattr(e, "_origin", None))
        if converted is None:
            raise
        raise converted from None
    return DataFrame(gathered, session)


def broadcast_on_executors(df: DataFrame) -> DataFrame:
    """``df`` marked as the build side of the joins it takes part in: all-gathered onto every
    executor, built there once per executor and joined with the other side where that lies, never
    passing through the driver — what ``df.hint("allgather")`` and ``/*+ ALLGATHER(t) */`` do in a
    session built with :func:`npugather.configure`.

    Raises:
        TypeError: ``df`` is not a classic (py4j) DataFrame.
        npugather.ConnectorNotFoundError: the connector is not on the session's classpath.
    """
    if not isinstance(df, DataFrame):
        raise _options.wrong_type("df", df, "a pyspark.sql.DataFrame")
    jdf, session, jvm = _classic(df, "broadcast_on_executors")
    entry = getattr(jvm, "io.npugather.spark.NpuGather")
    return DataFrame(entry.broadcastOnExecutors(jdf), session)


def is_connect(df: DataFrame) -> TypeGuard[ConnectDataFrame]:
    """True for a Spark Connect DataFrame (without importing PySpark's Connect client)."""
    return type(df).__module__.startswith("pyspark.sql.connect.")


def _classic(df: DataFrame, function: str) -> tuple[Any, Any, Any]:
    """The JVM DataFrame, session and JVM of ``df``, once the connector is found there."""
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        raise TypeError(
            f"{function} needs a classic Spark session (py4j): Spark Connect"
            " DataFrames are not supported"
        )
    session = df.sparkSession
    jvm = session._jvm
    if not connector_loaded(jvm):
        raise ConnectorNotFoundError(
            "the NpuGather connector is not on this session's classpath: build the session"
            " with npugather.configure(SparkSession.builder) (or pass the jars of"
            " `python -m npugather jars` to --jars)",
            java_class="",
        )
    _require_operator_api(jvm)
    return jdf, session, jvm


def _require_operator_api(jvm: Any) -> None:
    """Refuses a JVM that has the connector's thin jar without the operator API (npugather-core)
    in one line naming the jars to add. Asked before anything reaches the facade, whose methods
    name the operator API's types: py4j, looking them up, would fail on the first one missing."""
    from py4j.java_gateway import JavaClass

    check = getattr(jvm, "io.npugather.spark.CoreClasspath")
    if not isinstance(check, JavaClass):
        return  # a connector jar older than this package
    missing = check.missing()
    if missing is not None:
        raise ConnectorNotFoundError(missing, java_class="java.lang.IllegalStateException")


def _method(self: DataFrame, **options: Any) -> DataFrame:
    _options.check_names(METHOD_NAME, options)
    return all_gather_on_npu(self, **options)


# The keywords' entries, indented as the line they replace (Python 3.13 dedents docstrings).
all_gather_on_npu.__doc__ = re.sub(
    r"^( *)\{keywords\}$",
    lambda line: _options.docstring_args(line.group(1)),
    all_gather_on_npu.__doc__ or "",
    flags=re.MULTILINE,
)
_method.__name__ = METHOD_NAME
_method.__qualname__ = f"DataFrame.{METHOD_NAME}"
_method.__doc__ = (
    "``df.allGatherOnNpu(**options)`` is ``npugather.all_gather_on_npu(df,"
    " **options)``; added by ``import npugather``.\n\n" + (inspect.getdoc(all_gather_on_npu) or "")
)
_signature = inspect.signature(all_gather_on_npu)
_method.__signature__ = _signature.replace(  # type: ignore[attr-defined]
    parameters=[inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    + list(_signature.parameters.values())[1:]
)


def add_dataframe_method() -> None:
    """Adds ``DataFrame.allGatherOnNpu`` (done by ``import npugather`` unless the environment
    variable ``NPUGATHER_DATAFRAME_METHOD`` is ``0``)."""
    existing = getattr(DataFrame, METHOD_NAME, None)
    if existing is not None and existing is not _method:
        raise RuntimeError(
            f"pyspark.sql.DataFrame already has an attribute {METHOD_NAME!r};"
            f" set {METHOD_ENV}=0 and call npugather.all_gather_on_npu(df)"
        )
    setattr(DataFrame, METHOD_NAME, _method)


def remove_dataframe_method() -> None:
    """Removes ``DataFrame.allGatherOnNpu`` again."""
    if getattr(DataFrame, METHOD_NAME, None) is _method:
        delattr(DataFrame, METHOD_NAME)


def dataframe_method_wanted() -> bool:
    return os.environ.get(METHOD_ENV, "1").strip().lower() not in ("0", "false", "no")
