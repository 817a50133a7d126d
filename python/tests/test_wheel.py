"""The wheel the build makes, installed as a user installs it: into a fresh venv, on a machine
without a Maven repository (HOME and MAVEN_REPOSITORY point at an empty directory)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from _support import ROOT, code_blocks, purelib_of, venv_installing

import npugather
from npugather import _version

WHEEL_DIR = os.environ.get("NPUGATHER_WHEEL_DIR")
needs_wheel = pytest.mark.skipif(
    not WHEEL_DIR,
    reason="NPUGATHER_WHEEL_DIR is unset: the python module's build sets it to"
    " the directory of the wheel it made (mvn -pl python verify)",
)


def pep440(maven_version: str) -> str:
    """X.Y.Z-SNAPSHOT is the development release X.Y.Z.dev0; a release keeps its version."""
    return re.sub(r"-SNAPSHOT$", ".dev0", maven_version)


def _pom_property(name: str) -> str:
    text = (ROOT / "pom.xml").read_text()
    match = re.search(rf"<{name}>([^<]+)</{name}>", text)
    assert match, name
    return match.group(1)


def test_the_package_version_is_the_jars_maven_version_in_pep_440() -> None:
    project = re.search(
        r"<artifactId>npugather-parent</artifactId>\s*<version>([^<]+)</version>",
        (ROOT / "pom.xml").read_text(),
    )
    assert project
    assert _version.CONNECTOR_VERSION == project.group(1)
    assert npugather.__version__ == pep440(project.group(1))
    assert pep440("0.1.0-SNAPSHOT") == "0.1.0.dev0" and pep440("1.2.3") == "1.2.3"
    assert _version.JAVACPP_VERSION == _pom_property("javacpp.version")
    assert _version.SPARK_VERSION == _pom_property("spark.version")
    wheel = f"npugather-{npugather.__version__}-py3-none-any.whl"
    for doc in (
        ROOT / "README.md",
        ROOT / "docs" / "operations.md",
        Path(__file__).parents[1] / "README.md",
    ):
        assert wheel in doc.read_text(), doc


def _wheel() -> Path:
    wheel = Path(WHEEL_DIR or "") / f"npugather-{npugather.__version__}-py3-none-any.whl"
    assert wheel.is_file(), f"no {wheel.name} in {WHEEL_DIR}"
    return wheel


@needs_wheel
def test_the_wheel_carries_the_connector_jar_and_complete_metadata() -> None:
    with zipfile.ZipFile(_wheel()) as wheel:
        names = wheel.namelist()
        jar_name = f"npugather/jars/npugather-spark_2.13-{_version.CONNECTOR_VERSION}-all.jar"
        assert jar_name in names
        assert "npugather/py.typed" in names
        assert "npugather/options.json" in names  # the keywords, made from the JVM's settings
        with wheel.open(jar_name) as jar_file, zipfile.ZipFile(jar_file) as jar:
            entries = set(jar.namelist())
        metadata = Parser().parsestr(
            wheel.read(f"npugather-{npugather.__version__}.dist-info/METADATA").decode()
        )
    assert "io/npugather/spark/NpuGather.class" in entries
    assert "io/npugather/spark/connect/NpuGatherRelationPlugin.class" in entries
    assert "org/bytedeco/javacpp/Loader.class" in entries
    assert "io/npugather/bridge/linux-x86_64/libjniNativeCore.so" in entries
    if os.environ.get("NPUGATHER_ARM64") == "required":
        assert "io/npugather/bridge/linux-arm64/libjniNativeCore.so" in entries
    assert metadata["Version"] == npugather.__version__
    assert metadata["Description-Content-Type"] == "text/markdown"
    assert (Path(__file__).parents[1] / "README.md").read_text().strip() in metadata.get_payload()
    assert "Typing :: Typed" in metadata.get_all("Classifier")
    requires = metadata.get_all("Requires-Dist")
    assert "pyspark<4.3,>=4.2.0" in requires
    # What the README's snippet imports comes with the extra its install line names.
    tensors = {r.split(";")[0].strip() for r in requires if 'extra == "tensors"' in r}
    assert tensors == {"numpy>=1.22", "pyarrow>=18.0.0", "pandas<3,>=2.2.0"}
    assert any('extra == "connect"' in r and r.startswith("pyspark[connect]") for r in requires)
    # The project's home, as the root pom.xml names it, and the operations guide among its docs.
    home = _pom_property("url")
    urls = dict(u.split(", ", 1) for u in metadata.get_all("Project-URL") or [])
    assert urls == {
        "Homepage": home,
        "Documentation": f"{home}/blob/main/docs/operations.md",
        "Source": home,
    }, urls


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """A venv with the wheel installed (no dependencies: PySpark, pyarrow and NumPy come from
    this interpreter's environment, after the venv's own packages, so nothing is downloaded),
    and an environment without the build's jars or a Maven repository."""
    base = tmp_path_factory.mktemp("wheel")
    empty = base / "empty"
    empty.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("NPUGATHER_JARS", "PYTHONPATH", "SPARK_HOME")
    }
    python = venv_installing(base, str(_wheel()), base, env)
    env.update(
        HOME=str(empty),
        MAVEN_REPOSITORY=str(empty / ".m2" / "repository"),
        PYSPARK_PYTHON=str(python),
        PYSPARK_DRIVER_PYTHON=str(python),
    )
    work = base / "work"
    work.mkdir()
    return dict(python=python, env=env, cwd=work, purelib=purelib_of(python))


def _run(
    installed: dict[str, object], command: list[object], **env: str
) -> subprocess.CompletedProcess:
    """``command`` in the venv's environment, with ``env`` added."""
    return subprocess.run(
        [str(c) for c in command],
        cwd=installed["cwd"],
        env=dict(installed["env"], **env),
        text=True,
        capture_output=True,
        timeout=600,
    )


def _readme_python_snippet() -> str:
    """The README's PySpark snippet, as written."""
    blocks = code_blocks(ROOT / "README.md", "python")
    snippet = [b for b in blocks if "npugather.configure" in b and "allGatherOnNpu" in b]
    assert len(snippet) == 1, "the README's Python snippet"
    return snippet[0]


@needs_wheel
def test_configure_finds_the_jar_in_the_installed_package(installed: dict[str, object]) -> None:
    result = _run(installed, [installed["python"], "-m", "npugather", "jars"])
    assert result.returncode == 0, result.stderr
    jars = result.stdout.strip().split(",")
    assert jars == [
        str(
            installed["purelib"]
            / "npugather"
            / "jars"
            / f"npugather-spark_2.13-{_version.CONNECTOR_VERSION}-all.jar"
        )
    ]


@needs_wheel
def test_the_readmes_python_snippet_runs_from_the_wheel(installed: dict[str, object]) -> None:
    items = 4 * 25
    setup = textwrap.dedent(f"""\
        import pyarrow as pa, pyarrow.parquet as pq
        pq.write_table(pa.table({{"id": list(range({items})),
                                  "embedding": [[float(i), 1.0] for i in range({items})]}}),
                       "items.parquet")
        """)
    check = textwrap.dedent(f"""
        import npugather as _n
        assert _n.__file__.startswith({str(installed["purelib"])!r}), _n.__file__
        norms = everywhere.mapInArrow(score, "norm double").collect()
        want = float(sum(i * i + 1 for i in range({items})))
        assert [r.norm for r in norms] == [want] * 4, norms
        assert everywhere.count() == 4 * {items}
        print("snippet ok")
        """)
    script = Path(str(installed["cwd"])) / "snippet.py"
    script.write_text(setup + _readme_python_snippet() + check)
    result = _run(installed, [installed["python"], script])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "snippet ok" in result.stdout


@needs_wheel
def test_spark_submit_runs_a_python_job_with_the_wheels_jar(installed: dict[str, object]) -> None:
    submit = Path(sys.executable).parent / "spark-submit"
    submit = submit if submit.exists() else Path(shutil.which("spark-submit") or "spark-submit")
    job = Path(str(installed["cwd"])) / "job.py"
    job.write_text(
        textwrap.dedent("""\
        from pyspark.sql import SparkSession
        import npugather
        spark = npugather.configure(SparkSession.builder).getOrCreate()
        rows = spark.range(0, 6, 1, 3).allGatherOnNpu().collect()
        assert [(r.source_rank, r.id) for r in rows] == [(i // 2, i) for i in range(6)] * 3, rows
        print("job ok", len(rows))
        spark.stop()
        """)
    )
    jars = _run(installed, [installed["python"], "-m", "npugather", "jars"]).stdout.strip()
    result = _run(
        installed,
        [submit, "--master", "local[3]", "--conf", "spark.ui.enabled=false", "--jars", jars, job],
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "job ok 18" in result.stdout


def _operations_connect_snippet() -> str:
    """The Python snippet of docs/operations.md's Spark Connect section, as written."""
    blocks = code_blocks(ROOT / "docs" / "operations.md", "python", "## Spark Connect")
    assert len(blocks) == 1, "the Spark Connect section's Python snippet"
    return blocks[0]


@needs_wheel
def test_the_spark_connect_snippet_runs_from_the_wheel(installed: dict[str, object]) -> None:
    check = textwrap.dedent("""
        assert type(gathered).__module__.startswith("pyspark.sql.connect."), type(gathered)
        rows = gathered.groupBy("source_rank").count().orderBy("source_rank").collect()
        assert [(r.source_rank, r["count"]) for r in rows] == [(r, 8) for r in range(4)], rows
        assert sorted(r.id for r in gathered.collect()) == sorted(list(range(8)) * 4)
        print("connect ok")
        spark.stop()
        """)
    script = Path(str(installed["cwd"])) / "connect_snippet.py"
    script.write_text(_operations_connect_snippet() + check)
    # SPARK_TESTING: an ephemeral port for the local server.
    result = _run(installed, [installed["python"], script], SPARK_TESTING="1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "connect ok" in result.stdout
    assert "|source_rank|count|" in result.stdout.replace(" ", "")


@needs_wheel
def test_the_packages_own_readme_python_runs_from_the_wheel(installed: dict[str, object]) -> None:
    # python/README.md, the wheel's description: its classic snippet, then its Spark Connect one
    # in a process of its own (a process builds one kind of session), after the same imports.
    blocks = code_blocks(Path(__file__).parents[1] / "README.md", "python")
    assert len(blocks) == 2, blocks
    classic, connect = blocks
    imports = classic[: classic.index("spark = ")]
    scripts = {
        "classic": classic + "assert gathered.count() == 32\nprint('classic ok')\n",
        "connect": imports
        + connect
        + "assert spark.range(0, 8, 1, 4).allGatherOnNpu().count() == 32\nprint('connect ok')\n",
    }
    for name, script in scripts.items():
        path = Path(str(installed["cwd"])) / f"readme_{name}.py"
        path.write_text(script)
        # SPARK_TESTING: an ephemeral port for a local server.
        result = _run(installed, [installed["python"], path], SPARK_TESTING="1")
        assert result.returncode == 0, result.stdout + result.stderr
        assert f"{name} ok" in result.stdout, result.stdout


def test_the_tensors_extra_asks_for_what_pyspark_supports() -> None:
    """The lower bounds are PySpark's own minimums (pyspark.sql.pandas.utils), and pandas stays
    below the major version PySpark warns about."""
    import inspect

    from pyspark.sql.pandas import utils

    pyproject = (Path(__file__).parents[1] / "pyproject.toml").read_text()
    extra = re.search(r"^tensors = \[(.*)\]$", pyproject, re.MULTILINE)
    assert extra, "the tensors extra"
    wanted = dict(re.findall(r'"(\w+)(>=[^"]+)"', extra.group(1)))
    for package in ("pandas", "pyarrow", "numpy"):
        source = inspect.getsource(getattr(utils, f"require_minimum_{package}_version"))
        minimum = re.search(rf'minimum_{package}_version = "([^"]+)"', source)
        assert minimum, package
        assert wanted[package].split(",")[0] == ">=" + minimum.group(1), (package, wanted)
    warned = re.search(
        r'LooseVersion\(pandas.__version__\) >= LooseVersion\("(\d+)',
        inspect.getsource(utils.require_minimum_pandas_version),
    )
    assert warned, "PySpark's warning about new pandas"
    assert wanted["pandas"].endswith(f",<{warned.group(1)}"), wanted
