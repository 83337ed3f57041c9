"""Scheduled runs: date partitions of an output, and a lock so that two runs of the same job
never write the same output at once."""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import time
from pathlib import Path


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


class OutputLock:
    """An exclusive lock file ``<output>.lock`` on the local filesystem (created with
    O_EXCL). A lock left by a process that no longer runs on this host is taken over."""

    def __init__(self, output: str, job: str):
        self.path = Path(output.rstrip("/") + ".lock")
        self.job = job
        self.held = False

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        info = {"job": self.job, "host": socket.gethostname(), "pid": os.getpid(),
                "since": time.strftime("%Y-%m-%dT%H:%M:%S")}
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                holder = self._holder()
                if holder and holder.get("host") == info["host"] and not _alive(
                        int(holder.get("pid", -1))):
                    self.path.unlink(missing_ok=True)  # stale: its process is gone
                    continue
                raise LockHeld(f"{self.path} is held by {holder or 'another run'}") from None
            with os.fdopen(fd, "w") as fh:
                json.dump(info, fh)
            self.held = True
            return
        raise LockHeld(f"could not take {self.path}")

    def _holder(self) -> dict | None:
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None

    def release(self) -> None:
        if self.held:
            self.path.unlink(missing_ok=True)
            self.held = False

    def __enter__(self) -> OutputLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def is_local(path: str) -> bool:
    return "://" not in path or path.startswith("file:")


def recover_output(output: str) -> list[str]:
    """After a run was killed (call with the lock held): put back a previous output that was
    moved aside but not replaced, and delete half-written staging directories. Returns what
    it did, for the log."""
    import shutil

    final = Path(output.rstrip("/"))
    done = []
    parent = final.parent
    if not parent.is_dir():
        return done
    olds = sorted(parent.glob(final.name + ".__old-*"))
    if olds and not final.exists():
        olds[-1].rename(final)
        done.append(f"restored {final} from {olds[-1].name}")
        olds = olds[:-1]
    for leftover in [*olds, *parent.glob(final.name + ".__staging-*")]:
        shutil.rmtree(leftover, ignore_errors=True)
        done.append(f"removed {leftover.name}")
    return done
