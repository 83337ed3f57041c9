"""A full disk ends a run in one ``error:`` line (exit 2) with the previous output kept and no
staging left; the recovery after a killed run removes its checkpoints folder too."""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from pyspark.sql import types as T

from sparkfield.core import cli
from sparkfield.core.batch import OutputLock, recover_output
from sparkfield.core.conf import load_config
from sparkfield.core.io import AtomicOutput, optional_output
from sparkfield.core.worker_parquet import ArrowRows

ROOT = Path(__file__).resolve().parents[2]
JOB = "tests"
Run = Callable[[AtomicOutput], None]


def _checkpoint_dir(spark) -> str:
    current = spark.sparkContext._jsc.sc().getCheckpointDir()
    return str(current.get())


def _run_job(spark, output: Path, write: Run, capsys) -> tuple[int, str]:
    """``write`` into ``output`` through the jobs' own entry point (lock, recovery, exit
    codes) on the test session, whose checkpoint directory stays where it is."""
    cfg = load_config(JOB, "local", ROOT / "conf",
                      {"spark": {"master": "local[2]"},
                       "practices": {"checkpoint_dir": _checkpoint_dir(spark)},
                       "job": {"output": str(output)}})

    def run(session, _cfg):
        with optional_output(session, str(output), JOB) as out:
            write(out)
            out.write_text("run_report.json", json.dumps({"job": JOB}))
            out.commit()

    code = cli.run_job(JOB, cfg, str(output), None, run, None)
    return code, capsys.readouterr().err


def _error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1, err[-3000:]
    return lines[0]


def _previous_output(spark, output: Path, capsys) -> str:
    code, err = _run_job(spark, output, lambda out: out.write_text("kept.txt", "previous"),
                         capsys)
    assert code == 0, err
    return (output / "kept.txt").read_text()


def _assert_disk_full_reported(code: int, err: str, output: Path, caplog) -> None:
    assert code == cli.EXIT_BAD_INPUT, err
    line = _error_line(err)
    assert f"--output {output}" in line and "no space left on device" in line, line
    assert "Traceback" not in err
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


# --- a real full filesystem ----------------------------------------------------------------

@pytest.fixture
def small_disk(tmp_path) -> Iterator[Path]:
    """A 256 KiB tmpfs (needs root and mount): a disk that really fills up."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a small tmpfs needs root and mount(8)")
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(disk)],
                         capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {res.stderr.strip()}")
    try:
        yield disk
    finally:
        if subprocess.run(["umount", str(disk)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def _parquet_by_executors(out: AtomicOutput) -> None:
    rows = out.spark.range(300_000).selectExpr("id", "uuid() AS u")  # ~10 MB, incompressible
    out.write_parquet("rows", rows)


def _parquet_by_python_workers(out: AtomicOutput) -> None:
    def rows(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:  # ~10 MB, incompressible
            yield pa.RecordBatch.from_arrays(
                [b.column(0), pa.array([os.urandom(16).hex() for _ in range(b.num_rows)])],
                names=["id", "u"])

    schema = T.StructType([T.StructField("id", T.LongType()), T.StructField("u", T.StringType())])
    out.write_arrow_rows("rows", ArrowRows(out.spark.range(300_000), rows, schema))


def _bytes_by_the_jvm(out: AtomicOutput) -> None:
    out.write_bytes("blob.bin", os.urandom(1 << 20))


def _file_by_python(out: AtomicOutput) -> None:
    os.makedirs(out.staging, exist_ok=True)
    with open(os.path.join(out.staging, "blob.bin"), "wb") as fh:
        fh.write(os.urandom(1 << 20))


@pytest.mark.parametrize("write", [_parquet_by_executors, _parquet_by_python_workers,
                                   _bytes_by_the_jvm, _file_by_python],
                         ids=["executors", "python_workers", "driver_jvm", "python"])
def test_a_full_disk_is_one_error_line_and_keeps_the_previous_output(
        spark, small_disk, capsys, caplog, write):
    output = small_disk / "out"
    before = _previous_output(spark, output, capsys)
    code, err = _run_job(spark, output, write, capsys)
    _assert_disk_full_reported(code, err, output, caplog)
    assert (output / "kept.txt").read_text() == before
    assert sorted(p.name for p in small_disk.iterdir()) == ["out"]  # no staging, no lock
    # the space the failed run took is free again
    assert shutil.disk_usage(small_disk).free > 200 * 1024


# --- the errors Spark and Python raise, without filling a disk ------------------------------

def _jvm_task_write_failed(out: AtomicOutput) -> None:
    """What an executor's Parquet write on a full disk throws, raised through Py4J."""
    out.write_text("part.txt", "half written")
    jvm = out.spark.sparkContext._jvm
    cause = jvm.java.io.IOException("No space left on device")
    failed = jvm.org.apache.spark.SparkException(
        f"[TASK_WRITE_FAILED] Task failed while writing rows to file:{out.staging}/rows. "
        "SQLSTATE: 58030", cause)
    jvm.scala.util.Failure(failed).get()  # throws ``failed``


def _python_enospc(out: AtomicOutput) -> None:
    out.write_text("part.txt", "half written")
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), f"{out.staging}/part.txt")


def _python_worker_enospc(out: AtomicOutput) -> None:
    def full(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for _ in batches:
            raise OSError(errno.ENOSPC, "No space left on device")
        yield pd.DataFrame({"id": []})

    out.write_text("part.txt", "half written")
    out.spark.range(4).mapInPandas(full, "id long").collect()


@pytest.mark.parametrize("write", [_jvm_task_write_failed, _python_enospc,
                                   _python_worker_enospc],
                         ids=["jvm", "python", "python_worker"])
def test_no_space_errors_of_spark_and_python_are_one_error_line(
        spark, tmp_path, capsys, caplog, write):
    output = tmp_path / "out"
    before = _previous_output(spark, output, capsys)
    code, err = _run_job(spark, output, write, capsys)
    _assert_disk_full_reported(code, err, output, caplog)
    assert (output / "kept.txt").read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_no_space_elsewhere_names_that_place_and_other_errors_stay_internal(
        spark, tmp_path, capsys, caplog):
    output = tmp_path / "out"

    def spill(out: AtomicOutput) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/var/tmp/spill/block_7")

    code, err = _run_job(spark, output, spill, capsys)
    line = _error_line(err)
    assert code == cli.EXIT_BAD_INPUT
    assert "no space left on device writing /var/tmp/spill/block_7" in line
    assert f"--output {output} was not replaced" in line

    def denied(out: AtomicOutput) -> None:
        raise OSError(errno.EACCES, os.strerror(errno.EACCES), "/var/tmp/x")

    code, err = _run_job(spark, output, denied, capsys)
    assert code == cli.EXIT_INTERNAL and "error: " not in err
    assert not output.exists() and sorted(p.name for p in tmp_path.iterdir()) == []


# --- recovery after a killed run ------------------------------------------------------------

def _killed_run_leftovers(output: Path) -> Path:
    """What a run killed mid-way leaves: its lock, staging and checkpoints beside the output."""
    dead = {"job": JOB, "host": socket.gethostname(), "pid": 2 ** 22 + 7, "start": "1"}
    Path(f"{output}.lock").write_text(json.dumps(dead))
    (output.parent / f".{output.name}.__staging-0123456789ab" / "rows").mkdir(parents=True)
    # as earlier versions named it
    (output.parent / f"{output.name}.__staging-ba9876543210" / "rows").mkdir(parents=True)
    checkpoints = output.parent / f".{output.name}.checkpoints"
    part = checkpoints / "5b0c9e6e-dead-run" / "rdd-12" / "part-00000"
    part.parent.mkdir(parents=True)
    part.write_bytes(b"\0" * 1024)
    return checkpoints


def test_the_checkpoints_of_a_killed_run_are_removed(spark, tmp_path, capsys, caplog):
    output = tmp_path / "out"
    checkpoints = _killed_run_leftovers(output)
    caplog.set_level(logging.WARNING, logger="sparkfield")
    code, err = _run_job(spark, output, lambda out: out.write_text("a.txt", "a"), capsys)
    assert code == 0, err
    assert not checkpoints.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert any("removed .out.checkpoints" in r.getMessage() for r in caplog.records)


def test_a_live_runs_checkpoints_are_kept(spark, tmp_path, capsys):
    output = tmp_path / "out"
    checkpoints = tmp_path / ".out.checkpoints"
    part = checkpoints / "live-run" / "rdd-3" / "part-00000"
    part.parent.mkdir(parents=True)
    part.write_bytes(b"live")
    with OutputLock(str(output), JOB):  # a live run holds the output
        code, err = _run_job(spark, output, lambda out: out.write_text("a.txt", "a"), capsys)
    assert code == cli.EXIT_LOCKED, err
    assert part.read_bytes() == b"live"


def test_recovery_keeps_the_checkpoints_this_process_still_reads(spark, tmp_path):
    """A notebook's session, joined by a run, may still read a frame checkpointed there."""
    output = tmp_path / "out"
    checkpoints = _killed_run_leftovers(output)
    original = _checkpoint_dir(spark)
    spark.sparkContext.setCheckpointDir(str(checkpoints))
    try:
        cut = spark.range(50).checkpoint(eager=True)
        assert len(list(checkpoints.iterdir())) == 2
        done = recover_output(str(output))
        assert "removed .out.checkpoints" in done
        assert not (checkpoints / "5b0c9e6e-dead-run").exists()
        assert len(list(checkpoints.iterdir())) == 1  # the one this session uses
        assert cut.count() == 50
    finally:
        spark.sparkContext.setCheckpointDir(original)


def test_of_two_outputs_moved_aside_the_newest_is_restored(tmp_path):
    output = tmp_path / "out"
    # names sort against their age: the random token must not decide
    for token, content, age in (("ffff", "older", 7200), ("0000", "newer", 60)):
        old = tmp_path / f".out.__old-{token}"
        old.mkdir()
        (old / "what").write_text(content)
        then = os.path.getmtime(old) - age
        os.utime(old, (then, then))
    done = recover_output(str(output))
    assert (output / "what").read_text() == "newer"
    assert done[0] == f"restored {output} from .out.__old-0000"
    assert not (tmp_path / ".out.__old-ffff").exists()


def test_a_recovery_that_fails_releases_the_lock(spark, tmp_path, capsys, monkeypatch):
    output = tmp_path / "out"

    def fails(*_a, **_k):
        raise PermissionError(13, "Permission denied", str(tmp_path / ".out.__old-1"))

    monkeypatch.setattr(cli, "recover_output", fails)
    code, err = _run_job(spark, output, lambda out: out.write_text("a.txt", "a"), capsys)
    assert code == cli.EXIT_BAD_INPUT
    assert "cannot clean up after an interrupted run" in err and "Permission denied" in err
    assert not Path(f"{output}.lock").exists()
    monkeypatch.undo()
    code, err = _run_job(spark, output, lambda out: out.write_text("a.txt", "a"), capsys)
    assert code == 0, err
