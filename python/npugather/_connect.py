"""``allGatherOnNpu`` on Spark Connect DataFrames: the relation the server's plugin plans.

The client sends the gather as a relation extension, a ``google.protobuf.Any`` whose type URL is
:data:`TYPE_URL` and whose value is the message (``io.npugather.spark.connect.AllGatherRelation``
on the server decodes it)::

    message AllGatherOnNpu {
      spark.connect.Relation input = 1;  // the DataFrame to gather
      map<string, string> options = 2;  // npugather.* keys, as NpuGather.allGatherOnNpu takes them
    }

The server (``io.npugather.spark.connect.NpuGatherRelationPlugin``, listed in
``spark.connect.extensions.relation.classes``) builds the classic API's plan from it, with the
session's ``spark.npugather.*`` defaults. This module imports PySpark's Connect client (grpcio,
protobuf): only a Connect DataFrame brings it here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pyspark.errors import IllegalArgumentException, PySparkException
from pyspark.errors.exceptions.connect import SparkConnectGrpcException
from pyspark.sql.connect import proto
from pyspark.sql.connect.dataframe import DataFrame as ConnectDataFrame
from pyspark.sql.connect.plan import LogicalPlan

from npugather import _options
from npugather._jars import RELATION_PLUGIN, RELATION_PLUGINS
from npugather.errors import (
    _FAILED_TASK,
    _LOST_TASK,
    _OWN_PACKAGE,
    _RESULT_CODES,
    ConnectorNotFoundError,
    InvalidOptionError,
    NpuGatherError,
    _from_text,
)

TYPE_URL = "type.googleapis.com/npugather.connect.AllGatherOnNpu"

# Field numbers of AllGatherOnNpu and of a map entry; protobuf's wire type of bytes and strings.
_INPUT, _OPTIONS, _ENTRY_KEY, _ENTRY_VALUE = 1, 2, 1, 2
_LENGTH_DELIMITED = 2
# How the server names the exception of a check of the connector (options, conf, cluster).
_CHECK_EXCEPTIONS = {
    "java.lang.IllegalArgumentException": InvalidOptionError,
    "java.lang.IllegalStateException": NpuGatherError,
}
# The server's exception class, which PySpark puts before its message.
_REASON = re.compile(r"\((?P<cls>[\w.$]+)\) ")
# The first frame of the server's stack trace, as PySpark passes it on.
_FIRST_FRAME = re.compile(r"^\s*at (?P<cls>[\w.$]+)\.[\w$<>]+\(", re.MULTILINE)
# The server's answer when no plugin took the relation.
_NO_PLUGIN = "No handler found for extension"
# The rank's exception in a RankFailedException's message: "... failed: <class>: <message>".
_RANK_EXCEPTION_CLASS = re.compile(r"(?P<cls>(?:java|javax|scala|io|org)\.[\w.$]+): ")


class AllGatherOnNpu(LogicalPlan):
    """The gather of ``child`` with ``options`` (``npugather.*`` keys), as a Connect plan node."""

    def __init__(self, child: LogicalPlan, options: Mapping[str, str]) -> None:
        super().__init__(child)
        self.options = dict(options)

    def plan(self, session: Any) -> proto.Relation:
        assert self._child is not None
        relation = self._create_proto_relation()
        relation.extension.type_url = TYPE_URL
        relation.extension.value = encode(
            self._child.plan(session).SerializeToString(), self.options
        )
        return relation


def encode(input_relation: bytes, options: Mapping[str, str]) -> bytes:
    """An ``AllGatherOnNpu`` message in protobuf's wire format."""
    message = _field(_INPUT, input_relation)
    for key, value in options.items():
        message += _field(
            _OPTIONS,
            _field(_ENTRY_KEY, key.encode("utf-8")) + _field(_ENTRY_VALUE, value.encode("utf-8")),
        )
    return message


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | _LENGTH_DELIMITED) + _varint(len(payload)) + payload


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def all_gather_on_npu(df: ConnectDataFrame, entries: Mapping[str, str]) -> ConnectDataFrame:
    """The gathered Connect DataFrame. Its schema is asked for at once, so that the server plans
    the gather now and refuses what the classic API refuses at the call (``spark.npugather.*``
    defaults, ``rank_root`` against the number of partitions), with the same exceptions
    (:func:`install`)."""
    gathered = ConnectDataFrame(AllGatherOnNpu(df._plan, entries), df.sparkSession)
    _ = gathered.schema
    return gathered


def from_server(error: SparkConnectGrpcException) -> NpuGatherError | None:
    """The NpuGatherError of a failure the server's plugin or the connector reported, or None:
    as the classic API raises it, from the server's message (the job's message quotes a failed
    rank's exception with its frames)."""
    text = error._message or ""  # without the server's stack trace
    reason = _REASON.match(text)
    java_class = (
        reason.group("cls")
        if reason
        else (
            "java.lang.IllegalArgumentException"
            if isinstance(error, IllegalArgumentException)
            else ""
        )
    )
    text = text[reason.end() :] if reason else text
    if (_NO_PLUGIN in text and TYPE_URL.rsplit("/", 1)[-1] in text) or (
        java_class == "java.lang.ClassNotFoundException" and RELATION_PLUGIN in text
    ):
        return ConnectorNotFoundError(
            "the Spark Connect server has no NpuGather plugin or an older one: start it with"
            f" this package's jar (python -m npugather jars) and --conf {RELATION_PLUGINS}="
            f"{RELATION_PLUGIN} (a local server:"
            ' npugather.configure(SparkSession.builder.remote("local[4]")))',
            java_class=java_class,
        )
    task = _FAILED_TASK.search(text) or _LOST_TASK.search(text)
    if task is not None:
        return _from_text(text, int(task.group("partition")), error)
    kind = _CHECK_EXCEPTIONS.get(java_class)
    if kind is None or not ("npugather" in text.lower() or _thrown_by_connector(error)):
        return None
    return kind(_options.python_words(text), java_class=java_class)


def _thrown_by_connector(error: SparkConnectGrpcException) -> bool:
    """Whether the server's exception was thrown in the connector's code (its first frame), as
    the classic API's conversion decides: a check of the SQL function's options, for one."""
    frame = _FIRST_FRAME.search(getattr(error, "_stacktrace", None) or "")
    return frame is not None and frame.group("cls").startswith(_OWN_PACKAGE)


def from_rank_failure(error: PySparkException) -> NpuGatherError | None:
    """The NpuGatherError of a job that a rank's failure failed (the server's
    io.npugather.spark.RankFailedException, which reaches the client with its error class,
    SQLSTATE and message parameters), or None."""
    condition = error.getCondition()
    if not condition or not condition.startswith("NPUGATHER_RANK_"):
        return None
    parameters = dict(error.getMessageParameters() or {})
    text = parameters.get("message", "")
    found = _RANK_EXCEPTION_CLASS.search(error.getMessage())
    java_class = found.group("cls") if found else ""
    code = text.split(":", 1)[0]
    kind = InvalidOptionError if java_class.endswith("IllegalArgumentException") else NpuGatherError
    return kind(
        _options.python_words(text),
        java_class=java_class,
        rank=int(parameters["rank"]) if parameters.get("rank", "").isdigit() else None,
        operation=parameters.get("operation"),
        result_code=code if code in _RESULT_CODES else None,
        error_class=condition,
        sqlstate=error.getSqlState(),
        message_parameters=parameters,
    )


def install() -> None:
    """Puts :func:`from_server` behind PySpark's conversion of a Connect server's errors
    (idempotent), so that the action that runs a failed gather raises NpuGatherError, as with
    the classic API."""
    from pyspark.sql.connect.client import core

    if getattr(core.convert_exception, "_npugather", False):
        return
    pyspark_convert = core.convert_exception

    def convert_exception(*args: Any, **kwargs: Any) -> Exception:
        converted = pyspark_convert(*args, **kwargs)
        if isinstance(converted, PySparkException):
            rank_failure = from_rank_failure(converted)
            if rank_failure is not None:
                return rank_failure
        if isinstance(converted, SparkConnectGrpcException):
            return from_server(converted) or converted
        return converted

    convert_exception._npugather = True  # type: ignore[attr-defined]
    # PySpark raises what its conversion returns: an NpuGatherError (a PySparkException) too.
    core.convert_exception = convert_exception  # type: ignore[assignment]


install()
