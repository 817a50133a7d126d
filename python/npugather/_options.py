"""The options of ``allGatherOnNpu`` as Python keywords, made from the JVM's settings.

``options.json`` lists every option of the JVM's ``AllGatherOptions``: its keyword (the key's name
in snake case), its ``npugather.*`` key, its kind, default, what is allowed and its doc. The file
is made from the connector's settings (``NpuGatherConf.SETTINGS``; the connector's test
``SettingsTablesTest`` writes it on request and fails while it differs), so nothing here
restates an option.

Python turns a keyword's value into the JVM's text and refuses a value of the wrong type; the JVM
checks the values, once, when the gather is called. A keyword left at ``None`` is not sent: the
session's ``spark.npugather.*`` entry applies, else the JVM's default.
"""

from __future__ import annotations

import datetime
import json
import math
import numbers
import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

# The forms a duration takes in Python, beside what the JVM allows of its value.
_DURATION_FORMS = "a string, a datetime.timedelta or a number of seconds"
# How the JVM refuses a value: "KEY = VALUE is invalid; allowed: ...", once in Python's words.
_REFUSAL = re.compile(r"(?P<name>\w+) = (?P<value>.*?) is invalid; allowed: ", re.DOTALL)


def invalid(name: str, value: Any, allowed: str) -> ValueError:
    """The ValueError of a bad value, worded as the JVM words it."""
    return ValueError(f"{name} = {value!r} is invalid; allowed: {allowed}")


def wrong_type(name: str, value: Any, allowed: str) -> TypeError:
    return TypeError(f"{name} = {value!r} ({type(value).__name__}) is invalid; allowed: {allowed}")


@dataclass(frozen=True)
class Option:
    """One keyword, as ``options.json`` describes its JVM option."""

    name: str
    key: str
    kind: str
    default: str
    allowed: str
    doc: str

    @property
    def camel(self) -> str:
        """The option's name in the JVM's messages (``rankSize``)."""
        return self.key.rsplit(".", 1)[-1]

    def python_default(self) -> str:
        """The default as Python writes it: ``'host'``, ``0``, ``False``."""
        if self.kind == "boolean":
            return str(self.default == "true")
        return self.default if self.kind == "integer" else repr(self.default)

    def to_jvm(self, value: Any) -> str:
        """``value`` as the JVM's text of the option.

        Raises:
            TypeError: ``value`` is of a type the option does not take.
        """
        if self.kind == "boolean":
            if not isinstance(value, bool):
                raise wrong_type(self.name, value, "True or False")
            return "true" if value else "false"
        if self.kind == "integer":
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise wrong_type(self.name, value, _keyword_names(self.allowed))
            return str(int(value))
        if self.kind == "duration":
            return _duration_text(
                self.name, value, f"{_keyword_names(self.allowed)}: {_DURATION_FORMS}"
            )
        if not isinstance(value, str):
            raise wrong_type(self.name, value, _keyword_names(self.allowed))
        return value


def _duration_text(name: str, value: Any, allowed: str) -> str:
    """A string as written (the JVM's messages and plans then speak of it as the user did), else
    whole seconds or milliseconds."""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, datetime.timedelta):
        millis = value // datetime.timedelta(milliseconds=1)
    elif isinstance(value, numbers.Real) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise invalid(name, value, allowed)
        millis = (
            int(value) * 1000 if isinstance(value, numbers.Integral) else round(float(value) * 1000)
        )
    else:
        raise wrong_type(name, value, allowed)
    return f"{millis}ms" if millis % 1000 else f"{millis // 1000}s"


def _load() -> tuple[Option, ...]:
    table = json.loads(resources.files("npugather").joinpath("options.json").read_text("utf-8"))
    return tuple(
        Option(
            name=o["keyword"],
            key=o["key"],
            kind=o["kind"],
            default=o["default"],
            allowed=o["allowed"],
            doc=o["doc"],
        )
        for o in table["options"]
    )


OPTIONS: Sequence[Option] = _load()
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
    return _keyword_names(message) if about_option else message


def _keyword_names(message: str) -> str:
    """``message`` with the options' names (``rankRoot``) as keywords (``rank_root``)."""
    for option in OPTIONS:
        message = re.sub(rf"(?<![\w.]){option.camel}\b", option.name, message)
    return message


def refusal_of_keywords(message: str, options: Mapping[str, Any]) -> str:
    """The JVM's refusal of a call with keywords ``options``, in the caller's words: the options'
    names as keywords, and a refused value as the caller wrote it in Python (``timeout = -1``,
    not the JVM's ``'-1s'``); a value the JVM describes instead (``comm_domain = of 97 UTF-8
    bytes``) stays described."""
    message = _keyword_names(message)
    refusal = _REFUSAL.match(message)
    if refusal is None or options.get(refusal.group("name")) is None:
        return message
    if refusal.group("value").startswith(("of ", "with ")):
        return message
    return (
        f"{refusal.group('name')} = {options[refusal.group('name')]!r}"
        + message[refusal.end("value") :]
    )


def to_jvm(options: Mapping[str, Any]) -> dict[str, str]:
    """The ``npugather.*`` entries of the keywords that are not None, each as the JVM's text."""
    check_names("all_gather_on_npu", options)
    return {
        _BY_NAME[name].key: _BY_NAME[name].to_jvm(value)
        for name, value in options.items()
        if value is not None
    }


def docstring_args(indent: str) -> str:
    """The ``Args:`` entries of the keywords, from the JVM's docs of the options."""
    entries = []
    for option in OPTIONS:
        doc = _keyword_names(re.sub(r"`([^`]+)`", r"``\1``", option.doc))
        text = f"{option.name}: {doc}. Default ``{option.python_default()}``."
        entries.append(
            textwrap.fill(
                text,
                width=96,
                initial_indent=indent,
                subsequent_indent=indent + "    ",
                break_on_hyphens=False,
            )
        )
    return "\n".join(entries)
