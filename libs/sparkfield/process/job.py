"""The two process-mining jobs: ``event_log`` (extract from source tables, then the views)
and ``process_mining`` (the views of an existing log)."""

from __future__ import annotations

import logging
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from sparkfield.core.conf import Config
from sparkfield.core.errors import ConfigError, InputError
from sparkfield.core.failures import raises_input_errors
from sparkfield.core.io import AtomicOutput, optional_output
from sparkfield.core.practices import cached, cached_rows
from sparkfield.core.report import RunReport, Stats
from sparkfield.core.stages import publish
from sparkfield.process import process_map, xes
from sparkfield.process.events import (
    REASON,
    classify,
    event_rejects,
    good_events,
    sample_cases,
    suspicious_timestamps,
    with_classifier,
)
from sparkfield.process.extract import extract
from sparkfield.process.logs import LogColumns, read_log
from sparkfield.process.mapping import load_mapping
from sparkfield.process.ocel_mapping import OcelMapping
from sparkfield.process.params import SCHEMAS
from sparkfield.process.schema import ACTIVITY, CASE, ORDER, SRC_ORDER, TIMESTAMP
from sparkfield.process.views import Views, case_sequences, compute_views
from sparkfield.process.xes_split import needs_one_range

log = logging.getLogger("sparkfield.process")


@dataclass
class ProcessParams:
    output: str | None
    mapping: str | None = None
    log: str | None = None
    columns: LogColumns = field(default_factory=LogColumns)
    timezone: str = "UTC"
    classifier: str = "name"
    sample: float | None = None
    seed: int = 42
    dedupe: bool | None = None
    top_k_arcs: int | None = 30
    min_timestamp: str | None = None  # bounds reject events; none by default (a log is kept)
    max_timestamp: str | None = None
    suspect_before: str = "1970-01-01"  # events outside these are reported, not dropped
    suspect_after: str | None = None  # None: the time of the run
    render_map: bool = True
    csv_multiline: bool = True

    @classmethod
    def from_config(cls, cfg: Config) -> ProcessParams:
        schema = SCHEMAS.get(cfg.job_name)
        j = schema.validate(cfg.job) if schema else cfg.job  # unknown keys, types, ranges
        c = j.get("columns") or {}
        p = cls(
            output=j.get("output"), mapping=j.get("mapping"), log=j.get("log"),
            columns=LogColumns(**{k: v for k, v in c.items() if v}),
            timezone=j.get("timezone", "UTC"), classifier=j.get("classifier", "name"),
            sample=j.get("sample"), seed=cfg.practices.sample_seed, dedupe=j.get("dedupe"),
            top_k_arcs=j.get("top_k_arcs", 30),
            min_timestamp=_text(j.get("min_timestamp")),
            max_timestamp=_text(j.get("max_timestamp")),
            suspect_before=str(j.get("suspect_before") or "1970-01-01"),
            suspect_after=_text(j.get("suspect_after")),
            render_map=bool(j.get("render_map", True)),
            csv_multiline=bool(j.get("csv_multiline", True)),
        )
        if p.classifier not in ("name", "name+lifecycle"):
            raise ConfigError(f"classifier must be name or name+lifecycle, got {p.classifier!r}")
        if p.sample is not None and not 0 < float(p.sample) <= 1:
            raise ConfigError("sample must be in (0, 1]")
        for key in ("min_timestamp", "max_timestamp", "suspect_before", "suspect_after"):
            value = getattr(p, key)
            if value is not None and not _is_timestamp(value):
                raise ConfigError(f"{key} must be a date or timestamp (YYYY-MM-DD...), "
                                  f"got {value!r}")
        return p


def _text(value: Any) -> str | None:
    return None if value is None or str(value).strip() == "" else str(value)


def _is_timestamp(text: str) -> bool:
    try:
        datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


@dataclass
class ProcessResult:
    events: DataFrame
    views: dict[str, pd.DataFrame]
    report: RunReport
    rejects: int = 0
    output: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)


@raises_input_errors
def run_event_log(spark: SparkSession, cfg: Config) -> ProcessResult:
    p = ProcessParams.from_config(cfg)
    if not p.mapping:
        raise ConfigError("event_log needs --mapping FILE.yaml")
    mapping = load_mapping(p.mapping, spark)
    report = RunReport("event_log", params=_params(p))
    if isinstance(mapping, OcelMapping):  # the object-centric form: process/ocel_job.py
        from sparkfield.process.ocel_job import run_ocel

        return run_ocel(spark, p, mapping, report, cfg)
    with report.step("plan"):  # reads headers and checks every expression, no data yet
        extracted = extract(spark, mapping, p.sample, p.seed)
    if extracted.empty_sources:
        report.counts["empty_sources"] = extracted.empty_sources
        report.note(f"empty source(s): {', '.join(extracted.empty_sources)}")
    labels = {a.index: a.label for a in mapping.activities}
    classified = classify(extracted.rows, mapping.min_timestamp, mapping.max_timestamp,
                          dedupe=True if p.dedupe is None else p.dedupe)
    source = F.element_at(F.create_map(*[x for i, lab in labels.items()
                                         for x in (F.lit(i), F.lit(lab))]), F.col(SRC_ORDER))
    return _finish(spark, p, classified, source, report, labels,
                   cfg.practices.skew_ratio_threshold, cfg.job.get("max_reject_fraction"),
                   p.mapping)


@raises_input_errors
def run_process_mining(spark: SparkSession, cfg: Config) -> ProcessResult:
    p = ProcessParams.from_config(cfg)
    if not p.log:
        raise ConfigError("process_mining needs --log PATH")
    try:
        return _mine_log(spark, p, cfg)
    except Exception as exc:
        if not needs_one_range(exc):
            raise
    # nothing was written: the output's staging went with the failed attempt
    return _mine_log(spark, p, cfg, one_range=True)


def _mine_log(spark: SparkSession, p: ProcessParams, cfg: Config,
              one_range: bool = False) -> ProcessResult:
    report = RunReport("process_mining", params=_params(p))
    if one_range:
        report.note(f"{p.log}: a comment, CDATA section or processing instruction holding "
                    "<trace crosses the end of a byte range: the log was read as one range")
    with report.step("read_log"):
        raw = sample_cases(read_log(spark, p.log, p.columns, p.timezone, one_range,
                                     p.csv_multiline),
                           p.sample, p.seed)
    classified = classify(raw, p.min_timestamp, p.max_timestamp,
                          dedupe=False if p.dedupe is None else p.dedupe)
    return _finish(spark, p, classified, F.lit("log"), report, {0: "log"},
                   cfg.practices.skew_ratio_threshold, cfg.job.get("max_reject_fraction"),
                   p.log)


def _params(p: ProcessParams) -> dict[str, Any]:
    d = asdict(p)
    d["columns"] = asdict(p.columns)
    return d


@dataclass
class ProcessComputed:
    """What :func:`compute` returns. ``events`` and the rows behind ``rejects`` stay cached
    until the ``stack`` given to compute closes, so the writer reads them from the cache."""

    events: DataFrame
    views: Views
    small: dict[str, pd.DataFrame]  # dfg, activities, start and end activities, collected
    rejects: DataFrame
    stats: Stats


def compute(classified: DataFrame, source: Column, labels: dict[int, str], p: ProcessParams,
            stack: ExitStack, input_name: str | None = None) -> ProcessComputed:
    """Classified rows in (``src_order`` names the source in ``labels``, ``source`` is the
    rejects' source column); the good events, their views, the rejects and what was counted
    out. Writes nothing; raises InputError when no row is a usable event."""
    stats = Stats()
    rows = stack.enter_context(cached(classified, "classified_rows", report=stats))
    with stats.step("validate"):
        counts = rows.groupBy(SRC_ORDER, REASON).count().collect()
    _account(stats, counts, labels)
    _require_events(stats, input_name)
    events = with_classifier(good_events(rows), p.classifier)
    ev, n_events = stack.enter_context(cached_rows(events, "events", report=stats))
    seqs, n_cases = stack.enter_context(cached_rows(case_sequences(ev), "case_sequences",
                                                    report=stats))
    _report_suspicious(stats, ev, p)
    with stats.step("views"):
        views = compute_views(ev, seqs, n_cases)
        small = {
            "dfg": views.dfg.toPandas(),
            "activities": views.activities.toPandas(),
            "start_activities": views.start_activities.toPandas(),
            "end_activities": views.end_activities.toPandas(),
        }
    stats.counts["cases"] = n_cases
    stats.counts["variants"] = views.variants.count()
    stats.outputs["events"] = n_events
    return ProcessComputed(events=ev, views=views, small=small,
                           rejects=event_rejects(rows, source), stats=stats)


def _finish(spark: SparkSession, p: ProcessParams, classified: DataFrame, source: Column,
            report: RunReport, labels: dict[int, str], skew_ratio: float,
            max_reject_fraction: float | None, input_name: str | None) -> ProcessResult:
    with optional_output(spark, p.output, report.job) as out, ExitStack() as stack:
        c = compute(classified, source, labels, p, stack, input_name)
        report.merge(c.stats)
        result = ProcessResult(events=c.events, views=c.small, report=report,
                               rejects=report.total_rejects, output=p.output)
        result.extras["views"] = c.views
        if out is not None:
            _write(spark, p, out, c, report)
        publish(spark, out, report, skew_ratio, max_reject_fraction)
    log.info(report.summary())
    return result


def _require_events(stats: Stats, input_name: str | None) -> None:
    """No usable event at all is bad input (exit 2), not an empty result."""
    good = sum(s["events"] for s in stats.counts["by_source"].values())
    if good:
        return
    total = stats.inputs.get("rows", 0)
    reasons: dict[str, int] = {}
    for by_reason in stats.rejects.values():
        for reason, n in by_reason.items():
            reasons[reason] = reasons.get(reason, 0) + n
    why = ", ".join(f"{r}={n}" for r, n in sorted(reasons.items(), key=lambda kv: -kv[1]))
    detail = f"all {total} rows rejected: {why}" if total else "no rows"
    raise InputError(f"{input_name or 'input'}: no usable events ({detail})")


def _report_suspicious(stats: Stats, events: DataFrame, p: ProcessParams) -> None:
    """Events with implausible dates are kept (as pm4py and Disco keep them) and reported."""
    after = p.suspect_after or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S")
    with stats.step("suspicious_timestamps"):
        odd = suspicious_timestamps(events, p.suspect_before, after)
    stats.counts["suspicious_timestamps"] = odd
    if odd["events"]:
        examples = "; ".join(f"case {e[CASE]} {e[ACTIVITY]} at {e[TIMESTAMP]}"
                             for e in odd["examples"][:3])
        text = (f"{odd['events']} event(s) in {odd['cases']} case(s) dated outside "
                f"{p.suspect_before} .. {after} (from {odd['first']} to {odd['last']}), kept: "
                f"{examples}. Set min_timestamp/max_timestamp to reject them")
        stats.notes.append(text)
        log.warning(text)


def _account(stats: Stats, counts: list, labels: dict[int, str]) -> None:
    per_source: dict[str, dict[str, int]] = {}
    total = 0
    for r in counts:
        label = labels.get(r[SRC_ORDER], str(r[SRC_ORDER]))
        slot = per_source.setdefault(label, {"rows": 0, "events": 0})
        slot["rows"] += r["count"]
        total += r["count"]
        if r[REASON] is None:
            slot["events"] += r["count"]
        else:
            stats.add_rejects(label, {r[REASON]: r["count"]})
    stats.inputs["rows"] = total
    stats.counts["by_source"] = per_source


def _write(spark: SparkSession, p: ProcessParams, out: AtomicOutput, c: ProcessComputed,
           report: RunReport) -> None:
    ev, views, small = c.events, c.views, c.small
    with report.step("write_events"):
        out.write_parquet("events", ev.repartition(CASE).sortWithinPartitions(CASE, *ORDER)
                          .drop(SRC_ORDER))  # each case's events in event order
    with report.step("write_views"):
        out.write_single_csv("dfg.csv", views.dfg)
        out.write_single_csv("variants.csv", views.variants.select("variant", "cases", "share",
                                                                     "mean_duration_s"))
        out.write_single_csv("activities.csv", views.activities)
        out.write_single_csv("start_activities.csv", views.start_activities)
        out.write_single_csv("end_activities.csv", views.end_activities)
        out.write_single_csv("cases.csv", views.cases.orderBy(CASE).select(
            CASE, F.date_format("start", "yyyy-MM-dd'T'HH:mm:ss.SSSXXX").alias("start"),
            F.date_format("end", "yyyy-MM-dd'T'HH:mm:ss.SSSXXX").alias("end"),
            "duration_s", "events", "variant"))
    with report.step("write_csv_log"):
        xes.write_csv_gz(spark, ev, out.path("event_log.csv.gz"))
    with report.step("write_xes"):
        xes.write_xes_gz(spark, ev, out.path("event_log.xes.gz"))
    with report.step("process_map"):
        dot = process_map.to_dot(small["dfg"], small["activities"], small["start_activities"],
                                 small["end_activities"], p.top_k_arcs)
        out.write_text("process_map.dot", dot)
        if p.render_map:
            with report.optional("process_map.svg"):
                out.write_text("process_map.svg", process_map.render_svg(dot))
    with report.step("write_rejects"):
        out.write_parquet("rejects", c.rejects, partitions=1)
    report.outputs["dfg_arcs"] = len(small["dfg"])
    report.outputs["activities"] = len(small["activities"])
