"""submit.sh hands spark-submit's own options to spark-submit (checked on the built command,
``--dry-run``; nothing is started)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _command(*args: str) -> list[str]:
    res = subprocess.run([str(ROOT / "submit.sh"), *args, "--dry-run"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "SPARKFIELD_PYTHON": sys.executable})
    assert res.returncode == 0, res.stderr
    return res.stdout.splitlines()


def _value(cmd: list[str], option: str) -> list[str]:
    return [cmd[i + 1] for i, a in enumerate(cmd) if a == option]


def test_spark_submit_options_go_to_spark_submit_and_job_flags_to_the_job():
    cmd = _command("coffee_shops", "--packages", "com.example:lib:1.0", "--jars", "a.jar,b.jar",
                   "--conf", "spark.x=1", "--driver-memory", "3g", "--executor-memory=5g",
                   "--top", "3", "--verbose", "--name", "nightly")
    app = cmd.index(str(ROOT / "jobs" / "coffee_shops.py"))
    before, after = cmd[:app], cmd[app + 1:]
    assert after == ["--top", "3"]  # only job flags reach the job
    assert _value(before, "--packages") == ["com.example:lib:1.0"]
    assert _value(before, "--jars") == ["a.jar,b.jar"]
    assert "spark.x=1" in _value(before, "--conf")
    assert _value(before, "--driver-memory") == ["3g"]
    assert _value(before, "--executor-memory") == ["5g"]
    assert "--verbose" in before
    # the user's --name comes after the generated one: spark-submit keeps the last
    assert _value(before, "--name") == ["sparkfield-coffee_shops", "nightly"]
    # a user --conf comes after the profile's, so it wins
    confs = _value(before, "--conf")
    assert confs.index("spark.x=1") == len(confs) - 1


def test_files_archives_and_py_files_join_the_shipped_lists():
    cmd = _command("coffee_shops", "--files", "extra.txt", "--py-files", "dep.zip",
                   "--archives", "data.tar.gz#data")
    files = _value(cmd, "--files")
    assert len(files) == 1 and files[0].endswith("coffee_shops.yaml,extra.txt")
    assert "base.yaml" in files[0]
    py_files = _value(cmd, "--py-files")
    assert len(py_files) == 1 and py_files[0].endswith("sparkfield.zip,dep.zip")
    assert _value(cmd, "--archives") == ["data.tar.gz#data"]


def test_stacked_profiles_ship_every_profile_file():
    cmd = _command("embed", "--profile", "cluster,gpu")
    files = _value(cmd, "--files")[0].split(",")
    assert [Path(f).name for f in files] == ["base.yaml", "cluster.yaml", "gpu.yaml",
                                              "embed.yaml"]
    confs = _value(cmd, "--conf")
    assert "spark.executor.resource.gpu.amount=1" in confs
    assert cmd[cmd.index("--master") + 1].startswith("spark://")
    assert cmd[-2:] == ["--profile", "cluster,gpu"]


def test_an_option_without_its_value_exits_2():
    res = subprocess.run([str(ROOT / "submit.sh"), "coffee_shops", "--packages"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60,
                         env={**os.environ, "SPARKFIELD_PYTHON": sys.executable})
    assert res.returncode == 2 and "--packages needs a value" in res.stderr


C1_ONLY = "spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1"


NO_AQE = "spark.sql.adaptive.enabled=false"


def test_a_small_input_gets_its_settings_and_the_users_driver_java_options_win(tmp_path):
    """The job's arguments reach the input's size; the user's driver Java options replace
    the small input's, whose other settings stay."""
    small = "tests/fixtures/process/running-example.xes"
    confs = _value(_command("process_mining", "--log", small), "--conf")
    assert C1_ONLY in confs and NO_AQE in confs
    big = tmp_path / "log.xes.gz"
    with big.open("wb") as f:
        f.truncate(7 * 2**20)  # 70 MiB as input: over conf/local.yaml's 64
    confs = _value(_command("process_mining", "--log", str(big)), "--conf")
    assert C1_ONLY not in confs and NO_AQE not in confs
    given = _command("process_mining", "--log", small, "--driver-java-options", "-Dx=1")
    assert not any("extraJavaOptions" in v for v in _value(given, "--conf"))
    assert NO_AQE in _value(given, "--conf")
    assert _value(given, "--driver-java-options") == ["-Dx=1"]
    conf = _command("process_mining", "--log", small,
                    "--conf", "spark.driver.extraJavaOptions=-Dy=2")
    assert [v for v in _value(conf, "--conf") if "extraJavaOptions" in v] == [
        "spark.driver.extraJavaOptions=-Dy=2"]
