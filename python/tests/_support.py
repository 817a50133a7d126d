"""What both test suites share: ``tests/`` (classic sessions) and ``tests_connect/`` (a Spark
Connect session) start their sessions alike, run the documentation's code blocks as written, and
expect the same refusals. Importable from both (``pythonpath`` in pyproject.toml)."""

from __future__ import annotations

import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import npugather

ROOT = Path(__file__).resolve().parents[2]


def start_session(builder: SparkSession.Builder, app_name: str) -> SparkSession:
    """A session of ``builder`` (a local master, or a local Connect server with ``remote``) with
    the connector's jars (``npugather.configure``), no UI, UTC and 4 shuffle partitions."""
    configured = (
        builder.appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "4")
    )
    return npugather.configure(configured).getOrCreate()


def code_blocks(document: Path, language: str, section: str | None = None) -> list[str]:
    """The ``language`` code blocks of ``document`` as written, in order; only those of
    ``section`` (a heading line such as ``## Spark Connect``, up to the next ``## `` heading)
    when it is given."""
    text = document.read_text()
    if section is not None:
        text = text[text.index(section + "\n") :]
        end = text.find("\n## ", 1)
        text = text if end < 0 else text[:end]
    return re.findall(rf"```{language}\n(.*?)```", text, re.DOTALL)


def assert_a_misspelled_session_setting_is_refused(spark: SparkSession) -> None:
    """A session setting the connector does not know, set by mistake, fails the next gather with
    the key as written and the nearest setting, on a classic session as on a Connect one."""
    spark.conf.set("spark.npugather.timout", "60s")
    try:
        with pytest.raises(
            npugather.InvalidOptionError,
            match="spark.npugather.timout is not a setting of NpuGather; did you"
            " mean spark.npugather.timeout\\?",
        ):
            spark.range(0, 4, 1, 2).allGatherOnNpu()
    finally:
        spark.conf.unset("spark.npugather.timout")


def venv_installing(base: Path, requirement: str, cwd: Path, env: dict[str, str]) -> Path:
    """The python of a fresh venv under ``base`` into which ``requirement`` (a wheel, or a source
    folder as a user names it, ``./python[tensors]``, from ``cwd``) is installed as pip installs
    it, without its dependencies or an index: they come from this interpreter's environment,
    which the venv sees after its own packages (a .pth file), so nothing is downloaded."""
    venv = base / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, env=env, timeout=300
    )
    python = venv / "bin" / "python"
    # A source folder is built with this environment's setuptools (no build isolation).
    (purelib_of(python) / "test-interpreter-packages.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n"
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--no-index",
            "--no-build-isolation",
            "--ignore-installed",  # even when this environment has the package too
            "--disable-pip-version-check",
            "-q",
            requirement,
        ],
        check=True,
        cwd=cwd,
        env=env,
        timeout=300,
    )
    return python


def purelib_of(python: Path) -> Path:
    """Where ``python`` installs pure-Python packages."""
    return Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            text=True,
            capture_output=True,
            timeout=60,
        ).stdout.strip()
    )
