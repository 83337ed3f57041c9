"""Progress lines while a job runs: redrawn in place on a terminal, at most one per interval
in a log file, naming the step and the active stages' tasks."""

from __future__ import annotations

import io
import logging
import re
import time

from pyspark.sql import functions as F

from sparkfield.core.progress import StageProgress, progress_line, progress_lines
from sparkfield.core.report import Stats


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _slow_job(spark, tasks: int = 6, seconds: float = 0.5) -> None:
    nap = F.udf(lambda x: time.sleep(seconds) or x, "long")
    spark.range(0, tasks, 1, tasks).select(nap("id")).collect()


def test_the_words_of_a_line():
    p = StageProgress(stages=[3, 4], done=5, total=20, input_bytes=3 * 1024 ** 2,
                      input_records=12000)
    assert progress_line("read_log", p, 75.0) == (
        "[read_log] stage 3,4: 5/20 tasks, 3.0 MiB read, 12,000 records, ~1m15s left")
    assert progress_line(None, None, None) == "[between steps] no Spark stage running"


def test_a_terminal_gets_a_live_line_with_the_step_and_tasks(spark):
    term = _Terminal()
    stats = Stats()
    with progress_lines(spark, 30, stream=term, tick_s=0.1), stats.step("parse"):
        _slow_job(spark)
    frames = [f for f in term.getvalue().split("\r") if f.strip()]
    assert frames, "no progress line was drawn"
    assert any(re.match(r"\[parse\] stage \d+: \d+/6 tasks", f) for f in frames), frames
    assert term.getvalue().endswith("\r")  # the line is cleared at the end


def test_a_log_file_gets_a_line_at_most_every_interval(spark, caplog):
    caplog.set_level(logging.INFO, logger="sparkfield")
    t0 = time.monotonic()
    with progress_lines(spark, 0.6, stream=io.StringIO(), tick_s=0.1):
        _slow_job(spark, tasks=8)
    wall = time.monotonic() - t0
    lines = [r.message for r in caplog.records if r.message.startswith("progress: ")]
    assert 1 <= len(lines) <= wall / 0.6 + 1, lines
    assert all("tasks" in ln for ln in lines)


def test_no_lines_in_a_log_file_when_the_interval_is_zero(spark, caplog):
    caplog.set_level(logging.INFO, logger="sparkfield")
    with progress_lines(spark, 0, stream=io.StringIO(), tick_s=0.1) as lines:
        assert lines is None
        _slow_job(spark, tasks=2, seconds=0.3)
    assert not [r for r in caplog.records if r.message.startswith("progress: ")]
