"""NpuGather for PySpark: ``allGatherOnNpu`` on DataFrames, over the JVM connector.

::

    from pyspark.sql import SparkSession
    import npugather

    spark = npugather.configure(SparkSession.builder.master("local[4]")).getOrCreate()
    gathered = spark.range(0, 8, 1, 4).allGatherOnNpu(timeout="60s")
    gathered.show()        # every row of every input partition, on each of the 4 ranks

- :func:`all_gather_on_npu` / ``df.allGatherOnNpu(**options)``: the gather, of classic and of
  Spark Connect DataFrames (importing this package adds the method to
  ``pyspark.sql.DataFrame``; set ``NPUGATHER_DATAFRAME_METHOD=0`` before the import to leave
  DataFrame alone, or call :func:`remove_dataframe_method`).
- :func:`broadcast_on_executors` / ``df.hint("allgather")``: a join's build side all-gathered
  onto every executor instead of Spark's broadcast through the driver.
- :func:`configure` / :func:`jars`: the connector's jars for a session being built.
- :func:`gathered_tensor` / :func:`gathered_matrix`: a gathered partition as one NumPy array
  inside ``mapInArrow``.
- :func:`gather_metrics`: a gather's figures (rows, bytes, times, transports), read from the
  gathered DataFrame.
- :class:`NpuGatherError`: what a failed gather raises.
"""

from npugather._jars import configure, jars
from npugather._version import __version__
from npugather.dataframe import (
    add_dataframe_method,
    all_gather_on_npu,
    broadcast_on_executors,
    dataframe_method_wanted,
    remove_dataframe_method,
)
from npugather.errors import ConnectorNotFoundError, InvalidOptionError, NpuGatherError
from npugather.errors import install as _install_error_conversion
from npugather.metrics import GatherMetrics, gather_metrics
from npugather.tensors import gathered_matrix, gathered_tensor

__all__ = [
    "ConnectorNotFoundError",
    "GatherMetrics",
    "InvalidOptionError",
    "NpuGatherError",
    "__version__",
    "add_dataframe_method",
    "all_gather_on_npu",
    "broadcast_on_executors",
    "configure",
    "gather_metrics",
    "gathered_matrix",
    "gathered_tensor",
    "jars",
    "remove_dataframe_method",
]

_install_error_conversion()
if dataframe_method_wanted():
    add_dataframe_method()
