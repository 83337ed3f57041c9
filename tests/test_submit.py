"""submit.sh as users run it: local spark-submit, and a real standalone cluster on loopback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pandas as pd
import pytest

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


def test_missing_input_file_exits_2(tmp_path):
    res = _submit("coffee_shops", "--crimes", str(tmp_path / "nope.csv"),
                  "--output", str(tmp_path / "out"))
    assert res.returncode == 2, res.stderr[-3000:]
    assert "input not found" in res.stdout + res.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_local_submit_on_bundled_data(tmp_path):
    out = tmp_path / "out"
    res = _submit("coffee_shops", "--output", str(out), "--grid-step-m", "20", "--top", "5")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "5 top locations" in res.stdout and str(out) in res.stdout
    top = pd.read_csv(out / "top_locations.csv")
    assert len(top) == 5


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, seconds: float = 60) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port}")


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    """A Spark standalone master and one worker on 127.0.0.1: (master URL, worker dir)."""
    import pyspark

    base = tmp_path_factory.mktemp("standalone")
    spark_home = Path(pyspark.__file__).parent
    spark_class = str(spark_home / "bin" / "spark-class")
    env = {**os.environ, "SPARK_HOME": str(spark_home), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_WORKER_DIR": str(base / "work"), "SPARK_LOG_DIR": str(base / "logs"),
           "SPARK_CONF_DIR": str(ROOT / "conf" / "spark")}
    port, ui, wport, wui = (_free_port() for _ in range(4))
    master_url = f"spark://127.0.0.1:{port}"
    logs = [open(base / n, "w") for n in ("master.log", "worker.log")]  # noqa: SIM115
    master = subprocess.Popen(
        [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
         "--port", str(port), "--webui-port", str(ui)], env=env, stdout=logs[0], stderr=logs[0])
    worker = None
    try:
        _wait_port(port)
        worker = subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.worker.Worker", master_url, "--host",
             "127.0.0.1", "--port", str(wport), "--webui-port", str(wui), "--cores", "2",
             "--memory", "3g"], env=env, stdout=logs[1], stderr=logs[1])
        _wait_port(wport)
        yield master_url, base / "work"
    finally:
        for proc in (worker, master):
            if proc is not None:
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
        for f in logs:
            f.close()


def _on_cluster(master_url: str, *args: str):
    return _submit(*args[:1], "--profile", "cluster", "--master", master_url,
                   "--conf", "spark.executor.memory=1g", "--conf", "spark.cores.max=2",
                   *args[1:], env={"SPARK_LOCAL_IP": "127.0.0.1"}, timeout=400)


@pytest.mark.cluster
def test_standalone_cluster_on_loopback(standalone, tmp_path):
    master_url, work = standalone
    out = tmp_path / "out"
    res = _on_cluster(master_url, "coffee_shops", "--output", str(out), "--grid-step-m", "20")
    assert res.returncode == 0, res.stderr[-4000:]
    top = pd.read_csv(out / "top_locations.csv")
    assert len(top) == 10
    # the executors were the standalone worker's, not a local master
    assert list(work.glob("app-*/*/stderr")), "no executor ran on the worker"
    local = _submit("coffee_shops", "--output", str(tmp_path / "local"), "--grid-step-m", "20")
    assert local.returncode == 0, local.stderr[-3000:]
    pd.testing.assert_frame_equal(top, pd.read_csv(tmp_path / "local" / "top_locations.csv"))


@pytest.mark.cluster
def test_packed_environment_gives_executors_their_packages(standalone, tmp_path, wiki_pages):
    """venv-pack archive of the text extra (lxml, bs4, nltk: native code included) shipped with
    --archives; the executors' Python is the unpacked ./environment/bin/python."""
    master_url, work = standalone
    env_tar = tmp_path / "env.tar.gz"
    packed = subprocess.run([str(ROOT / "scripts" / "pack_env.sh"), "--extras", "text",
                             "--output", str(env_tar), "--compress-level", "1"],
                            capture_output=True, text=True, timeout=600)
    assert packed.returncode == 0, packed.stderr[-3000:]
    with tarfile.open(env_tar) as tar:
        names = set(tar.getnames())
    assert "bin/python" in names and any(n.startswith("lib/python3.11/site-packages/lxml/")
                                         for n in names)
    assert not any("/pyspark/" in n or "/sparkfield/" in n for n in names)
    before = set(work.glob("app-*"))
    out = tmp_path / "out"
    res = _on_cluster(master_url, "bag_of_words", "--python-env", str(env_tar),
                      "--html-dir", str(wiki_pages), "--output", str(out))
    assert res.returncode == 0, res.stderr[-4000:]
    apps = set(work.glob("app-*")) - before
    assert len(apps) == 1
    (app,) = apps
    unpacked = list(app.glob("*/environment/bin/python"))
    assert unpacked, "the archive was not unpacked in the executor's directory"
    # same vocabulary as a local run on the driver's own environment
    local = _submit("bag_of_words", "--html-dir", str(wiki_pages),
                    "--output", str(tmp_path / "local"))
    assert local.returncode == 0, local.stderr[-3000:]
    pd.testing.assert_frame_equal(pd.read_csv(out / "vocabulary.csv"),
                                  pd.read_csv(tmp_path / "local" / "vocabulary.csv"))


def test_missing_packed_environment_is_a_clear_error(tmp_path):
    res = _submit("coffee_shops", "--python-env", str(tmp_path / "nope.tar.gz"))
    assert res.returncode == 2
    assert "make pack-env" in res.stderr and "nope.tar.gz" in res.stderr
