"""submit.sh as users run it locally (on a cluster: tests/cluster/)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import user_shell_env

ROOT = Path(__file__).resolve().parents[1]


def _submit(*args: str, timeout: int = 300, env: dict | None = None):
    full_env = {**os.environ, "SPARKFIELD_PYTHON": sys.executable, **(env or {})}
    return subprocess.run([str(ROOT / "submit.sh"), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env=full_env)


def test_list_and_help():
    listed = _submit("--list")
    assert listed.returncode == 0 and "coffee_shops" in listed.stdout
    helped = _submit("coffee_shops", "--help")
    assert helped.returncode == 0
    for flag in ("--crimes", "--grid-step-m", "--exclude-m", "--sample", "--profile"):
        assert flag in helped.stdout


@pytest.mark.parametrize("args,message", [
    (["no_such_job"], "unknown job"),
    (["coffee_shops", "--top", "many"], "invalid int value"),
    (["coffee_shops", "--exclude-m", "theft"], "expected NAME=METRES"),
    (["coffee_shops", "--profile", "moon"], "unknown profile"),
])
def test_bad_flags_exit_2_with_a_message(args, message):
    res = _submit(*args)
    assert res.returncode == 2, res.stderr[-2000:]
    assert message in res.stdout + res.stderr  # spark-submit merges the two


def test_a_python_without_pyspark_is_one_clear_line(tmp_path):
    """submit.sh finds Spark through the Python it runs: one without pyspark says so."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")],
                   check=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if k != "SPARK_HOME"}
    res = subprocess.run([str(ROOT / "submit.sh"), "coffee_shops", "--dry-run"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60,
                         env={**env, "SPARKFIELD_PYTHON": str(tmp_path / "bare/bin/python")})
    assert res.returncode == 1
    assert res.stderr.strip() == (f"error: no pyspark for {tmp_path}/bare/bin/python: run "
                                  "`make venv` (or set SPARK_HOME)")


def test_missing_input_file_exits_2(tmp_path):
    res = _submit("coffee_shops", "--crimes", str(tmp_path / "nope.csv"),
                  "--output", str(tmp_path / "out"))
    assert res.returncode == 2, res.stderr[-3000:]
    assert "input not found" in res.stdout + res.stderr
    assert not (tmp_path / "out").exists()


def test_missing_packed_environment_is_a_clear_error(tmp_path):
    res = _submit("coffee_shops", "--python-env", str(tmp_path / "nope.tar.gz"))
    assert res.returncode == 2
    assert "make pack-env" in res.stderr and "nope.tar.gz" in res.stderr


def test_the_quick_profile_starts_the_driver_jvm_with_c1_only_and_runs(tmp_path):
    """``--profile local,quick`` (docs/operations.md): the JVM option reaches spark-submit,
    which applies it when it starts the driver, and the job runs with it."""
    dry = _submit("coffee_shops", "--profile", "local,quick", "--dry-run")
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert "spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1" in dry.stdout.splitlines()
    out = tmp_path / "out"
    res = _submit("coffee_shops", "--profile", "local,quick", "--output", str(out),
                  "--grid-step-m", "50", "--top", "3")
    assert res.returncode == 0, res.stderr[-3000:]
    assert len(pd.read_csv(out / "top_locations.csv")) == 3


@pytest.mark.heavy
def test_the_driver_jvm_writes_its_class_archive_once_and_maps_it_after(tmp_path):
    """A local submit on the bundled data. The first run writes build/jvm/<fingerprint>.jsa
    as the JVM exits (kept because the run succeeded); the next run's driver JVM maps it, as
    Java's own class-sharing log shows. A failed run keeps no archive."""
    jvm = ROOT / "build" / "jvm"
    for f in jvm.glob("*"):
        f.unlink()
    bad = _submit("coffee_shops", "--output", str(tmp_path / "bad"), "--grid-step-m", "0")
    assert bad.returncode != 0
    assert "writes its class archive" in bad.stderr
    assert list(jvm.glob("*")) == []  # neither the archive nor its partial file

    first = _submit("coffee_shops", "--output", str(tmp_path / "one"), "--grid-step-m", "50",
                    "--top", "3")
    assert first.returncode == 0, first.stderr[-3000:]
    assert "3 top locations" in first.stdout and str(tmp_path / "one") in first.stdout
    assert len(pd.read_csv(tmp_path / "one" / "top_locations.csv")) == 3
    assert "writes its class archive" in first.stderr
    archives = list(jvm.glob("*"))
    assert len(archives) == 1 and archives[0].suffix == ".jsa"
    assert archives[0].stat().st_size > 10_000_000

    log = tmp_path / "cds.log"
    second = _submit("coffee_shops", "--output", str(tmp_path / "two"), "--grid-step-m", "50",
                     "--top", "3", env={"SPARK_SUBMIT_OPTS": f"-Xlog:cds=info:file={log}"})
    assert second.returncode == 0, second.stderr[-3000:]
    assert "class archive" not in second.stderr
    text = log.read_text()
    assert f"Opened archive {archives[0]}" in text and "Mapped dynamic region" in text
    assert pd.read_csv(tmp_path / "two" / "top_locations.csv").equals(
        pd.read_csv(tmp_path / "one" / "top_locations.csv"))


def test_a_users_spark_conf_directory_is_kept_and_no_archive_is_used(tmp_path):
    """With SPARK_CONF_DIR set (here: Spark defaults that name the app), Spark reads it as
    before; it is on the class path, so the driver JVM neither maps nor writes an archive."""
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text("spark.sparkfield.marker from-user-conf\n")
    log = tmp_path / "cds.log"
    res = _submit("coffee_shops", "--output", str(tmp_path / "out"), "--grid-step-m", "50",
                  "--top", "3", "--verbose",
                  env={"SPARK_CONF_DIR": str(conf),
                       "SPARK_SUBMIT_OPTS": f"-Xlog:cds=info:file={log}"})
    assert res.returncode == 0, res.stderr[-3000:]
    assert "spark.sparkfield.marker" in res.stdout + res.stderr  # the user's defaults read
    assert "class archive" not in res.stderr
    assert "Mapped dynamic region" not in log.read_text()


def test_spark_remote_in_the_environment_is_one_error_line_not_a_java_exception(tmp_path):
    """spark-submit refuses a master beside SPARK_REMOTE with a Java exception; submit.sh says
    what to do before it starts, and submits nothing."""
    res = _submit("coffee_shops", "--output", str(tmp_path / "out"),
                  env={"SPARK_REMOTE": "sc://127.0.0.1:15002"})
    assert res.returncode == 2, (res.stdout + res.stderr)[-3000:]
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr[-3000:]
    assert "SPARK_REMOTE=sc://127.0.0.1:15002" in lines[0] and "unset SPARK_REMOTE" in lines[0]
    assert "Exception" not in res.stdout + res.stderr
    assert not (tmp_path / "out").exists()


def _quick_start() -> list[str]:
    """The commands of README's quick start (its first code block)."""
    text = (ROOT / "README.md").read_text()
    block = text.split("## Quick start", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.strip()]


@pytest.mark.slow
def test_make_run_does_what_the_quick_start_says():
    """`make run` as README gives it, from the checkout: the ten best locations printed and
    the outputs README lists written (fresh ones: a run that fails leaves the old)."""
    assert _quick_start() == ["make run", "make test"]
    started = time.time()
    # from a user's shell: no Spark Connect address, no flags of a make running this test
    env = user_shell_env("SPARK_REMOTE")
    res = subprocess.run(["make", "run"], cwd=ROOT, capture_output=True, text=True,
                         timeout=900, env=env)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    printed = res.stdout + res.stderr
    assert "10 top locations" in printed and "outputs: out/coffee_shops/" in printed
    out = ROOT / "out" / "coffee_shops"
    for name in ("top_locations.csv", "map.png", "map.html", "run_report.json"):
        assert (out / name).stat().st_mtime >= started - 1, name
    top = pd.read_csv(out / "top_locations.csv")
    assert top["rank"].tolist() == list(range(1, 11))
    assert json.loads((out / "run_report.json").read_text())["status"] == "ok"
