"""Every option of AllGatherOptions as a keyword: a bad value fails at the call, before any job,
naming the keyword, the value as written in Python and what is allowed."""

from __future__ import annotations

import datetime
import inspect
import re
from typing import Any

import pytest
from _support import assert_a_misspelled_session_setting_is_refused
from pyspark.sql import SparkSession

import npugather
from npugather import _options

pytestmark = pytest.mark.parametrize("spark", ["local[2]"], indirect=True)

# (keyword, value, exception, words the message must contain)
BAD = [
    ("backend", "gpu", ValueError, "one of [hccl, lccl, host]"),
    ("backend", 1, TypeError, "one of"),
    ("rank_size", -1, ValueError, "0 (one rank per partition) or 1 <= rank_size <= 65536"),
    ("rank_size", 65537, ValueError, "0 (one rank per partition) or 1 <= rank_size <= 65536"),
    ("rank_size", 2**31, ValueError, "an integer"),
    ("rank_size", 2.0, TypeError, "1 <= rank_size <= 65536"),
    ("rank_size", True, TypeError, "1 <= rank_size <= 65536"),
    ("rank_root", -1, ValueError, "0 <= rank_root < rank_size <= 65536"),
    ("rank_root", 65536, ValueError, "0 <= rank_root < rank_size <= 65536"),
    ("rank_root", "0", TypeError, "0 <= rank_root < rank_size"),
    ("comm_domain", "d" * 97, ValueError, "at most 96 UTF-8 bytes"),
    ("comm_domain", "\u00e9" * 49, ValueError, "at most 96 UTF-8 bytes"),
    ("comm_domain", "job\0a", ValueError, "no NUL characters (the native library would cut"),
    ("comm_domain", 5, TypeError, "at most 96 UTF-8 bytes"),
    ("timeout", "0s", ValueError, "a positive duration of at most 30 days"),
    ("timeout", "-5s", ValueError, "a positive duration"),
    ("timeout", "500us", ValueError, "a positive duration"),
    ("timeout", "1.5s", ValueError, "a duration such as 120s"),
    ("timeout", "10 parsecs", ValueError, "a duration such as 120s"),
    ("timeout", "31d", ValueError, "at most 30 days (720h)"),
    ("timeout", "99999999999d", ValueError, "at most 30 days (720h)"),
    ("timeout", datetime.timedelta(0), ValueError, "a positive duration"),
    ("timeout", datetime.timedelta(days=30, milliseconds=1), ValueError, "at most 30 days"),
    ("timeout", -1, ValueError, "a positive duration"),
    ("timeout", 0, ValueError, "a positive duration"),
    ("timeout", 0.0001, ValueError, "a positive duration"),
    ("timeout", 30 * 86400 + 1, ValueError, "at most 30 days"),
    ("timeout", float("nan"), ValueError, "a number of seconds"),
    ("timeout", float("inf"), ValueError, "a number of seconds"),
    ("timeout", True, TypeError, "a number of seconds"),
    ("timeout", b"60s", TypeError, "datetime.timedelta"),
    ("source_rank_column", " ", ValueError, "a non-blank column name"),
    ("source_rank_column", 0, TypeError, "a non-blank column name"),
    ("resource_name", "", ValueError, "a Spark resource name"),
    ("resource_name", 3, TypeError, "a Spark resource name"),
    ("retryable", "true", TypeError, "True or False"),
    ("retryable", 1, TypeError, "True or False"),
    ("host_transport", "udp", ValueError, "auto, tcp or staging"),
    ("host_transport", b"tcp", TypeError, "auto, tcp or staging"),
    ("inject_failure", "x", ValueError, '"RANK" or "RANK:ATTEMPT"'),
    ("inject_failure", "1:", ValueError, '"RANK" or "RANK:ATTEMPT"'),
    ("inject_failure", "9999999999", ValueError, "each at most 9 digits"),
    ("inject_failure", 1, TypeError, '"RANK" or "RANK:ATTEMPT"'),
]


@pytest.mark.parametrize(
    "name,value,error,allowed", BAD, ids=[f"{b[0]}={b[1]!r}"[:40] for b in BAD]
)
def test_a_bad_option_fails_before_any_job_naming_keyword_value_and_what_is_allowed(
    spark: SparkSession, name: str, value: Any, error: type, allowed: str
) -> None:
    df = spark.range(0, 4, 1, 2)
    jobs_before = _jobs(spark)

    with pytest.raises(error) as raised:
        npugather.all_gather_on_npu(df, **{name: value})
    with pytest.raises(error) as raised_by_method:
        df.allGatherOnNpu(**{name: value})

    for message in (str(raised.value), str(raised_by_method.value)):
        assert message.startswith(f"{name} = "), message
        assert (
            repr(value)[:20] in message or "NUL character" in message or "UTF-8 bytes" in message
        ), message
        assert allowed in message, message
    assert _jobs(spark) == jobs_before


def test_rank_root_must_be_below_the_ranks_of_the_partitions(spark: SparkSession) -> None:
    jobs_before = _jobs(spark)
    with pytest.raises(
        ValueError,
        match=r"rank_root = 2 is invalid; allowed: 0 <= rank_root"
        r" < rank_size \(2\)",
    ):
        spark.range(0, 4, 1, 2).allGatherOnNpu(rank_root=2)
    with pytest.raises(ValueError, match=r"rank_root = 3 .* < rank_size \(3\)"):
        spark.range(0, 4, 1, 2).allGatherOnNpu(rank_size=3, rank_root=3)
    assert _jobs(spark) == jobs_before


def test_a_source_rank_column_that_collides_with_an_input_column_is_refused(
    spark: SparkSession,
) -> None:
    df = spark.range(0, 4, 1, 2).withColumnRenamed("id", "Rank")
    with pytest.raises(
        npugather.InvalidOptionError,
        match="source_rank_column 'rank' collides with input column 'Rank'",
    ):
        df.allGatherOnNpu(source_rank_column="rank")
    assert df.allGatherOnNpu(source_rank_column="r").columns == ["r", "Rank"]


def test_unknown_keywords_are_an_error_listing_the_options(spark: SparkSession) -> None:
    df = spark.range(0, 4, 1, 2)
    with pytest.raises(
        TypeError,
        match="allGatherOnNpu\\(\\) got an unknown option 'rankSize';"
        " did you mean 'rank_size'\\? allowed: backend,"
        " rank_size, rank_root",
    ):
        df.allGatherOnNpu(rankSize=2)
    with pytest.raises(TypeError, match="'bakend'; did you mean 'backend'\\?"):
        df.allGatherOnNpu(bakend="host")
    with pytest.raises(TypeError, match="unexpected keyword argument 'rankSize'"):
        npugather.all_gather_on_npu(df, rankSize=2)
    with pytest.raises(TypeError, match="df = 3 \\(int\\) is invalid"):
        npugather.all_gather_on_npu(3)


GOOD: dict[str, Any] = dict(
    backend=" HCCL",
    rank_size=0,
    rank_root=0,
    comm_domain="d" * 96,
    timeout=" 5M",
    source_rank_column="r",
    resource_name="gpu",
    retryable=True,
    host_transport="Staging",
    inject_failure="3:1",
)


def test_every_keyword_reaches_the_jvm_as_its_option(spark: SparkSession) -> None:
    parameters = inspect.signature(npugather.all_gather_on_npu).parameters
    assert list(parameters)[1:] == list(_options.NAMES) == list(GOOD)
    assert all(p.default is None for name, p in parameters.items() if name != "df")
    jvm_map = spark.sparkContext._jvm.java.util.HashMap()
    for key, text in _options.to_jvm(GOOD).items():
        jvm_map.put(key, text)
    defaults = spark.sparkContext._jvm.io.npugather.spark.AllGatherOptions.defaults()
    chosen = getattr(defaults, "with")(jvm_map)  # `with` is a Python keyword
    assert chosen.toString() == (
        "AllGatherOptions{backend=hccl, commDomain='" + "d" * 96 + "', timeout=5m,"
        " sourceRankColumn=r, resourceName=gpu, retryable=true, hostTransport=STAGING,"
        " injectFailure=3:1}"
    )


def test_a_timeout_is_also_a_number_of_seconds_up_to_the_jvms_bound(spark: SparkSession) -> None:
    assert _options.to_jvm({"timeout": 60}) == {"npugather.timeout": "60s"}
    assert _options.to_jvm({"timeout": 0.5}) == {"npugather.timeout": "500ms"}
    longest = _options.to_jvm({"timeout": datetime.timedelta(days=30)})["npugather.timeout"]
    assert longest == "2592000s"
    df = spark.range(0, 4, 1, 2)
    assert "timeout=30d" in df.allGatherOnNpu(timeout=longest)._jdf.queryExecution().toString()
    jobs_before = _jobs(spark)
    with pytest.raises(
        ValueError,
        match=r"^timeout = '2592000001ms' is invalid; allowed: a"
        r" positive duration of at most 30 days \(720h\)",
    ):
        df.allGatherOnNpu(timeout="2592000001ms")
    with pytest.raises(ValueError, match=r"^timeout = -1 is invalid; allowed: a positive"):
        df.allGatherOnNpu(timeout=-1)
    assert _jobs(spark) == jobs_before
    assert df.allGatherOnNpu(timeout=30).count() == 8
    assert _jobs(spark) > jobs_before


def test_durations_read_as_written_not_in_javas_iso_form(spark: SparkSession) -> None:
    assert _options.to_jvm({"timeout": " 90s"}) == {"npugather.timeout": "90s"}
    plan = (
        spark.range(0, 4, 1, 2)
        .allGatherOnNpu(timeout="30s")
        ._jdf.queryExecution()
        .optimizedPlan()
        .toString()
    )
    assert "timeout=30s" in plan and "PT30S" not in plan, plan
    plan = (
        spark.range(0, 4, 1, 2)
        .allGatherOnNpu(timeout=0.25)
        ._jdf.queryExecution()
        .optimizedPlan()
        .toString()
    )
    assert "timeout=250ms" in plan, plan


def test_jvm_messages_name_options_as_python_keywords(spark: SparkSession) -> None:
    assert _options.python_words(
        "allGatherOnNpu needs 3 concurrent task slots; use fewer partitions (npugather.rankSize"
        " = 2, or df.repartition(2)) or more cores"
    ) == (
        "allGatherOnNpu needs 3 concurrent task slots; use fewer partitions (rank_size = 2, or"
        " df.repartition(2)) or more cores"
    )
    assert _options.python_words(
        "npugather.rankRoot = 3 is invalid; allowed: 0 <= rankRoot < rankSize (3)"
    ) == ("rank_root = 3 is invalid; allowed: 0 <= rank_root < rank_size (3)")
    # The session's settings keep the names the user wrote in the conf.
    conf = "spark.npugather.rankSize = x is invalid; allowed: an integer"
    assert _options.python_words(conf) == conf


def test_a_nul_in_comm_domain_is_refused_in_the_operators_words(spark: SparkSession) -> None:
    param = (
        spark.sparkContext._jvm.io.npugather.AllGatherParam.builder()
        .backend("host")
        .rankSize(2)
        .commDomain("job\0a")
        .build()
    )
    try:
        param.validate()
        raise AssertionError("the operator took a NUL in commDomain")
    except Exception as e:  # py4j's Py4JJavaError
        operator = str(e.java_exception.getMessage())
    assert operator.startswith("AllGatherParam.commDomain = ")
    with pytest.raises(ValueError) as raised:
        spark.range(0, 4, 1, 2).allGatherOnNpu(comm_domain="job\0a")
    assert str(raised.value) == "comm_domain" + operator[len("AllGatherParam.commDomain") :]


def test_a_bad_session_default_is_a_value_error_naming_the_conf_key(spark: SparkSession) -> None:
    with pytest.raises(
        npugather.InvalidOptionError,
        match="spark.npugather.timeout = 'soon' is invalid; allowed: a duration",
    ):
        spark.conf.set("spark.npugather.timeout", "soon")
    assert_a_misspelled_session_setting_is_refused(spark)


def test_help_shows_every_keyword_with_its_default(spark: SparkSession) -> None:
    text = inspect.getdoc(npugather.all_gather_on_npu) or ""
    assert "{keywords}" not in text
    for option in _options.OPTIONS:
        assert f"{option.name}:" in text
    for name, default in [
        ("backend", "'host'"),
        ("rank_size", "0"),
        ("comm_domain", "''"),
        ("timeout", "'120s'"),
        ("retryable", "False"),
        ("host_transport", "'auto'"),
    ]:
        entry = re.split(r"\n    (?=\S)", text[text.index(f"{name}:") :])[0]
        assert f"Default ``{default}``." in " ".join(entry.split()), entry
    method_doc = inspect.getdoc(npugather.dataframe._method)
    assert "df.allGatherOnNpu(**options)" in method_doc
    assert list(inspect.signature(npugather.dataframe._method).parameters)[1:] == list(
        _options.NAMES
    )


def _jobs(spark: SparkSession) -> int:
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(None))
