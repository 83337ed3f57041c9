"""A shared-nothing Spark standalone cluster for the whole test session.

One master on 127.0.0.1 and two workers on 127.0.0.2 and 127.0.0.3 (distinct hosts to Spark:
shuffle blocks travel over the network). Each worker runs in its own mount namespace with a
private directory of its own (on disk, not in memory: packed environments are large) over /tmp
and a tmpfs over the checkout's libs/ conf/ jobs/ notebooks/ build/ out/ and .venv/ (Spark
itself is bind-mounted first), so its executors see only what spark-submit ships
(--py-files, --files, --archives) and the shared directory (outside /tmp, playing HDFS). Their
Python and third-party packages come from a packed environment (scripts/pack_env.sh), built
once and cached in build/ under a key of the extras' requirements.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HIDDEN = ("libs", "conf", "jobs", "notebooks", "build", "out", ".venv")
WORKER_HOSTS = ("127.0.0.2", "127.0.0.3")
BASE_EXTRAS = "geo,process,text"
NLP_EXTRAS = "nlp"


def pytest_collection_modifyitems(items):
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).parent == here:
            item.add_marker(pytest.mark.cluster)


def _requirements(extras: str) -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for e in extras.split(","):
        reqs += project["optional-dependencies"][e]
    return sorted(set(r for r in reqs if not r.lower().startswith("pyspark")))


def packed_env(extras: str) -> Path:
    """build/sparkfield-env-<extras>-<key>.tar.gz, packed once for these requirements by
    ``make pack-env``."""
    key = hashlib.sha256("\n".join([sys.version.split()[0], *_requirements(extras)])
                         .encode()).hexdigest()[:12]
    out = ROOT / "build" / f"sparkfield-env-{extras.replace(',', '-')}-{key}.tar.gz"
    if out.is_file():
        return out
    # as README tells users: `make pack-env` (the default extras) or `make pack-env EXTRAS=nlp`
    given = [] if extras == BASE_EXTRAS else [f"EXTRAS={extras}"]
    res = subprocess.run(["make", "-s", "-C", str(ROOT), "pack-env", *given,
                          f"PACK_ENV={out}", "PACK_ARGS=--compress-level 1"],
                         capture_output=True, text=True, timeout=1500)
    assert res.returncode == 0, f"packing {extras} failed:\n{res.stderr[-3000:]}"
    return out


def _free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _wait_port(host: str, port: int, proc: subprocess.Popen, log: Path,
               seconds: float = 240) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        with socket.socket() as s:
            if s.connect_ex((host, port)) == 0:
                return
        time.sleep(0.5)
    raise TimeoutError(f"nothing listening on {host}:{port}:\n{log.read_text()[-3000:]}")


@dataclass
class Cluster:
    master: str
    ui: str
    shared: Path
    env: Path  # packed geo,process,text environment
    workers: list[subprocess.Popen] = field(default_factory=list)
    _nlp_env: Path | None = None

    @property
    def nlp_env(self) -> Path:
        if self._nlp_env is None:
            self._nlp_env = packed_env(NLP_EXTRAS)
        return self._nlp_env

    def submit(self, job: str, *args: str, env_tar: Path | None = None,
               timeout: int = 600) -> subprocess.CompletedProcess:
        """``submit.sh JOB --profile cluster --master URL --python-env ENV ARGS``."""
        return run_submit(job, "--profile", "cluster", "--master", self.master,
                          "--python-env", str(env_tar or self.env), *args, timeout=timeout)

    def apps(self) -> list[dict]:
        with urllib.request.urlopen(f"{self.ui}/json/", timeout=10) as r:
            doc = json.loads(r.read().decode())
        return doc.get("activeapps", []) + doc.get("completedapps", [])

    def worker_files(self, pattern: str) -> list[str]:
        """Paths matching ``pattern`` under /tmp as each worker sees them (its own /tmp)."""
        found = []
        for w in self.workers:
            res = subprocess.run(["nsenter", "-t", str(w.pid), "-m", "sh", "-c",
                                  f"ls -d {pattern} 2>/dev/null || true"],
                                 capture_output=True, text=True, timeout=30)
            found += [line for line in res.stdout.splitlines() if line]
        return found


def run_submit(*args: str, timeout: int = 600, cwd: Path = ROOT,
               env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **(env or {}), "SPARKFIELD_PYTHON": sys.executable,
           "SPARK_LOCAL_IP": "127.0.0.1"}
    env.pop("PYSPARK_PYTHON", None)
    return subprocess.run([str(ROOT / "submit.sh"), *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env=env)


def shared_root() -> Path:
    """The directory all nodes share: outside /tmp (each worker has its own /tmp)."""
    base = Path(os.environ.get("SPARKFIELD_CLUSTER_SHARED", "/var/tmp"))
    base.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix="sparkfield-shared-", dir=base))
    assert not str(path.resolve()).startswith(tempfile.gettempdir().rstrip("/") + "/")
    return path


def _stop(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    os.kill(proc.pid, 15)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, 9)
        proc.wait(timeout=30)


WORKER_SCRIPT = r"""
set -eu
mount --bind "$PRIVATE_TMP" /tmp
mkdir -p /tmp/spark /tmp/work /tmp/conf
mount --bind "$SPARK_HOME" /tmp/spark
for d in $HIDE; do mkdir -p "$ROOT/$d" 2>/dev/null || true; mount -t tmpfs tmpfs "$ROOT/$d"; done
export SPARK_HOME=/tmp/spark SPARK_WORKER_DIR=/tmp/work SPARK_LOG_DIR=/tmp/logs
export SPARK_CONF_DIR=/tmp/conf
cd /tmp
exec /tmp/spark/bin/spark-class org.apache.spark.deploy.worker.Worker "$@"
"""


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    """Master + two shared-nothing workers (1 core, 2 GiB each) + the packed environment."""
    import pyspark

    assert shutil.which("unshare") and shutil.which("nsenter"), "util-linux unshare/nsenter"
    assert os.geteuid() == 0, "the worker mount namespaces need root"
    spark_home = Path(pyspark.__file__).parent
    if any(Path("/tmp") in (p, *p.parents) for p in (ROOT.resolve(), spark_home.resolve())):
        pytest.fail(f"the checkout {ROOT} or its Spark {spark_home} is under /tmp, which every "
                    "worker replaces with a private /tmp: clone it elsewhere to run the "
                    "cluster tests", pytrace=False)
    env_tar = packed_env(BASE_EXTRAS)
    for d in ("build", "out"):
        (ROOT / d).mkdir(exist_ok=True)
    logs = tmp_path_factory.mktemp("cluster-logs")
    base_env = {**os.environ, "SPARK_HOME": str(spark_home), "SPARK_LOG_DIR": str(logs),
                "SPARK_CONF_DIR": str(ROOT / "conf" / "spark")}
    base_env.pop("PYSPARK_PYTHON", None)
    port, ui = _free_port(), _free_port()
    master_url = f"spark://127.0.0.1:{port}"
    shared = shared_root()
    procs: list[subprocess.Popen] = []
    files = []
    nodes: list[Path] = []  # each worker's private /tmp
    try:
        mlog = logs / "master.log"
        files.append(open(mlog, "w"))  # noqa: SIM115
        master = subprocess.Popen(
            [str(spark_home / "bin" / "spark-class"), "org.apache.spark.deploy.master.Master",
             "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui)],
            env={**base_env, "SPARK_LOCAL_IP": "127.0.0.1"}, stdout=files[-1],
            stderr=subprocess.STDOUT)
        procs.append(master)
        _wait_port("127.0.0.1", port, master, mlog)
        workers = []
        for host in WORKER_HOSTS:
            wlog = logs / f"worker-{host}.log"
            files.append(open(wlog, "w"))  # noqa: SIM115
            wport, wui = _free_port(host), _free_port(host)
            private = Path(tempfile.mkdtemp(prefix=f"sparkfield-node-{host}-",
                                            dir=shared.parent))
            nodes.append(private)
            worker = subprocess.Popen(
                ["unshare", "-m", "--propagation", "private", "bash", "-c", WORKER_SCRIPT,
                 "worker", master_url, "--host", host, "--port", str(wport),
                 "--webui-port", str(wui), "--cores", "1", "--memory", "2g"],
                env={**base_env, "SPARK_LOCAL_IP": host, "ROOT": str(ROOT),
                     "HIDE": " ".join(HIDDEN), "PRIVATE_TMP": str(private),
                     # finished applications' folders (each holds an unpacked environment)
                     "SPARK_WORKER_OPTS": "-Dspark.worker.cleanup.enabled=true "
                                          "-Dspark.worker.cleanup.interval=30 "
                                          "-Dspark.worker.cleanup.appDataTtl=30"},
                stdout=files[-1], stderr=subprocess.STDOUT)
            procs.append(worker)
            workers.append(worker)
            _wait_port(host, wport, worker, wlog)
        c = Cluster(master=master_url, ui=f"http://127.0.0.1:{ui}", shared=shared, env=env_tar,
                    workers=workers)
        deadline = time.time() + 60
        while time.time() < deadline:
            with urllib.request.urlopen(f"{c.ui}/json/", timeout=10) as r:
                alive = [w for w in json.loads(r.read().decode())["workers"]
                         if w["state"] == "ALIVE"]
            if len(alive) == len(WORKER_HOSTS):
                break
            time.sleep(0.5)
        else:
            raise TimeoutError("the workers did not register with the master")
        yield c
    finally:
        for proc in reversed(procs):
            _stop(proc)
        for f in files:
            f.close()
        shutil.rmtree(shared, ignore_errors=True)
        for node in nodes:
            shutil.rmtree(node, ignore_errors=True)


def app_hosts(cluster: Cluster, before: set[str]) -> list[dict]:
    """The applications started since ``before`` (ids)."""
    return [a for a in cluster.apps() if a["id"] not in before]


def read_csv(path: Path):
    import pandas as pd

    return pd.read_csv(path)


def strip_ansi(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)
