"""The commands the README and docs/operations.md show, run as users run them."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import pytest
from _support import ROOT, code_blocks, purelib_of, venv_installing

import npugather

EXAMPLE = ROOT / "examples" / "python" / "feature_sharding.py"
# Small enough for CI; the same pipeline as the defaults.
SMALL = ["--items", "3000", "--dim", "16", "--queries", "60", "--top-k", "5", "--check", "6"]


def _run(command, tmp_path: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    return subprocess.run(
        [str(c) for c in command],
        cwd=tmp_path,
        env=env,
        text=True,
        capture_output=True,
        timeout=timeout,
    )


def test_python_m_npugather_jars_lists_the_jars_for_jars_option(tmp_path: Path) -> None:
    result = _run([sys.executable, "-m", "npugather", "jars"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().split(",") == npugather.jars()
    assert all(Path(jar).is_file() for jar in npugather.jars())


def test_python_m_npugather_zip_writes_the_package_for_py_files(tmp_path: Path) -> None:
    result = _run([sys.executable, "-m", "npugather", "zip", "npugather.zip"], tmp_path)
    assert result.returncode == 0, result.stderr
    names = zipfile.ZipFile(tmp_path / "npugather.zip").namelist()
    assert "npugather/__init__.py" in names and "npugather/tensors.py" in names


def test_the_feature_sharding_example_matches_plain_spark(tmp_path: Path) -> None:
    result = _run(
        [sys.executable, EXAMPLE, "--master", "local[2]", "--output", tmp_path / "out", *SMALL],
        tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "check: 6/6 queries match plain Spark" in result.stdout
    assert "300 rows (60 queries x top-5)" in result.stdout


def test_the_readmes_pip_install_then_the_example_runs_from_the_installed_package(
    tmp_path: Path,
) -> None:
    # README: `pip install "./python[tensors]"`, then `python3 examples/python/feature_sharding.py`,
    # from the project's root: here a copy of python/'s sources, installed into a fresh venv as
    # written (its dependencies are this interpreter's), and the example run by that venv.
    package = ROOT / "python"
    root = tmp_path / "project"
    (root / "python").mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(package / name, root / "python" / name)
    shutil.copytree(
        package / "npugather",
        root / "python" / "npugather",
        ignore=shutil.ignore_patterns("__pycache__", "jars"),
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_HOME")}
    python = venv_installing(tmp_path, "./python[tensors]", root, env)
    env.update(PYSPARK_PYTHON=str(python), PYSPARK_DRIVER_PYTHON=str(python))
    where = subprocess.run(
        [str(python), "-c", "import npugather; print(npugather.__file__)"],
        cwd=root,
        env=env,
        text=True,
        capture_output=True,
        timeout=60,
    )
    assert where.stdout.startswith(str(purelib_of(python))), where.stdout + where.stderr

    result = subprocess.run(
        [str(python), EXAMPLE, "--master", "local[2]", "--output", tmp_path / "out", *SMALL],
        cwd=root,
        env=env,
        text=True,
        capture_output=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "check: 6/6 queries match plain Spark" in result.stdout, result.stdout


def test_the_examples_sql_scoring_writes_the_recommendations_of_its_arrays(tmp_path: Path) -> None:
    first = _run(
        [
            sys.executable,
            EXAMPLE,
            "--master",
            "local[2]",
            "--output",
            tmp_path / "arrays",
            "--keep",
            *SMALL,
        ],
        tmp_path,
    )
    assert first.returncode == 0, first.stdout + first.stderr
    gathered = "gathered            6000 rows on all ranks (3000 items x 2 ranks)"
    assert gathered in first.stdout, first.stdout
    second = _run(
        [
            sys.executable,
            EXAMPLE,
            "--master",
            "local[2]",
            "--scoring",
            "sql",
            "--items-path",
            tmp_path / "arrays" / "items",
            "--queries-path",
            tmp_path / "arrays" / "queries",
            "--output",
            tmp_path / "sql",
            "--top-k",
            "5",
            "--check",
            "6",
        ],
        tmp_path,
    )
    assert second.returncode == 0, second.stdout + second.stderr
    assert "with SQL (the ALLGATHER join hint)" in second.stdout
    assert "check: 6/6 queries match plain Spark" in second.stdout
    assert gathered in second.stdout, second.stdout  # the figures of the hinted join's gather
    import pyarrow.parquet as pq

    def rows(path: Path) -> list:
        table = pq.read_table(path).sort_by([("query_id", "ascending"), ("rank", "ascending")])
        return table.to_pylist()

    arrays = rows(tmp_path / "arrays" / "recommendations")
    assert len(arrays) == 300
    assert rows(tmp_path / "sql" / "recommendations") == arrays


def test_the_examples_bad_inputs_are_one_line_and_exit_2_before_any_data(tmp_path: Path) -> None:
    missing = _run(
        [
            sys.executable,
            EXAMPLE,
            "--items-path",
            tmp_path / "nope",
            "--queries-path",
            tmp_path / "nope",
        ],
        tmp_path,
    )
    assert missing.returncode == 2, missing.stdout + missing.stderr
    assert missing.stderr.strip().splitlines() == [
        f"error: --items-path = '{tmp_path / 'nope'}': no such file or directory"
        " (--help lists the options)"
    ]
    too_many = _run(
        [
            sys.executable,
            EXAMPLE,
            "--master",
            "local[2]",
            "--ranks",
            "3",
            "--output",
            tmp_path / "out",
            *SMALL,
        ],
        tmp_path,
    )
    assert too_many.returncode == 2, too_many.stdout + too_many.stderr
    lines = [line for line in too_many.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and "--ranks = 3" in lines[0] and "Traceback" not in too_many.stderr
    assert not (tmp_path / "out" / "items").exists(), "data generated before the slot check"


def test_the_example_runs_under_spark_submit_with_jars_and_py_files(tmp_path: Path) -> None:
    # docs/operations.md's command, on a local master instead of spark://<master>:7077.
    submit = Path(sys.executable).parent / "spark-submit"
    submit = submit if submit.exists() else Path(shutil.which("spark-submit") or "spark-submit")
    _run([sys.executable, "-m", "npugather", "zip", "npugather.zip"], tmp_path)
    result = _run(
        [
            submit,
            "--master",
            "local[2]",
            "--jars",
            ",".join(npugather.jars()),
            "--py-files",
            "npugather.zip",
            "--conf",
            "spark.sql.extensions=io.npugather.spark.NpuGatherExtensions",
            EXAMPLE,
            "--ranks",
            "2",
            "--output",
            tmp_path / "out",
            *SMALL,
        ],
        tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "check: 6/6 queries match plain Spark" in result.stdout


@pytest.mark.timeout(1800)
def test_the_readmes_example_command_runs_as_written(tmp_path: Path) -> None:
    # README: `python3 examples/python/feature_sharding.py`, its defaults (100000 items x 64,
    # 2000 queries) on local[*]: about 5 minutes on two busy cores.
    result = _run([sys.executable, EXAMPLE], tmp_path, timeout=1500)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "check: 20/20 queries match plain Spark" in result.stdout, result.stdout
    assert "Traceback" not in result.stderr


def test_the_examples_help_lists_the_java_jobs_options(tmp_path: Path) -> None:
    result = _run([sys.executable, EXAMPLE, "--help"], tmp_path)
    assert result.returncode == 0, result.stderr
    for flag in (
        "--items-path",
        "--queries-path",
        "--master",
        "--ranks",
        "--backend",
        "--top-k",
        "--scoring",
        "--keep",
        "--output",
        "--timeout",
        "--check",
    ):
        assert flag in result.stdout, flag


def test_the_pyspark_sections_python_runs_as_written(tmp_path: Path) -> None:
    blocks = code_blocks(ROOT / "docs" / "operations.md", "python", "## PySpark")
    assert len(blocks) == 1, blocks
    script = tmp_path / "notebook.py"
    script.write_text(
        blocks[0]
        + textwrap.dedent("""
        rows = spark.range(0, 8, 1, 4).allGatherOnNpu().collect()
        assert len(rows) == 32, rows
        print("notebook ok")
        """)
    )
    result = _run([sys.executable, script], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "notebook ok" in result.stdout


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("localhost", 0))
        return int(probe.getsockname()[1])


def test_a_connect_server_started_as_the_docs_show_gathers_for_a_remote_client(
    tmp_path: Path,
) -> None:
    # docs/operations.md, "A server of your own": its command as written, with a SPARK_HOME whose
    # sbin/start-connect-server.sh runs the server as Spark's script does (spark-submit of
    # SparkConnectServer), in the foreground and on a free port; then a client of sc://.
    blocks = [
        b
        for b in code_blocks(ROOT / "docs" / "operations.md", "bash", "## Spark Connect")
        if "start-connect-server.sh" in b
    ]
    assert len(blocks) == 1, blocks
    port = _free_port()
    submit = Path(sys.executable).parent / "spark-submit"
    submit = submit if submit.exists() else Path(shutil.which("spark-submit") or "spark-submit")
    sbin = tmp_path / "spark" / "sbin"
    sbin.mkdir(parents=True)
    server_script = sbin / "start-connect-server.sh"
    server_script.write_text(
        "#!/usr/bin/env bash\n"
        "unset SPARK_HOME  # this folder is no Spark distribution: spark-submit finds its own\n"
        f'exec "{submit}" --class org.apache.spark.sql.connect.service.SparkConnectServer'
        f' --master "local[2]" --conf spark.ui.enabled=false'
        f' --conf spark.connect.grpc.binding.port={port} "$@"\n'
    )
    server_script.chmod(0o755)
    env = dict(
        os.environ,
        SPARK_HOME=str(tmp_path / "spark"),
        PYSPARK_PYTHON=sys.executable,
        # `python3` of the command: this interpreter, whose package lists the jars.
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    log = (tmp_path / "server.log").open("w")
    server = subprocess.Popen(
        ["bash", "-c", blocks[0]],
        cwd=tmp_path,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300
        while True:
            assert server.poll() is None, (tmp_path / "server.log").read_text()
            with socket.socket() as probe:
                if probe.connect_ex(("localhost", port)) == 0:
                    break
            assert time.monotonic() < deadline, (tmp_path / "server.log").read_text()
            time.sleep(1)
        client = tmp_path / "client.py"
        client.write_text(
            textwrap.dedent(f"""\
            import npugather
            from pyspark.sql import SparkSession
            spark = SparkSession.builder.remote("sc://localhost:{port}").getOrCreate()
            rows = spark.range(0, 4, 1, 2).allGatherOnNpu(timeout="60s").collect()
            assert sorted((r.source_rank, r.id) for r in rows) == sorted(
                [(i // 2, i) for i in range(4)] * 2), rows
            print("remote ok", len(rows))
            """)
        )
        result = _run([sys.executable, client], tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "remote ok 8" in result.stdout
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait(timeout=60)
        log.close()
