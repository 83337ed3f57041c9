"""The example Airflow DAG, loaded by real Airflow (its own environment, no scheduler, no
database): structure, the spark-submit command each task would run compared with the conf
profile, every job flag accepted by the job's own parser, and two tasks' commands run for real."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from sparkfield.deploy.submit import ENV_PYTHON, submit_spec
from tests.conftest import job_parser

ROOT = Path(__file__).resolve().parents[1]
DAGS = ROOT / "deploy" / "airflow" / "dags"
AIRFLOW_PY = Path(os.environ.get("SPARKFIELD_AIRFLOW_PYTHON",
                                 ROOT / ".venv-airflow" / "bin" / "python"))
DATE = "2026-11-21"
MASTER = "spark://127.0.0.1:7077"
EDGES = {"package": [], "coffee_shops": ["package"], "event_log": ["package"],
         "bag_of_words": ["package"], "process_mining": ["event_log"], "embed": ["bag_of_words"]}


def _probe(tmp: Path, **env: str) -> dict:
    assert AIRFLOW_PY.exists(), (
        f"no Airflow environment at {AIRFLOW_PY}: `make test` builds it "
        "(deploy/airflow/requirements.txt)")
    dest = tmp / "dag.json"
    full_env = {"PATH": os.environ["PATH"], "HOME": str(tmp), "AIRFLOW_HOME": str(tmp / "af"),
                "SPARKFIELD_HOME": str(ROOT), "PYTHONPATH": str(ROOT / "libs"),
                "SPARKFIELD_DATA": str(tmp / "data"), "SPARKFIELD_PROFILE": "cluster",
                "AIRFLOW_CONN_SPARK_SPARKFIELD": MASTER, **env}
    res = subprocess.run([str(AIRFLOW_PY), str(ROOT / "tests" / "airflow_probe.py"), str(DAGS),
                          DATE, str(dest)], env=full_env, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    return json.loads(dest.read_text())


def _parse_command(cmd: list[str]) -> dict:
    """spark-submit options of the hook's command, the application and its arguments."""
    assert cmd[0] == "spark-submit"
    out: dict = {"conf": {}}
    i = 1
    while i < len(cmd) and cmd[i].startswith("--"):
        key, value = cmd[i][2:], cmd[i + 1]
        if key == "conf":
            k, _, v = value.partition("=")
            out["conf"][k] = v
        else:
            out[key] = value
        i += 2
    out["application"], out["args"] = cmd[i], cmd[i + 1:]
    return out


@pytest.fixture(scope="module")
def dag(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("airflow")
    out = _probe(tmp)
    assert out["import_errors"] == {}
    assert list(out["dags"]) == ["sparkfield_nightly"]
    return {**out["dags"]["sparkfield_nightly"], "data_root": str(tmp / "data")}


def test_schedule_and_dependencies(dag):
    assert "10 2 * * *" in dag["schedule"] and "UTC" in dag["schedule"]
    assert dag["catchup"] is False and dag["max_active_runs"] == 1
    assert {t: i["upstream"] for t, i in dag["tasks"].items()} == EDGES
    assert all(i["retries"] == 2 for i in dag["tasks"].values())
    assert dag["tasks"]["package"]["operator"] == "BashOperator"
    assert {i["operator"] for t, i in dag["tasks"].items() if t != "package"} == {
        "SparkSubmitOperator"}


def test_spark_tasks_submit_what_the_profile_says(dag):
    for job, info in dag["tasks"].items():
        if job == "package":
            continue
        cmd = _parse_command(info["command"])
        spec = submit_spec(job, "cluster", ROOT / "conf")
        assert info["conn_id"] == "spark_sparkfield"
        assert cmd["master"] == MASTER, job  # from the Airflow connection
        assert cmd["conf"] == spec.conf, job
        assert cmd["files"].split(",") == spec.files
        assert cmd["deploy-mode"] == spec.deploy_mode
        assert cmd["py-files"] == str(ROOT / "build" / "sparkfield.zip")
        assert cmd["name"] == f"{spec.name}-{DATE}"
        assert "archives" not in cmd
        assert Path(cmd["application"]) == ROOT / "jobs" / f"{job}.py"
        assert cmd["args"][:2] == ["--profile", "cluster"]
        assert cmd["args"][-2:] == ["--run-date", DATE]  # {{ ds }} rendered
        args = job_parser(job).parse_args(cmd["args"])  # every flag is one the job knows
        assert args.run_date == DATE and args.output.startswith(dag["data_root"])
    # downstream tasks read the partition their upstream wrote for the same date
    pm = _parse_command(dag["tasks"]["process_mining"]["command"])["args"]
    ev = _parse_command(dag["tasks"]["event_log"]["command"])["args"]
    log = pm[pm.index("--log") + 1]
    assert log == f"{ev[ev.index('--output') + 1]}/run_date={DATE}/events"


def test_packed_environment_reaches_the_tasks(tmp_path):
    env_tar = tmp_path / "env.tar.gz"
    env_tar.write_bytes(b"")
    dag = _probe(tmp_path, SPARKFIELD_PYTHON_ENV=str(env_tar))["dags"]["sparkfield_nightly"]
    cmd = _parse_command(dag["tasks"]["embed"]["command"])
    assert cmd["archives"] == f"{env_tar}#environment"
    assert cmd["conf"]["spark.pyspark.python"] == ENV_PYTHON


def test_a_missing_packed_environment_is_an_import_error(tmp_path):
    out = _probe(tmp_path, SPARKFIELD_PYTHON_ENV=str(tmp_path / "missing.tar.gz"))
    assert out["dags"] == {}
    (err,) = out["import_errors"].values()
    assert "make pack-env" in err


@pytest.mark.slow
def test_package_and_coffee_shops_tasks_run_as_rendered(dag, tmp_path):
    """The package task's command, then coffee_shops' spark-submit command with the connection
    pointed at a local master: the run writes the date's partition."""
    pkg = dag["tasks"]["package"]
    zip_path = ROOT / "build" / "sparkfield.zip"
    zip_path.unlink(missing_ok=True)
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"  # `python` = this interpreter
    res = subprocess.run(["bash", "-c", pkg["bash_command"]],
                         env={**os.environ, **pkg["env"], "PATH": path}, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0 and zip_path.is_file(), res.stderr
    cmd = list(dag["tasks"]["coffee_shops"]["command"])
    cmd[cmd.index("--master") + 1] = "local[2]"
    out = tmp_path / "coffee"
    cmd[cmd.index("--output") + 1] = str(out)
    import pyspark

    spark_bin = Path(pyspark.__file__).parent / "bin"
    env = {**os.environ, **dag["tasks"]["coffee_shops"]["env_vars"],
           "PATH": f"{spark_bin}:{os.environ['PATH']}", "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_CONF_DIR": str(ROOT / "conf/spark")}
    res = subprocess.run(cmd + ["--grid-step-m", "25"], env=env, capture_output=True, text=True,
                         timeout=400)
    assert res.returncode == 0, res.stderr[-4000:]
    top = pd.read_csv(out / f"run_date={DATE}" / "top_locations.csv")
    assert len(top) == 10
