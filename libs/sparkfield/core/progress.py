"""Progress of a running job, for the person waiting on it: the step running now, the tasks of
its active Spark stages done out of their total, the input read so far and an estimate of the
time left.

On a terminal the line is redrawn in place every second (Spark's own console bar is off in
the local profile: it would interleave with this one); in a log file one line is written at
most every ``interval_s`` seconds, so a nightly run's log shows where a long step stands
without growing a line per second."""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Any

from pyspark.sql import SparkSession

from sparkfield.core.report import current_step
from sparkfield.core.spark_ui import active_stage_inputs

log = logging.getLogger("sparkfield")


@dataclass
class StageProgress:
    """The active stages at one moment: tasks done and in all, input read so far."""

    stages: list[int]
    done: int
    total: int
    input_bytes: int | None
    input_records: int | None


def stage_progress(spark: SparkSession) -> StageProgress | None:
    """What the status tracker (and, for bytes and records read, the monitoring REST API)
    says of the stages running now; None when none is."""
    tracker = spark.sparkContext.statusTracker()
    infos = [i for i in (tracker.getStageInfo(s) for s in tracker.getActiveStageIds()) if i]
    if not infos:
        return None
    inputs = active_stage_inputs(spark)
    read = [inputs[i.stageId] for i in infos if i.stageId in inputs]
    return StageProgress(
        stages=sorted(i.stageId for i in infos),
        done=sum(i.numCompletedTasks for i in infos),
        total=sum(i.numTasks for i in infos),
        input_bytes=sum(b for b, _ in read) if read else None,
        input_records=sum(r for _, r in read) if read else None)


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def progress_line(step: str | None, p: StageProgress | None, eta_s: float | None) -> str:
    """The words of one progress line."""
    where = f"[{step}]" if step else "[between steps]"
    if p is None:
        return f"{where} no Spark stage running"
    ids = ",".join(map(str, p.stages[:4])) + ("..." if len(p.stages) > 4 else "")
    parts = [f"{where} stage {ids}: {p.done}/{p.total} tasks"]
    if p.input_bytes:
        parts.append(f"{_size(p.input_bytes)} read")
    if p.input_records:
        parts.append(f"{p.input_records:,} records")
    if eta_s is not None:
        parts.append(f"~{_duration(eta_s)} left")
    return ", ".join(parts)


class _Estimator:
    """Time left in the active stages: the rate of tasks finished since they were first seen,
    applied to the tasks left."""

    def __init__(self) -> None:
        self.first: dict[tuple[int, ...], tuple[float, int]] = {}

    def eta(self, p: StageProgress | None, now: float) -> float | None:
        if p is None or p.total == 0:
            return None
        key = tuple(p.stages)
        t0, done0 = self.first.setdefault(key, (now, p.done))
        finished = p.done - done0
        if finished <= 0 or now <= t0:
            return None
        return (p.total - p.done) * (now - t0) / finished


class ProgressLines:
    """A daemon thread that writes progress lines while a job runs (see the module's text)."""

    def __init__(self, spark: SparkSession, interval_s: float, stream: IO[str] | None = None,
                 tick_s: float = 1.0) -> None:
        self.spark, self.interval_s, self.tick_s = spark, interval_s, tick_s
        self.stream = stream if stream is not None else sys.stderr
        self.live = bool(getattr(self.stream, "isatty", lambda: False)())
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="sparkfield-progress",
                                        daemon=True)
        self._estimator = _Estimator()
        self._width = 0

    def start(self) -> ProgressLines:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        if self.live and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()

    def _loop(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(self.tick_s if self.live else min(self.tick_s,
                                                                      self.interval_s)):
            now = time.monotonic()
            try:
                p = stage_progress(self.spark)
            except Exception:  # a stopping context; progress must never fail a job
                continue
            line = progress_line(current_step(), p, self._estimator.eta(p, now))
            if self.live:
                self._width = max(self._width, len(line))
                self.stream.write("\r" + line.ljust(self._width))
                self.stream.flush()
            elif now - last >= self.interval_s and p is not None:
                log.info("progress: %s", line)
                last = now


@contextmanager
def progress_lines(spark: SparkSession, interval_s: float, stream: IO[str] | None = None,
                   tick_s: float = 1.0) -> Iterator[Any]:
    """Progress lines while the block runs; none in a log file when ``interval_s`` is 0."""
    target = stream if stream is not None else sys.stderr
    live = bool(getattr(target, "isatty", lambda: False)())
    if interval_s <= 0 and not live:
        yield None
        return
    lines = ProgressLines(spark, interval_s, target, tick_s).start()
    try:
        yield lines
    finally:
        lines.stop()
