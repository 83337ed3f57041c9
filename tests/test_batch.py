"""Scheduled runs: date partitions replaced atomically, the output lock, exit codes."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sparkfield.core.batch import LockHeld, OutputLock, partition_path

ROOT = Path(__file__).resolve().parents[1]


def _submit(*args: str):
    return subprocess.run([str(ROOT / "submit.sh"), "coffee_shops", "--grid-step-m", "50",
                           *args], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "SPARKFIELD_PYTHON": sys.executable})


def test_partition_path_validates_the_date():
    assert partition_path("out/x/", "2026-11-20") == "out/x/run_date=2026-11-20"
    with pytest.raises(ValueError, match="YYYY-MM-DD"):
        partition_path("out", "20/11/2026")


def test_lock_is_exclusive_and_stale_locks_are_taken_over(tmp_path):
    out = str(tmp_path / "o")
    with OutputLock(out, "a"), pytest.raises(LockHeld, match="held by"):
        OutputLock(out, "b").acquire()
    assert not Path(out + ".lock").exists()
    Path(out + ".lock").write_text(json.dumps({"host": os.uname().nodename, "pid": 2 ** 22 + 7}))
    with OutputLock(out, "c") as lock:
        assert lock.held


@pytest.mark.slow
def test_run_dates_replace_only_their_partition(tmp_path):
    out = tmp_path / "daily"
    assert _submit("--output", str(out), "--run-date", "2026-11-20").returncode == 0
    # the other date's partition, as an earlier run left it
    shutil.copytree(out / "run_date=2026-11-20", out / "run_date=2026-11-21")
    other = out / "run_date=2026-11-21" / "top_locations.csv"
    stamp = other.stat().st_mtime_ns
    first = (out / "run_date=2026-11-20" / "run_report.json").read_text()
    res = _submit("--output", str(out), "--run-date", "2026-11-20", "--top", "3")
    assert res.returncode == 0, res.stdout[-2000:]
    assert sorted(p.name for p in out.iterdir()) == ["run_date=2026-11-20", "run_date=2026-11-21"]
    again = (out / "run_date=2026-11-20" / "run_report.json").read_text()
    assert again != first and json.loads(again)["outputs"]["top_locations"] == 3
    assert other.stat().st_mtime_ns == stamp  # the other date is untouched


@pytest.mark.slow
def test_a_held_lock_exits_4_and_rejects_over_the_limit_exit_3(tmp_path):
    out = tmp_path / "o"
    lock = Path(str(out) + ".lock")
    lock.write_text(json.dumps({"host": os.uname().nodename, "pid": os.getpid()}))
    res = _submit("--output", str(out))
    assert res.returncode == 4 and "held by" in res.stdout + res.stderr
    assert not out.exists()
    lock.unlink()
    # the bundled Starbucks file has one row outside the study area: any limit below it trips
    res = _submit("--output", str(out), "--max-reject-fraction", "0")
    assert res.returncode == 3, res.stdout[-2000:]
    assert (out / "rejects").is_dir() and not lock.exists()


def test_a_zombie_lock_holder_counts_as_gone(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    time.sleep(0.5)  # exited, not yet reaped: a zombie
    out = str(tmp_path / "z")
    Path(out + ".lock").write_text(json.dumps({"host": os.uname().nodename, "pid": child.pid}))
    with OutputLock(out, "z") as lock:
        assert lock.held
    child.wait()


def test_a_run_in_progress_is_no_partition_to_a_reader_of_the_dates(spark, tmp_path):
    """A date being written (or left by a run that died) is staged under a hidden name, which
    ``OUT/run_date=*`` does not match: readers see only committed dates."""
    from sparkfield.core.io import AtomicOutput

    out = str(tmp_path / "out")
    with AtomicOutput(spark, partition_path(out, "2024-01-01")) as done:
        done.write_parquet("events", spark.range(3))
        done.write_text("run_report.json", '{"job": "t"}')
    running = AtomicOutput(spark, partition_path(out, "2024-01-02"))
    running.write_parquet("events", spark.range(5))
    try:
        read = spark.read.option("basePath", out).parquet(f"{out}/run_date=*/events")
        assert read.count() == 3
        assert [r[0] for r in read.select("run_date").distinct().collect()] == [
            dt.date(2024, 1, 1)]
    finally:
        running.abort()
