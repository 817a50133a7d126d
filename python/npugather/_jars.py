"""Where the connector's jars are, and how a session being built gets them."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from npugather._version import CONNECTOR_VERSION, JAVACPP_VERSION

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

JARS_ENV = "NPUGATHER_JARS"
"""Environment variable naming the jars explicitly (separated by ``os.pathsep`` or commas)."""

_BUNDLED = Path(__file__).resolve().parent / "jars"
# Set for a Python process whose JVM spark-submit (or the pyspark shell) started first.
_GATEWAY_ENV = "PYSPARK_GATEWAY_PORT"

# (group path, artifact, version) in a Maven repository: the connector, the operator API it
# builds on, its native bridge (which carries the JNI library) and JavaCPP. Arrow and Spark come
# with Spark.
_ARTIFACTS = (
    ("io/npugather", "npugather-spark_2.13", CONNECTOR_VERSION),
    ("io/npugather", "npugather-core", CONNECTOR_VERSION),
    ("io/npugather", "npugather-native", CONNECTOR_VERSION),
    ("org/bytedeco", "javacpp", JAVACPP_VERSION),
)


def maven_repository() -> Path:
    """The local Maven repository (``MAVEN_REPOSITORY``, else ``~/.m2/repository``)."""
    configured = os.environ.get("MAVEN_REPOSITORY")
    return Path(configured) if configured else Path.home() / ".m2" / "repository"


def jars() -> list[str]:
    """The jars a Spark session needs for ``allGatherOnNpu``, as absolute paths.

    Looked up, first match wins: the ``NPUGATHER_JARS`` environment variable; jars shipped
    inside this package (``npugather/jars/*.jar``); the local Maven repository after ``mvn
    install`` of the project (connector, operator API, native bridge, JavaCPP).

    Raises:
        FileNotFoundError: naming every place searched, when none has the jars.
    """
    listed = os.environ.get(JARS_ENV, "").strip()
    if listed:
        paths = [p for p in listed.replace(",", os.pathsep).split(os.pathsep) if p.strip()]
        missing = [p for p in paths if not Path(p).is_file()]
        if missing:
            raise FileNotFoundError(f"{JARS_ENV} names jars that do not exist: {missing}")
        return [str(Path(p).resolve()) for p in paths]
    bundled = sorted(_BUNDLED.glob("*.jar"))
    if bundled:
        return [str(p) for p in bundled]
    return _from_maven_repository(maven_repository())


def _from_maven_repository(repository: Path) -> list[str]:
    found: list[str] = []
    missing: list[str] = []
    for group, artifact, version in _ARTIFACTS:
        jar = repository / group / artifact / version / f"{artifact}-{version}.jar"
        (found if jar.is_file() else missing).append(str(jar))
    if missing:
        raise FileNotFoundError(
            "the NpuGather connector's jars were not found: "
            + ", ".join(missing)
            + f" (searched: ${JARS_ENV}, {_BUNDLED}, the Maven repository {repository});"
            + " build them with `mvn -B -DskipTests install` in the project, or set"
            + f" {JARS_ENV}"
        )
    return found


# The server side of df.allGatherOnNpu() on Spark Connect DataFrames, and where Spark's Connect
# server looks for relation plugins.
RELATION_PLUGIN = "io.npugather.spark.connect.NpuGatherRelationPlugin"
RELATION_PLUGINS = "spark.connect.extensions.relation.classes"
# Where PySpark reads a Connect server's address from when the builder has no remote():
# sc://HOST:PORT, or local[N] for a server PySpark starts in this process.
_REMOTE_ENV = "SPARK_REMOTE"

# The connector's Spark SQL extension: plans the gather and lists the spark.npugather.* settings
# in SET -v from the session's start.
EXTENSIONS = "io.npugather.spark.NpuGatherExtensions"


def configure(
    builder: SparkSession.Builder, jar_paths: Sequence[str] | None = None
) -> SparkSession.Builder:
    """Puts the connector's jars and its SQL extension (``spark.sql.extensions``) on a session
    being built and returns the builder.

    ``spark.jars`` reaches the driver's classpath only when the session starts its JVM, so call
    this before the first ``getOrCreate()`` of the Python process::

        spark = npugather.configure(SparkSession.builder.master("local[4]")).getOrCreate()

    A builder of a local Spark Connect server (``SparkSession.builder.remote("local[4]")``) gets
    the server's Connect plugin as well (``spark.connect.extensions.relation.classes``), so that
    ``df.allGatherOnNpu()`` works on its DataFrames. A builder of a remote server
    (``remote("sc://...")``) is returned unchanged: that server is started with the connector.

    Jars, extensions and plugins the builder already lists are kept. Under ``spark-submit`` (or
    the ``pyspark`` shell) the JVM is already running and the builder is returned unchanged:
    pass the jars with ``--jars`` there (``python -m npugather jars`` lists them).

    Args:
        builder: a ``SparkSession.Builder``.
        jar_paths: the jars to add; default :func:`jars`.
    """
    if _GATEWAY_ENV in os.environ:
        return builder  # spark-submit or pyspark started the JVM: its --jars are what counts
    remote = _builder_option(builder, "spark.remote") or os.environ.get(_REMOTE_ENV)
    if remote and not remote.startswith("local"):
        return builder  # a Connect server elsewhere, configured where it runs
    _require_fresh_jvm()
    paths = list(jar_paths) if jar_paths is not None else jars()
    configured = builder.config("spark.jars", _joined(builder, "spark.jars", paths)).config(
        "spark.sql.extensions", _joined(builder, "spark.sql.extensions", [EXTENSIONS])
    )
    if remote:
        configured = configured.config(
            RELATION_PLUGINS, _joined(builder, RELATION_PLUGINS, [RELATION_PLUGIN])
        )
    return configured


def _joined(builder: object, key: str, values: Sequence[str]) -> str:
    """The builder's comma-separated list under ``key`` with ``values`` appended (once each)."""
    existing = _builder_option(builder, key)
    listed = [e.strip() for e in (existing.split(",") if existing else []) if e.strip()]
    for value in values:
        if value not in listed:
            listed.append(value)
    return ",".join(listed)


def _require_fresh_jvm() -> None:
    """Refuses a process whose Spark JVM already runs without the connector: spark.jars would
    reach the executors, but not the driver that plans the gather."""
    from pyspark import SparkContext

    if SparkContext._jvm is not None and not connector_loaded(SparkContext._jvm):
        from npugather.errors import ConnectorNotFoundError

        raise ConnectorNotFoundError(
            "this Python process already runs a Spark JVM without the NpuGather connector;"
            " configure the builder before the first getOrCreate() (restart the notebook's"
            " kernel), or start Python with `pyspark --jars ...` / `spark-submit --jars ...`",
            java_class="",
        )


def connector_loaded(jvm: object) -> bool:
    """True when the JVM can load the connector's entry point."""
    from py4j.java_gateway import JavaClass

    return isinstance(getattr(jvm, "io.npugather.spark.NpuGather"), JavaClass)


def _builder_option(builder: object, key: str) -> str | None:
    options = getattr(builder, "_options", None)
    return options.get(key) if isinstance(options, dict) else None
