"""Scheduled runs: date partitions of an output, and a lock so that two runs of the same job
never write the same output at once."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import socket
import time
import uuid
from pathlib import Path

from sparkfield.core.paths import local_path, own_checkpoints_name


class LockHeld(RuntimeError):
    """Another run of the same job and output is in progress."""


def partition_path(output: str, run_date: str) -> str:
    """``<output>/run_date=YYYY-MM-DD`` (validated)."""
    try:
        day = dt.date.fromisoformat(run_date)
    except ValueError as exc:
        raise ValueError(f"--run-date must be YYYY-MM-DD, got {run_date!r}") from exc
    return f"{output.rstrip('/')}/run_date={day.isoformat()}"


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs. A killed process whose parent is gone can linger as a zombie
    until something reaps it (in containers, often nothing does): that counts as dead."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc: trust the signal check
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def process_start(pid: int) -> str | None:
    """When ``pid`` started (clock ticks since boot, from /proc), or None where unknown: with
    the pid it names one process, so a pid reused by an unrelated process is told apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


def _runs(holder: dict) -> bool:
    """Whether the process a lock names still runs (same pid and, where recorded, the same
    start time)."""
    try:
        pid = int(holder.get("pid", -1))
    except (TypeError, ValueError):
        return False
    if not _alive(pid):
        return False
    started = holder.get("start")
    return started is None or process_start(pid) in (None, str(started))


class OutputLock:
    """An exclusive lock file ``<output>.lock`` on the local filesystem.

    The lock is written whole to a temporary file and then hard-linked into place (atomic and
    exclusive), so an empty or unreadable lock file is never a live one. It records host, pid
    and the process's start time; a lock whose process no longer runs on this host (or whose
    pid now belongs to another process), or an empty or unreadable one, is taken over."""

    def __init__(self, output: str, job: str):
        self.path = Path(output.rstrip("/") + ".lock")
        self.job = job
        self.held = False

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        pid = os.getpid()
        info = {"job": self.job, "host": socket.gethostname(), "pid": pid,
                "start": process_start(pid), "since": time.strftime("%Y-%m-%dT%H:%M:%S")}
        tmp = self.path.with_name(f"{self.path.name}.{pid}.{uuid.uuid4().hex[:8]}")
        tmp.write_text(json.dumps(info))
        try:
            for _ in range(3):
                try:
                    os.link(tmp, self.path)
                except FileExistsError:
                    text, holder = self._read()
                    if self._stale(holder, info["host"]):
                        self._take_over(text)
                        continue
                    raise LockHeld(self._held_message(holder)) from None
                self.held = True
                return
        finally:
            tmp.unlink(missing_ok=True)
        raise LockHeld(f"could not take the lock {self.path}; if no run of {self.job} is in "
                       "progress, remove that file")

    def _held_message(self, holder: dict | None) -> str:
        who = (f"{holder.get('job')} (pid {holder.get('pid')} on {holder.get('host')}, "
               f"since {holder.get('since')})") if holder else "another run"
        return (f"the lock {self.path} is held by {who}; if that run no longer runs, "
                "remove the lock file")

    @staticmethod
    def _stale(holder: dict | None, host: str) -> bool:
        if holder is None:
            return True  # empty or unreadable: never written by a live lock (see acquire)
        return holder.get("host") == host and not _runs(holder)

    def _take_over(self, seen: str | None) -> None:
        """Move the stale lock aside and remove it, unless another run replaced it meanwhile
        (then it is put back)."""
        aside = self.path.with_name(f"{self.path.name}.stale-{uuid.uuid4().hex[:8]}")
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return
        try:
            now = aside.read_text()
        except OSError:
            now = None
        if now != seen:
            with contextlib.suppress(FileExistsError):
                os.link(aside, self.path)  # a fresh lock of another run: put it back
        aside.unlink(missing_ok=True)

    def _read(self) -> tuple[str | None, dict | None]:
        try:
            text = self.path.read_text()
        except (OSError, UnicodeDecodeError):
            return None, None
        try:
            holder = json.loads(text)
        except ValueError:
            return text, None
        return text, holder if isinstance(holder, dict) else None

    def release(self) -> None:
        if self.held:
            self.path.unlink(missing_ok=True)
            self.held = False

    def __enter__(self) -> OutputLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def recover_output(output: str, spark=None) -> list[str]:
    """After a run was killed (call with the lock held): put back a previous output that was
    moved aside but not replaced, and delete half-written staging directories and the
    checkpoints folder beside the output. Returns what it did, for the log. ``output`` may be
    a path or a ``file:`` URI."""
    import shutil

    final = Path(local_path(output, spark).rstrip("/"))
    done = []
    parent = final.parent
    if not parent.is_dir():
        return done

    def beside(kind: str) -> list[Path]:
        """The output's folders of ``kind``: hidden, and as earlier versions named them."""
        return [p for n in (f".{final.name}", final.name) for p in parent.glob(f"{n}.__{kind}-*")]

    # oldest to newest: the last is the output an interrupted commit moved aside last
    olds = sorted(beside("old"), key=lambda p: p.stat().st_mtime)
    if olds and not final.exists():
        olds[-1].rename(final)
        done.append(f"restored {final} from {olds[-1].name}")
        olds = olds[:-1]
    for leftover in [*olds, *beside("staging")]:
        shutil.rmtree(leftover, ignore_errors=True)
        done.append(f"removed {leftover.name}")
    checkpoints = parent / own_checkpoints_name(final.name)
    if checkpoints.is_dir() and not checkpoints.is_symlink():
        in_use = _checkpoint_dir_in_use()
        stale = [p for p in checkpoints.iterdir() if p.resolve() != in_use]
        for leftover in stale:
            if leftover.is_dir() and not leftover.is_symlink():
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                leftover.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            checkpoints.rmdir()  # stays while this process's session still uses it
        if stale or not checkpoints.exists():
            done.append(f"removed {checkpoints.name}")
    return done


def _checkpoint_dir_in_use() -> Path | None:
    """The local checkpoint directory of a SparkContext running in this process (one a
    notebook keeps between runs), which its cached frames may still read; else None."""
    from pyspark import SparkContext

    sc = SparkContext._active_spark_context
    if sc is None:
        return None
    try:
        current = sc._jsc.sc().getCheckpointDir()
        where = str(current.get()) if current.isDefined() else ""
    except Exception:  # a stopped or broken context holds nothing
        return None
    return Path(where.removeprefix("file:")).resolve() if where.startswith("file:") else None
