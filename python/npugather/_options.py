"""The options of ``allGatherOnNpu`` as Python keywords, checked before any job runs.

Each keyword maps to one ``npugather.*`` key of the JVM's ``AllGatherOptions`` and is checked
with the same rules, so a bad value fails in Python naming the keyword, the value and what is
allowed. A keyword left at ``None`` is not sent: the session's ``spark.npugather.*`` entry
applies, else the JVM's default.
"""

from __future__ import annotations

import datetime
import math
import numbers
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# io.npugather.Backend.names(), in its order (a test compares them).
BACKENDS = ("hccl", "lccl", "host")
HOST_TRANSPORTS = ("auto", "tcp", "staging")
# AllGatherParam.MAX_COMM_DOMAIN_LENGTH minus the run suffix the driver appends, in UTF-8 bytes.
MAX_COMM_DOMAIN_LENGTH = 128 - 32
# AllGatherParam.MAX_RANK_SIZE: the most ranks of one communicator.
MAX_RANK_SIZE = 65536
# CommunicatorOptions.MAX_TIMEOUT: the longest timeout, 30 days.
MAX_TIMEOUT = datetime.timedelta(days=30)
_MAX_TIMEOUT_MILLIS = MAX_TIMEOUT // datetime.timedelta(milliseconds=1)

# Spark's time strings (JavaUtils.timeStringAsMs): an integer and an optional unit, ms if none.
_DURATION = re.compile(r"(-?[0-9]+)([a-z]+)?")
_MICROS_PER_UNIT = {
    "us": 1,
    "ms": 1_000,
    "s": 1_000_000,
    "m": 60_000_000,
    "min": 60_000_000,
    "h": 3_600_000_000,
    "d": 86_400_000_000,
}
_INJECT_FAILURE = re.compile(r"[0-9]{1,9}(:[0-9]{1,9})?")


def invalid(name: str, value: Any, allowed: str) -> ValueError:
    """The ValueError of a bad value, worded as the JVM words it."""
    return ValueError(f"{name} = {value!r} is invalid; allowed: {allowed}")


def wrong_type(name: str, value: Any, allowed: str) -> TypeError:
    return TypeError(f"{name} = {value!r} ({type(value).__name__}) is invalid; allowed: {allowed}")


def _text(name: str, value: Any, allowed: str) -> str:
    if not isinstance(value, str):
        raise wrong_type(name, value, allowed)
    return value


def _integer(name: str, value: Any, allowed: str, most: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise wrong_type(name, value, allowed)
    number = int(value)
    if not 0 <= number <= most:
        raise invalid(name, value, allowed)
    return number


def _backend(value: Any) -> str:
    allowed = f"one of {list(BACKENDS)}"
    backend = _text("backend", value, allowed).strip().lower()
    if backend not in BACKENDS:
        raise invalid("backend", value, allowed)
    return backend


def _rank_size(value: Any) -> str:
    return str(
        _integer(
            "rank_size",
            value,
            f"None or 0 (one rank per partition) or 1 <= rank_size <= {MAX_RANK_SIZE}",
            MAX_RANK_SIZE,
        )
    )


def _rank_root(value: Any) -> str:
    return str(
        _integer(
            "rank_root", value, f"0 <= rank_root < rank_size <= {MAX_RANK_SIZE}", MAX_RANK_SIZE - 1
        )
    )


def _comm_domain(value: Any) -> str:
    allowed = f"a string of at most {MAX_COMM_DOMAIN_LENGTH} UTF-8 bytes (a run suffix is added)"
    domain = _text("comm_domain", value, allowed)
    size = len(domain.encode("utf-8", "surrogatepass"))
    if size > MAX_COMM_DOMAIN_LENGTH:
        raise invalid("comm_domain", f"<{size} UTF-8 bytes>", allowed)
    if "\0" in domain:
        # AllGatherParam.requireNoNul's words.
        raise ValueError(
            f"comm_domain = with a NUL character at index {domain.index(chr(0))} is"
            " invalid; allowed: no NUL characters (the native library would cut the"
            " name there)"
        )
    return domain


def duration_millis(name: str, value: Any) -> int:
    """Milliseconds of a Spark time string ("120s", "5m", "500ms"), a timedelta or a number of
    seconds; positive and at most MAX_TIMEOUT (30 days)."""
    allowed = (
        "a positive duration of at most 30 days (720h): a string such as '120s', '5m' or"
        " '500ms', a datetime.timedelta or a number of seconds"
    )
    if isinstance(value, datetime.timedelta):
        millis = value // datetime.timedelta(milliseconds=1)
    elif isinstance(value, numbers.Real) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise invalid(name, value, allowed)
        millis = (
            int(value) * 1000 if isinstance(value, numbers.Integral) else round(float(value) * 1000)
        )
    elif isinstance(value, str):
        match = _DURATION.fullmatch(value.strip().lower())
        if match is None or (match.group(2) or "ms") not in _MICROS_PER_UNIT:
            raise invalid(name, value, allowed)
        micros = int(match.group(1)) * _MICROS_PER_UNIT[match.group(2) or "ms"]
        # TimeUnit.convert truncates towards zero.
        millis = abs(micros) // 1_000 * (1 if micros >= 0 else -1)
    else:
        raise wrong_type(name, value, allowed)
    if not 0 < millis <= _MAX_TIMEOUT_MILLIS:
        raise invalid(name, value, allowed)
    return millis


def _timeout(value: Any) -> str:
    """The JVM's text of a timeout: a string as written (the JVM's messages and plans then
    speak of it as the user did), else whole seconds or milliseconds."""
    millis = duration_millis("timeout", value)
    if isinstance(value, str):
        return value.strip()
    return f"{millis}ms" if millis % 1000 else f"{millis // 1000}s"


def _source_rank_column(value: Any) -> str:
    column = _text("source_rank_column", value, "a non-blank column name")
    if not column.strip():
        raise invalid("source_rank_column", value, "a non-blank column name")
    return column


def _resource_name(value: Any) -> str:
    name = _text("resource_name", value, "a Spark resource name, e.g. 'npu'")
    if not name.strip():
        raise invalid("resource_name", value, "a Spark resource name, e.g. 'npu'")
    return name


def _retryable(value: Any) -> str:
    if not isinstance(value, bool):
        raise wrong_type("retryable", value, "True or False")
    return "true" if value else "false"


def _host_transport(value: Any) -> str:
    allowed = f"one of {list(HOST_TRANSPORTS)}"
    transport = _text("host_transport", value, allowed).strip().lower()
    if transport not in HOST_TRANSPORTS:
        raise invalid("host_transport", value, allowed)
    return transport


def _inject_failure(value: Any) -> str:
    allowed = "'', 'RANK' or 'RANK:ATTEMPT' (each at most 9 digits)"
    spec = _text("inject_failure", value, allowed)
    if spec and not _INJECT_FAILURE.fullmatch(spec):
        raise invalid("inject_failure", value, allowed)
    return spec


@dataclass(frozen=True)
class Option:
    """One keyword: its JVM key, the JVM's default (for the docs) and its check."""

    name: str
    key: str
    default: str
    to_jvm: Callable[[Any], str]


OPTIONS: Sequence[Option] = (
    Option("backend", "npugather.backend", "'host'", _backend),
    Option("rank_size", "npugather.rankSize", "one rank per input partition", _rank_size),
    Option("rank_root", "npugather.rankRoot", "0", _rank_root),
    Option("comm_domain", "npugather.commDomain", "'' (a fresh domain per run)", _comm_domain),
    Option("timeout", "npugather.timeout", "'120s'", _timeout),
    Option(
        "source_rank_column", "npugather.sourceRankColumn", "'source_rank'", _source_rank_column
    ),
    Option("resource_name", "npugather.resourceName", "'npu'", _resource_name),
    Option("retryable", "npugather.retryable", "False", _retryable),
    Option("host_transport", "npugather.hostTransport", "'auto'", _host_transport),
    Option("inject_failure", "npugather.test.injectFailure", "''", _inject_failure),
)
NAMES = tuple(option.name for option in OPTIONS)
_BY_NAME = {option.name: option for option in OPTIONS}


def check_names(caller: str, options: Mapping[str, Any]) -> None:
    """A TypeError naming the first unknown keyword, the nearest one and the allowed ones."""
    for name in options:
        if name not in _BY_NAME:
            raise TypeError(
                f"{caller}() got an unknown option {name!r}; did you mean"
                f" {_nearest(name)!r}? allowed: " + ", ".join(NAMES)
            )


def _nearest(name: str) -> str:
    """The keyword closest to ``name``, also when it is written in the JVM's camel case."""
    snake = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()
    return min(NAMES, key=lambda known: _edit_distance(snake, known))


def _edit_distance(a: str, b: str) -> int:
    previous = list(range(len(b) + 1))
    for i, a_char in enumerate(a, 1):
        current = [i]
        for j, b_char in enumerate(b, 1):
            current.append(
                min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a_char != b_char))
            )
        previous = current
    return previous[-1]


def python_words(message: str) -> str:
    """A JVM message in the keywords' words: its options' keys (``npugather.rankSize``, not the
    session's ``spark.npugather.rankSize``) as keywords (``rank_size``), and a message about an
    option (``npugather.rankRoot = 3 is invalid; allowed: 0 <= rankRoot < rankSize (3)``) with
    the other options' names in it as keywords too (``rank_root = 3 ...: 0 <= rank_root <
    rank_size (3)``)."""
    about_option = any(message.startswith(option.key + " = ") for option in OPTIONS)
    for option in OPTIONS:
        message = re.sub(rf"(?<![\w.]){re.escape(option.key)}\b", option.name, message)
    if about_option:
        for option in OPTIONS:
            camel = option.key.rsplit(".", 1)[-1]
            message = re.sub(rf"(?<![\w.]){camel}\b", option.name, message)
    return message


def to_jvm(options: Mapping[str, Any], input_columns: Sequence[str]) -> dict[str, str]:
    """The ``npugather.*`` entries of the keywords that are not None, every value checked."""
    check_names("all_gather_on_npu", options)
    entries: dict[str, str] = {}
    for name, value in options.items():
        if value is not None:
            entries[_BY_NAME[name].key] = _BY_NAME[name].to_jvm(value)
    size: int | None = options.get("rank_size")
    root: int | None = options.get("rank_root")
    if size and root is not None and root >= size:
        raise invalid("rank_root", root, f"0 <= rank_root < rank_size ({size})")
    column = options.get("source_rank_column")
    if column is not None:
        for existing in input_columns:
            if existing.lower() == column.lower():
                raise invalid(
                    "source_rank_column",
                    column,
                    f"a name that is not an input column (it collides with {existing!r})",
                )
    return entries
