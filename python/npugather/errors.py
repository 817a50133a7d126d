"""Python exceptions for the connector's JVM-side failures.

PySpark turns a Java exception that reaches Python into a Python one in
``pyspark.errors.exceptions.captured.convert_exception``; anything it does not know arrives as a
``py4j.protocol.Py4JJavaError`` with the whole JVM stack trace. Importing ``npugather`` puts
:func:`from_java` in front of that conversion, so a failed gather raises :class:`NpuGatherError`
from whichever call ran the job (``collect()``, ``show()``, ``write``, ...): a
``pyspark.errors.PySparkException`` that carries, for a rank's failure, the error class and
SQLSTATE of the JVM's ``io.npugather.spark.RankFailedException``, as PySpark's own exceptions
carry Spark's.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import Any

from pyspark.errors import PySparkException

from npugather import _options

# The connector's own exception types, most specific first.
_VENDOR_EXCEPTION = "io.npugather.VendorException"
_NPUGATHER_EXCEPTION = "io.npugather.NpuGatherException"
_RENDEZVOUS_EXCEPTION = "io.npugather.spark.rendezvous.RendezvousException"
# A job that a rank's failure failed: error class, SQLSTATE, rank; its cause is the rank's error.
_RANK_FAILED_EXCEPTION = "io.npugather.spark.RankFailedException"
_GATHER = "allGatherOnNpu"
# Set while from_java runs on this thread: the JVM calls it makes may fail in turn.
_converting = threading.local()
# Checks of the connector's code that throw the JDK's types (options, cluster and device checks).
_CHECK_EXCEPTIONS = ("java.lang.IllegalArgumentException", "java.lang.IllegalStateException")
_OWN_PACKAGE = "io.npugather."
# Causes followed before giving up, as a guard against cyclic chains.
_MAX_CHAIN = 16
# How long to wait for the driver to see the failed task's event (it follows the job's end).
_EVENT_WAIT_MILLIS = 2000
_RESULT_CODES = (
    "INVALID_ARGUMENT",
    "INVALID_USAGE",
    "SYSTEM_ERROR",
    "REMOTE_ERROR",
    "TIMEOUT",
    "ABORTED",
    "INTERNAL_ERROR",
)
# Spark's words for the task that failed a job: a barrier stage's, any other stage's.
_FAILED_TASK = re.compile(
    r"barrier task (?:Result|ShuffleMap)Task\((?P<stage>\d+), (?P<partition>\d+)\)"
)
_LOST_TASK = re.compile(r"Lost task (?P<partition>\d+)\.\d+ in stage (?P<stage>\d+)\.\d+")
# The failed task's exception, as a job's message quotes it: "class: text" then its frames.
_EXCEPTION_LINE = re.compile(
    r"^(?P<cls>io\.npugather\.[\w.$]+|java\.lang\.Illegal(?:State|Argument)Exception): "
    r"(?P<text>.*)\n\s+at io\.npugather\.",
    re.MULTILINE,
)


class NpuGatherError(PySparkException):
    """An all-gather failed in the JVM: a rank, the rendezvous, or a check before the job.

    ``str(error)`` is the JVM's message, which names the failing rank and the cause, with the
    options named as this package's keywords (``rank_size``).

    Attributes:
        error_class: for a rank's failure, the error class (also ``condition``,
            ``getCondition()``): ``"NPUGATHER_RANK_FAILED"``, ``"NPUGATHER_RANK_INPUT_INVALID"``
            or ``"NPUGATHER_RANK_FUNCTION_FAILED"`` (docs/operations.md); else None.
        sqlstate: its SQLSTATE (``getSqlState()``): ``"58000"``, ``"22000"`` or ``"39000"``.
        message_parameters: ``operation``, ``rank`` and ``message`` of a rank's failure
            (``getMessageParameters()``), else None.
        result_code: whose fault it is, as the connector's ``ResultCode`` name (``"TIMEOUT"``,
            ``"REMOTE_ERROR"``, ``"INVALID_USAGE"``, ...), or None when the failure is not a
            collective's (a cluster check, the rendezvous).
        rank: the rank that reports the failure, or None when unknown.
        operation: the collective operation that failed, or None.
        reason: why a rendezvous round failed (``"TIMEOUT"``, ``"RANK_LEFT"``, ...), or None.
        library, vendor_code, vendor_code_name, vendor_message: the vendor library's verdict
            (``"HCCL"``, ``"ACL"`` or ``"LCAL"``; its numeric code; the code's name such as
            ``"HCCL_E_TIMEOUT"``; its own text) when a vendor call failed, else None.
        java_class: the JVM exception's class name.
        java_exception: the JVM exception (a py4j object), for debugging.
    """

    def __init__(
        self,
        message: str,
        *,
        java_class: str,
        result_code: str | None = None,
        rank: int | None = None,
        operation: str | None = None,
        reason: str | None = None,
        library: str | None = None,
        vendor_code: int | None = None,
        vendor_code_name: str | None = None,
        vendor_message: str | None = None,
        java_exception: Any = None,
        error_class: str | None = None,
        sqlstate: str | None = None,
        message_parameters: dict[str, str] | None = None,
    ) -> None:
        super().__init__(
            message=message, errorClass=error_class, messageParameters=message_parameters
        )
        self.args = (message,)
        self.message = message
        self.error_class = error_class
        self.sqlstate = sqlstate
        self.message_parameters = message_parameters
        self.result_code = result_code
        self.rank = rank
        self.operation = operation
        self.reason = reason
        self.library = library
        self.vendor_code = vendor_code
        self.vendor_code_name = vendor_code_name
        self.vendor_message = vendor_message
        self.java_class = java_class
        self.java_exception = java_exception

    @property
    def condition(self) -> str | None:
        """The error class, as Spark 4 names it."""
        return self.error_class

    def getCondition(self) -> str | None:  # noqa: N802 -- PySparkException's name
        return self.error_class

    def getSqlState(self) -> str | None:  # noqa: N802 -- PySparkException's name
        return self.sqlstate

    def getMessageParameters(self) -> dict[str, str] | None:  # noqa: N802
        return self.message_parameters

    def getMessage(self) -> str:  # noqa: N802 -- PySparkException's name
        if self.error_class is None:
            return self.message
        return f"[{self.error_class}] {self.message} SQLSTATE: {self.sqlstate}"

    def __str__(self) -> str:
        return self.message


class InvalidOptionError(NpuGatherError, ValueError):
    """A value the JVM refused before any communication (e.g. a bad ``spark.npugather.*``
    entry, or ``rank_root`` out of range for the number of partitions)."""


class ConnectorNotFoundError(NpuGatherError):
    """The session's JVM does not have the connector's classes: its jars are not on the
    classpath (see :func:`npugather.configure`)."""


def from_java(throwable: Any) -> NpuGatherError | None:
    """The NpuGatherError for a JVM throwable that a failure of the connector caused, or None.

    The failure is found in the throwable's cause chain or, for a job whose task failed (a
    failed barrier stage keeps only the failure's text), in the driver's record of failed tasks
    (``io.npugather.spark.TaskFailures``); failing both, in the job's message.
    """
    if getattr(_converting, "active", False):
        return None  # a JVM call of this conversion failed: PySpark's conversion takes it
    _converting.active = True
    try:
        return _from_java(throwable)
    finally:
        _converting.active = False


def _from_java(throwable: Any) -> NpuGatherError | None:
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is None or throwable is None:
        return None
    found = _from_chain(gateway, throwable)
    if found is not None:
        return found
    message = throwable.getMessage() or ""
    task = _FAILED_TASK.search(message) or _LOST_TASK.search(message)
    if task is None:
        return None
    partition = int(task.group("partition"))
    from py4j.protocol import Py4JError

    failures = getattr(gateway.jvm, "io.npugather.spark.TaskFailures")
    context = SparkContext._active_spark_context
    try:
        job_failure = (
            failures.installOn(context._jsc.sc()).rankFailure(
                throwable, _GATHER, _EVENT_WAIT_MILLIS
            )
            if context is not None
            else None  # stopped meanwhile: no recorded failure to ask for
        )
    except Py4JError:  # a connector jar older than this package
        job_failure = None
    if job_failure is not None:
        found = _from_chain(gateway, job_failure)
        if found is not None:
            return found
    return _from_text(message, partition, throwable)


def _from_text(message: str, partition: int, throwable: Any) -> NpuGatherError | None:
    """The failure named in a job's message: its class, text and the failed task's rank."""
    line = _EXCEPTION_LINE.search(message)
    if line is None:
        return None
    name, text = line.group("cls"), _options.python_words(line.group("text"))
    code = text.split(":", 1)[0]
    if name in (_NPUGATHER_EXCEPTION, _VENDOR_EXCEPTION):
        return NpuGatherError(
            text,
            java_class=name,
            rank=partition,
            result_code=code if code in _RESULT_CODES else None,
            java_exception=throwable,
        )
    kind = InvalidOptionError if name.endswith("ArgumentException") else NpuGatherError
    return kind(text, java_class=name, rank=partition, java_exception=throwable)


def _from_chain(gateway: Any, throwable: Any) -> NpuGatherError | None:
    seen: list[Any] = []
    current = throwable
    while current is not None and len(seen) < _MAX_CHAIN:
        seen.append(current)
        if _is_instance(gateway, current, _RANK_FAILED_EXCEPTION):
            return _rank_failure(gateway, current)
        if _is_instance(gateway, current, _NPUGATHER_EXCEPTION):
            return _collective_error(gateway, current)
        if _is_instance(gateway, current, _RENDEZVOUS_EXCEPTION):
            return NpuGatherError(
                _message(current),
                java_class=_RENDEZVOUS_EXCEPTION,
                reason=current.reason().name(),
                java_exception=current,
            )
        for name in _CHECK_EXCEPTIONS:
            if _is_instance(gateway, current, name) and _thrown_by_connector(current):
                kind = InvalidOptionError if name.endswith("ArgumentException") else NpuGatherError
                return kind(_message(current), java_class=name, java_exception=current)
        cause = current.getCause()
        if cause is None or any(cause.equals(s) for s in seen):
            break
        current = cause
    return None


def _is_instance(gateway: Any, throwable: Any, java_class: str) -> bool:
    """False also when the JVM has no such class (a connector jar older than this package)."""
    from py4j.java_gateway import is_instance_of
    from py4j.protocol import Py4JError

    try:
        return bool(is_instance_of(gateway, throwable, java_class))
    except Py4JError:
        return False


def _rank_failure(gateway: Any, job_failure: Any) -> NpuGatherError:
    """A RankFailedException's fields on the error of its cause, the rank's own exception."""
    rank_exception = job_failure.getCause()
    found = _from_chain(gateway, rank_exception) if rank_exception is not None else None
    if found is None:  # e.g. what the function of onRanks threw
        source = rank_exception if rank_exception is not None else job_failure
        found = NpuGatherError(
            _message(source), java_class=source.getClass().getName(), java_exception=source
        )
    found.error_class = job_failure.getCondition()
    found.sqlstate = job_failure.getSqlState()
    found.message_parameters = dict(job_failure.getMessageParameters())
    if found.rank is None:
        found.rank = job_failure.rank()
    return found


def _collective_error(gateway: Any, throwable: Any) -> NpuGatherError:
    from py4j.java_gateway import is_instance_of

    rank = throwable.rank()
    fields = dict(
        result_code=throwable.code().name(),
        rank=rank if rank >= 0 else None,
        operation=throwable.operation(),
        java_exception=throwable,
    )
    if is_instance_of(gateway, throwable, _VENDOR_EXCEPTION):
        return NpuGatherError(
            _message(throwable),
            java_class=_VENDOR_EXCEPTION,
            library=throwable.library(),
            vendor_code=throwable.vendorCode(),
            vendor_code_name=throwable.vendorCodeName(),
            vendor_message=throwable.vendorMessage() or None,
            **fields,
        )
    return NpuGatherError(_message(throwable), java_class=_NPUGATHER_EXCEPTION, **fields)


def _thrown_by_connector(throwable: Any) -> bool:
    frames = throwable.getStackTrace()
    return len(frames) > 0 and frames[0].getClassName().startswith(_OWN_PACKAGE)


def _message(throwable: Any) -> str:
    message = throwable.getMessage()
    return _options.python_words(message) if message is not None else throwable.getClass().getName()


_installed: Callable[[Any], Any] | None = None


def install() -> None:
    """Puts :func:`from_java` in front of PySpark's conversion of JVM exceptions (idempotent)."""
    global _installed
    from pyspark.errors.exceptions import captured

    if _installed is not None and captured.convert_exception is _installed:
        return
    pyspark_convert = captured.convert_exception

    def convert_exception(e: Any) -> Any:
        converted = from_java(e)
        return converted if converted is not None else pyspark_convert(e)

    captured.convert_exception = convert_exception
    _installed = convert_exception
