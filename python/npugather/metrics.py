"""``gather_metrics``: a gather's figures, as its plan node in the JVM holds them.

::

    gathered = df.allGatherOnNpu()
    gathered.write.parquet(path)  # or any action on gathered, or on a DataFrame made from it
    figures = npugather.gather_metrics(gathered)
    figures.rows_gathered, figures.bytes_received, figures.transports

The node adds up every run of its gather (``io.npugather.spark.GatherMetrics.of``): an action
that reads the kept output adds nothing, one that gathers again adds a run. The SQL tab of the
Spark UI shows the same figures per action.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame

from npugather import _options
from npugather.dataframe import _classic


@dataclass(frozen=True)
class GatherMetrics:
    """A gather's figures when they were read, summed over the ranks of its runs."""

    input: str
    """What the ranks converted: ``"cached batches"``, ``"columnar batches"`` or ``"rows"``."""
    input_rows: int
    """Rows of the ranks' own partitions: the rows of the input."""
    rows_gathered: int
    """Rows in the output, summed over ranks."""
    input_bytes: int
    """Bytes of the ranks' own partitions in Arrow."""
    output_bytes: int
    """Bytes of the ranks' gathered partitions in Arrow."""
    bytes_sent: int
    """Bytes the ranks sent from their own partitions."""
    bytes_received: int
    """Bytes the ranks received from their peers."""
    own_partition_bytes: int
    """Off-heap bytes of the ranks' own Arrow partitions."""
    peak_off_heap_bytes: int
    """Peak off-heap bytes of each rank's task allocator, summed."""
    conversion_nanos: int
    """Time converting rows to Arrow."""
    rendezvous_nanos: int
    """Time in the rendezvous round."""
    slowest_rank_wait_nanos: int
    """Time the ranks waited in the rendezvous for the last rank to arrive."""
    collective_nanos: int
    """Time creating the communicator and moving the data."""
    transports: dict[str, int]
    """Ranks per transport their communicators used (``"threads"``, ``"cma"``, ``"staging"``,
    ``"tcp"``, ``"executor"`` for backend host; the backend's name otherwise)."""


def gather_metrics(df: DataFrame) -> GatherMetrics:
    """The figures of the gather in ``df``, read now.

    Args:
        df: what :func:`npugather.all_gather_on_npu` or :func:`npugather.broadcast_on_executors`
            returned, or a DataFrame made from it (a projection, a join, a SQL query over
            ``all_gather_on_npu``), of a classic session.

    Returns:
        The figures so far: zero before the first action that ran the gather.

    Raises:
        TypeError: ``df`` is not a classic (py4j) DataFrame; a Spark Connect DataFrame's gathers
            run, and count, on the server.
        ValueError: ``df`` holds no gather, or several.
    """
    if not isinstance(df, DataFrame):
        raise _options.wrong_type("df", df, "a pyspark.sql.DataFrame")
    jdf, _, jvm = _classic(df, "gather_metrics")
    try:
        figures = getattr(jvm, "io.npugather.spark.GatherMetrics").of(jdf)
    except Exception as e:  # GatherMetrics.of's IllegalArgumentException, through PySpark
        refused = _illegal_argument(e)
        if refused is None:
            raise
        raise ValueError(f"gather_metrics: {refused}") from None
    return GatherMetrics(
        input=str(figures.input()),
        input_rows=int(figures.inputRows()),
        rows_gathered=int(figures.rowsGathered()),
        input_bytes=int(figures.inputBytes()),
        output_bytes=int(figures.outputBytes()),
        bytes_sent=int(figures.bytesSent()),
        bytes_received=int(figures.bytesReceived()),
        own_partition_bytes=int(figures.ownPartitionBytes()),
        peak_off_heap_bytes=int(figures.peakOffHeapBytes()),
        conversion_nanos=int(figures.conversionNanos()),
        rendezvous_nanos=int(figures.rendezvousNanos()),
        slowest_rank_wait_nanos=int(figures.slowestRankWaitNanos()),
        collective_nanos=int(figures.collectiveNanos()),
        transports={str(k): int(v) for k, v in dict(figures.transports()).items()},
    )


def _illegal_argument(error: Exception) -> str | None:
    """The message of the JVM's IllegalArgumentException behind ``error``, else None."""
    throwable: Any = getattr(error, "java_exception", None) or getattr(error, "_origin", None)
    if throwable is None:
        return None
    if throwable.getClass().getName() != "java.lang.IllegalArgumentException":
        return None
    return str(throwable.getMessage())
