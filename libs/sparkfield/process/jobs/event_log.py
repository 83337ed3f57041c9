"""The event_log job: a log extracted from source tables as a mapping file says, in the form
the mapping is written in: the classic log here, the object-centric one in
:mod:`sparkfield.process.jobs.ocel`."""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession

from sparkfield.core.conf import Config
from sparkfield.core.errors import ConfigError
from sparkfield.core.failures import raises_input_errors
from sparkfield.core.report import RunReport
from sparkfield.process.extraction.extract import extract
from sparkfield.process.extraction.mapping import Mapping, load_mapping
from sparkfield.process.jobs.compute import classify_extracted, note_empty_sources
from sparkfield.process.jobs.ocel import run_ocel
from sparkfield.process.jobs.outputs import finish
from sparkfield.process.jobs.params import (
    EVENT_LOG,
    refuse_filters,
    report_params,
)
from sparkfield.process.jobs.result import ProcessResult
from sparkfield.process.ocel.mapping import OcelMapping


@raises_input_errors
def run(spark: SparkSession, cfg: Config) -> ProcessResult:
    p = EVENT_LOG.parse(cfg.job)
    if not p.mapping:
        raise ConfigError("event_log needs --mapping FILE.yaml")
    mapping = load_mapping(p.mapping, spark)
    seed = cfg.practices.sample_seed
    report = RunReport("event_log", params=report_params(p, seed))
    if isinstance(mapping, OcelMapping):
        refuse_filters(p.filters)
        return run_ocel(spark, p, mapping, report, cfg.practices.skew_ratio_threshold)
    return _run_classic(spark, p, mapping, report, cfg)


def _run_classic(spark: SparkSession, p: Any, mapping: Mapping, report: RunReport,
                 cfg: Config) -> ProcessResult:
    with report.step("plan"):  # reads headers and checks every expression, no data yet
        extracted = extract(spark, mapping, p.sample, cfg.practices.sample_seed)
    note_empty_sources(report, extracted)
    classified, source, labels = classify_extracted(extracted, mapping, p.dedupe)
    return finish(spark, p, classified, source, report, labels,
                  cfg.practices.skew_ratio_threshold, p.mapping, mapping.filters,
                   mapping.timezone)
