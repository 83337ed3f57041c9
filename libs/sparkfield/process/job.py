"""The two process-mining jobs: ``event_log`` (extract from source tables, then the views)
and ``process_mining`` (the views of an existing log).

``event_log`` runs the form its mapping is written in: the classic log here, the
object-centric one in :mod:`sparkfield.process.ocel.job`."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from sparkfield.core.conf import Config
from sparkfield.core.errors import ConfigError, InputError
from sparkfield.core.failures import raises_input_errors
from sparkfield.core.io import AtomicOutput, optional_output, rejects_of
from sparkfield.core.practices import cached, cached_rows
from sparkfield.core.report import RunReport, Stats
from sparkfield.core.stages import publish
from sparkfield.process import petri, process_map, xes
from sparkfield.process.events import (
    RAW_TS,
    REASON,
    classify,
    good_events,
    sample_cases,
    suspicious_timestamps,
    with_classifier,
)
from sparkfield.process.extract import Extracted, extract
from sparkfield.process.log_conformance import (
    Conformance,
    check_conformance,
    label_mismatch,
    load_model,
)
from sparkfield.process.log_filters import FilterCall, apply_filters, plan_filters
from sparkfield.process.log_statistics import LogStatistics, log_statistics, png
from sparkfield.process.logs import log_format, read_log
from sparkfield.process.mapping import Mapping, load_mapping
from sparkfield.process.model import DiscoveredModel, discover_model
from sparkfield.process.ocel.job import run_ocel
from sparkfield.process.ocel.mapping import OcelMapping
from sparkfield.process.params import (
    EVENT_LOG,
    PROCESS_MINING,
    EventDates,
    event_dates,
    export_formats,
    refuse_filters,
    report_params,
)
from sparkfield.process.petri import PetriNet, to_pnml
from sparkfield.process.result import ProcessResult
from sparkfield.process.schema import (
    ACTIVITY,
    ATTRIBUTES,
    CASE,
    LIFECYCLE,
    ORDER,
    RESOURCE,
    SRC_ORDER,
    TIMESTAMP,
)
from sparkfield.process.views import (
    Views,
    case_sequences,
    compute_views,
    resource_tables,
    small_views,
    tallies,
)
from sparkfield.process.views import variants as view_variants
from sparkfield.process.xes_split import needs_one_range

__all__ = ["ProcessComputed", "ProcessResult", "classify_extracted", "compute",
           "run_event_log", "run_process_mining"]

log = logging.getLogger("sparkfield.process")

# what a rejected event's record holds: the event as read
REJECT_FIELDS = [CASE, ACTIVITY, RAW_TS, RESOURCE, LIFECYCLE, ATTRIBUTES]


@raises_input_errors
def run_event_log(spark: SparkSession, cfg: Config) -> ProcessResult:
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
    return _finish(spark, p, classified, source, report, labels,
                   cfg.practices.skew_ratio_threshold, p.mapping, mapping.filters,
                   mapping.timezone)


def note_empty_sources(stats: Stats, extracted: Extracted) -> None:
    if extracted.empty_sources:
        stats.counts["empty_sources"] = extracted.empty_sources
        stats.note(f"empty source(s): {', '.join(extracted.empty_sources)}")


def classify_extracted(extracted: Extracted, mapping: Mapping, dedupe: bool
                       ) -> tuple[DataFrame, Column, dict[int, str]]:
    """What :func:`compute` takes from an extraction: the rows with ``reject_reason``, the
    rejects' source column (the activity's label) and the labels by ``src_order``."""
    labels = {a.index: a.label for a in mapping.activities}
    classified = classify(extracted.rows, mapping.min_timestamp, mapping.max_timestamp,
                          dedupe=dedupe)
    source = F.element_at(F.create_map(*[x for i, lab in labels.items()
                                         for x in (F.lit(i), F.lit(lab))]), F.col(SRC_ORDER))
    return classified, source, labels


@raises_input_errors
def run_process_mining(spark: SparkSession, cfg: Config) -> ProcessResult:
    p = PROCESS_MINING.parse(cfg.job)
    dates = event_dates(p)
    if not p.log:
        raise ConfigError("process_mining needs --log PATH")
    try:
        return _mine_log(spark, p, dates, cfg)
    except Exception as exc:
        if not needs_one_range(exc):
            raise
    # nothing was written: the output's staging went with the failed attempt
    return _mine_log(spark, p, dates, cfg, one_range=True)


def _mine_log(spark: SparkSession, p: Any, dates: EventDates, cfg: Config,
              one_range: bool = False) -> ProcessResult:
    seed = cfg.practices.sample_seed
    report = RunReport("process_mining", params=report_params(p, seed))
    if one_range:
        report.note(f"{p.log}: a comment, CDATA section or processing instruction holding "
                    "<trace crosses the end of a byte range: the log was read as one range")
    with report.step("read_log"):
        raw = sample_cases(read_log(spark, p.log, p.columns, p.timezone, one_range,
                                     p.csv_multiline),
                           p.sample, seed)
    classified = classify(raw, dates.min_timestamp, dates.max_timestamp, dedupe=p.dedupe)
    return _finish(spark, p, classified, F.lit("log"), report, {0: "log"},
                   cfg.practices.skew_ratio_threshold, p.log, timezone=p.timezone)


@dataclass
class ProcessComputed:
    """What :func:`compute` returns. The rows behind ``events`` and ``rejects`` stay cached
    until the ``stack`` given to compute closes, so the writer reads them from the cache."""

    events: DataFrame
    views: Views
    small: dict[str, pd.DataFrame]  # dfg, activities, start and end activities, collected
    rejects: DataFrame
    stats: Stats
    statistics: LogStatistics | None = None  # when the job's ``statistics`` is on
    model: DiscoveredModel | None = None  # when the job's ``model`` is on
    conformance: Conformance | None = None  # when ``conformance`` is on and a model is there


def compute(classified: DataFrame, source: Column, labels: dict[int, str], p: Any,
            stack: ExitStack, input_name: str | None = None,
            given_model: PetriNet | None = None, log_filters: Sequence[FilterCall] = (),
            timezone: str = "UTC") -> ProcessComputed:
    """Classified rows in (``src_order`` names the source in ``labels``, ``source`` is the
    rejects' source column) with the job's parsed parameters ``p``; the good events, their
    views, the rejects and what was counted out. ``log_filters`` (a mapping's) run before the
    job's ``filters``; ``timezone`` is the log's (naive times in the filters' arguments, the
    statistics' periods). Writes nothing; raises InputError when no row is a usable event."""
    stats = Stats()
    # one cache of every row: the events are read from it (not cached again, which would
    # hold the log twice), and only a reject keeps the raw timestamp it is reported with
    kept = classified.withColumn(RAW_TS, F.when(F.col(REASON).isNotNull(), F.col(RAW_TS)))
    rows = stack.enter_context(cached(kept, "classified_rows", report=stats))
    with stats.step("validate"):
        counts = rows.groupBy(SRC_ORDER, REASON).count().collect()
    _account(stats, counts, labels)
    _require_events(stats, input_name)
    ev = with_classifier(good_events(rows), p.classifier)
    n_events = sum(r["count"] for r in counts if r[REASON] is None)
    _report_suspicious(stats, ev, p)  # of every good event, before the filters
    calls = [*log_filters, *plan_filters(p.filters)]
    if calls:
        ev = apply_filters(ev, calls, stats, stack, timezone)
        n_events = stats.counts["filters"][-1]["events_kept"]
    # the statistics' resource tables come from the sequences too: they carry the resource
    seqs, n_cases = stack.enter_context(cached_rows(
        case_sequences(ev, resource=bool(p.statistics)), "case_sequences", report=stats))
    with stats.step("views"):
        views = compute_views(ev, seqs, n_cases)
        counted = tallies(seqs).toPandas()  # every small table in one job
        small = small_views(counted)
    # the per-case table feeds the variants, the duration statistics and cases.csv: made
    # from the sequences once, not once for each
    case_table = stack.enter_context(cached(views.cases, "cases", report=stats))
    views = replace(views, cases=case_table, variants=view_variants(case_table, n_cases))
    model = None
    if p.model:
        with stats.step("discover_model"):
            model = discover_model(small)
        stats.counts["model"] = model.sizes()
    conformance = None
    net = given_model or (model.net if model is not None else None)
    if p.conformance and net is not None:
        mismatch = None if given_model is None else \
            label_mismatch(given_model, small["activities"][ACTIVITY])
        if mismatch:
            stats.notes.append(mismatch)
            log.warning(mismatch)
        with stats.step("conformance"):
            conformance = check_conformance(seqs, net, stack)
        stats.counts["conformance"] = {
            "model": "conformance_model" if given_model is not None else "discovered",
            **{k: round(v, 6) for k, v in conformance.figures.items()},
            "non_fitting_variants": len(conformance.non_fitting)}
    elif p.conformance:
        stats.note("conformance not checked: no model (model is off and no conformance_model "
                   "was given)")
    statistics = None
    if p.statistics:
        with stats.step("statistics"):
            statistics, notes = log_statistics(ev, views.cases, p.statistics_period,
                                               plausible_dates(p), timezone,
                                               resource_tables(counted))
        for text in notes:
            stats.note(text)
    stats.counts["cases"] = n_cases
    with stats.step("count_variants"):
        stats.counts["variants"] = views.variants.count()
    stats.outputs["events"] = n_events
    return ProcessComputed(events=ev, views=views, small=small,
                           rejects=rejects_of(rows, source, fields=REJECT_FIELDS), stats=stats,
                           statistics=statistics, model=model, conformance=conformance)


def _finish(spark: SparkSession, p: Any, classified: DataFrame, source: Column,
            report: RunReport, labels: dict[int, str], skew_ratio: float,
            input_name: str | None, log_filters: Sequence[FilterCall] = (),
            timezone: str = "UTC") -> ProcessResult:
    given = None
    if p.conformance and p.conformance_model:
        with report.step("read_conformance_model"):
            given = load_model(spark, p.conformance_model)
    with optional_output(spark, p.output, report.job) as out, ExitStack() as stack:
        c = compute(classified, source, labels, p, stack, input_name, given, log_filters,
                    timezone)
        report.merge(c.stats)
        result = ProcessResult(events=c.events, views=c.small, report=report,
                               rejects=report.total_rejects, output=p.output)
        result.extras["views"] = c.views
        result.extras["model"] = c.model
        result.extras["conformance"] = c.conformance
        if out is not None:
            _write(spark, p, out, c, report)
        publish(spark, out, report, skew_ratio, p.max_reject_fraction)
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


def plausible_dates(p: Any) -> tuple[str, str]:
    """The range outside which a kept event's date is reported as suspicious."""
    dates = event_dates(p)
    return (dates.suspect_before,
            dates.suspect_after or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S"))


def _report_suspicious(stats: Stats, events: DataFrame, p: Any) -> None:
    """Events with implausible dates are kept (as pm4py and Disco keep them) and reported."""
    before, after = plausible_dates(p)
    with stats.step("suspicious_timestamps"):
        odd = suspicious_timestamps(events, before, after)
    stats.counts["suspicious_timestamps"] = odd
    if odd["events"]:
        examples = "; ".join(f"case {e[CASE]} {e[ACTIVITY]} at {e[TIMESTAMP]}"
                             for e in odd["examples"][:3])
        text = (f"{odd['events']} event(s) in {odd['cases']} case(s) dated outside "
                f"{before} .. {after} (from {odd['first']} to {odd['last']}), kept: "
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


def _write(spark: SparkSession, p: Any, out: AtomicOutput, c: ProcessComputed,
           report: RunReport) -> None:
    ev, views, small = c.events, c.views, c.small
    with report.step("write_events"):
        out.write_parquet("events", ev.repartition(CASE).sortWithinPartitions(CASE, *ORDER)
                          .drop(SRC_ORDER))  # each case's events in event order
    with report.step("write_views"):
        for name in ("dfg", "activities", "start_activities", "end_activities"):
            out.write_csv(f"{name}.csv", small[name])  # collected by compute: not again
        out.write_single_csv("variants.csv", views.variants.select("variant", "cases", "share",
                                                                     "mean_duration_s"))
        out.write_single_csv("cases.csv", views.cases.orderBy(CASE).select(
            CASE, F.date_format("start", "yyyy-MM-dd'T'HH:mm:ss.SSSXXX").alias("start"),
            F.date_format("end", "yyyy-MM-dd'T'HH:mm:ss.SSSXXX").alias("end"),
            "duration_s", "events", "variant"))
    formats = export_formats(p.exports, log_format(p.log) if getattr(p, "log", None)
                             else None)
    if "csv" in formats:
        with report.step("write_csv_log"):
            xes.write_csv_gz(spark, ev, out.path("event_log.csv.gz"))
    if "xes" in formats:
        with report.step("write_xes"):
            xes.write_xes_gz(spark, ev, out.path("event_log.xes.gz"))
    with report.step("process_map"):
        dot = process_map.to_dot(small["dfg"], small["activities"], small["start_activities"],
                                 small["end_activities"], p.top_k_arcs)
        out.write_text("process_map.dot", dot)
        if p.render_map:
            with report.optional("process_map.svg"):
                out.write_text("process_map.svg", process_map.render_svg(dot))
    if c.model is not None:
        with report.step("write_model"):
            out.write_text("model/process_tree.txt", c.model.tree.to_string() + "\n")
            out.write_bytes("model/model.pnml", to_pnml(c.model.net))
            if p.render_map:
                with report.optional("model/model.svg"):
                    out.write_text("model/model.svg", petri.to_svg(c.model.net))
    if c.conformance is not None:
        with report.step("write_conformance"):
            out.write_single_csv("conformance/cases.csv", c.conformance.cases.orderBy(CASE))
            out.write_csv("conformance/non_fitting_variants.csv", c.conformance.non_fitting)
    if c.statistics is not None:
        with report.step("write_statistics"):
            for name, text in c.statistics.csv_files().items():
                out.write_text(name, text)
            for name, fig in c.statistics.figures().items():
                with report.optional(name):
                    out.write_bytes(name, png(fig))
    with report.step("write_rejects"):
        out.write_parquet("rejects", c.rejects, partitions=1)
    report.outputs["dfg_arcs"] = len(small["dfg"])
    report.outputs["activities"] = len(small["activities"])
