"""The process_mining job: the views, statistics, model and conformance of an existing event
log (XES, CSV or Parquet)."""

from __future__ import annotations

import logging
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from sparkfield.core.conf import Config
from sparkfield.core.errors import ConfigError
from sparkfield.core.failures import raises_input_errors
from sparkfield.core.report import RunReport
from sparkfield.process.eventlog.events import (
    classify,
    sample_cases,
)
from sparkfield.process.eventlog.read import read_log
from sparkfield.process.eventlog.xes_jvm import needs_python_reader, parsed_in_jvm
from sparkfield.process.eventlog.xes_split import needs_one_range
from sparkfield.process.jobs.outputs import finish
from sparkfield.process.jobs.params import (
    PROCESS_MINING,
    EventDates,
    event_dates,
    report_params,
)
from sparkfield.process.jobs.result import ProcessResult

log = logging.getLogger("sparkfield.process")


@raises_input_errors
def run(spark: SparkSession, cfg: Config) -> ProcessResult:
    p = PROCESS_MINING.parse(cfg.job)
    dates = event_dates(p)
    if not p.log:
        raise ConfigError("process_mining needs --log PATH")
    # an XES log is read in the JVM, then by the Python reader where a trace is of a shape the
    # JVM's does not read, then as one range where markup crosses a range's end; nothing was
    # written by a failed attempt (the output's staging went with it)
    jvm, one_range, why = True, False, ""
    while True:
        try:
            return _mine_log(spark, p, dates, cfg, one_range, jvm, why)
        except Exception as exc:
            if jvm and needs_python_reader(exc):
                jvm, why = False, (f"{p.log}: a trace of a shape the JVM reader does not read: "
                                   "the log was read by the Python reader")
            elif not one_range and needs_one_range(exc):
                jvm, one_range = False, True
                why = (f"{p.log}: a comment, CDATA section or processing instruction holding "
                       "<trace crosses the end of a byte range: the log was read as one range")
            else:
                raise


def _mine_log(spark: SparkSession, p: Any, dates: EventDates, cfg: Config,
              one_range: bool = False, jvm: bool = False, why: str = "") -> ProcessResult:
    """One attempt at the run; ``why``: the note saying why the log is read again."""
    seed = cfg.practices.sample_seed
    report = RunReport("process_mining", params=report_params(p, seed))
    if why:
        report.note(why)
    with report.step("read_log"):
        rows = read_log(spark, p.log, p.columns, p.timezone, one_range, p.csv_multiline,
                        p.csv_encoding, jvm)
        if parsed_in_jvm(rows):
            report.note(f"{p.log}: traces parsed in the JVM")
        raw = sample_cases(rows, p.sample, seed)
    classified = classify(raw, dates.min_timestamp, dates.max_timestamp, dedupe=p.dedupe)
    return finish(spark, p, classified, F.lit("log"), report, {0: "log"},
                  cfg.practices.skew_ratio_threshold, p.log, timezone=p.timezone,
                  unique_order=True)  # the reader numbers every event of the file
