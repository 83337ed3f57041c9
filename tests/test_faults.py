"""Faults: a job killed mid-run and re-run gives the same output as an uninterrupted run, and
a task that fails once is retried by Spark with identical output."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
ARGS = ["coffee_shops", "--grid-step-m", "10"]


def _env(**extra):
    return {**os.environ, "SPARKFIELD_PYTHON": sys.executable, **extra}


def _run(out: Path, *args: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([str(ROOT / "submit.sh"), *ARGS, "--output", str(out), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=env or _env())


def _same(a: Path, b: Path) -> None:
    pd.testing.assert_frame_equal(pd.read_csv(a / "top_locations.csv"),
                                  pd.read_csv(b / "top_locations.csv"))
    ca = pd.read_parquet(a / "candidates").sort_values(["x", "y"]).reset_index(drop=True)
    cb = pd.read_parquet(b / "candidates").sort_values(["x", "y"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(ca, cb)


@pytest.fixture(scope="module")
def ref(tmp_path_factory) -> Path:
    """The uninterrupted run both drills compare with."""
    out = tmp_path_factory.mktemp("faults") / "ref"
    res = _run(out)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    return out


def test_killed_run_then_rerun_equals_an_uninterrupted_run(tmp_path, ref):
    out = tmp_path / "out"
    proc = subprocess.Popen([str(ROOT / "submit.sh"), *ARGS, "--output", str(out)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(),
                            start_new_session=True)
    deadline = time.time() + 240
    while time.time() < deadline and not list(tmp_path.glob(".out.__staging-*")):
        time.sleep(0.05)
    assert list(tmp_path.glob(".out.__staging-*")), "the job never started writing"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert not out.exists()  # nothing half-written where readers look
    assert Path(str(out) + ".lock").exists()  # left by the killed run
    res = _run(out)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    assert "previous run was interrupted" in res.stdout + res.stderr
    assert not list(tmp_path.glob("out.__*")) and not Path(str(out) + ".lock").exists()
    _same(ref, out)


def test_a_task_failing_once_is_retried_with_identical_output(tmp_path, ref):
    marker = tmp_path / "failed-once"
    out = tmp_path / "out"
    res = _run(out, "--master", "local[2,3]",
               env=_env(SPARKFIELD_FAIL_ONCE=f"geo.tiles:{marker}"))
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    assert marker.exists()  # the failure did happen
    # the run says that it succeeded after a retry, and why the attempt failed
    assert "injected failure at geo.tiles" in res.stderr
    report = json.loads((out / "run_report.json").read_text())
    assert report["counts"]["failed_task_attempts_retried"] == 1
    assert any("InjectedFailure: injected failure at geo.tiles" in n for n in report["notes"])
    assert "failed_task_attempts_retried" not in json.loads(
        (ref / "run_report.json").read_text())["counts"]
    _same(ref, out)
