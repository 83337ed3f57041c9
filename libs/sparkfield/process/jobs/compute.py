"""The classic log's pure ``compute``: classified rows in; the good events, their views, the
rejects, and the filters, statistics, model and conformance the parameters ask for out, with
what was counted. Writes nothing; shared by both jobs and by :mod:`.frames`."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import AbstractContextManager, ExitStack, nullcontext
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from sparkfield.core.errors import InputError
from sparkfield.core.io import rejects_of
from sparkfield.core.practices import cached, cached_rows
from sparkfield.core.report import Stats
from sparkfield.core.session import session_setting
from sparkfield.process.analysis.filter_plan import FilterCall, apply_filters, plan_filters
from sparkfield.process.analysis.petri import PetriNet
from sparkfield.process.analysis.views import (
    Views,
    case_sequences,
    compute_views,
    resource_tables,
    small_views,
    tallies,
)
from sparkfield.process.analysis.views import variants as view_variants
from sparkfield.process.eventlog.events import (
    RAW_TS,
    REASON,
    classify,
    date_tallies,
    good_events,
    suspicious_timestamps,
    with_classifier,
)
from sparkfield.process.eventlog.schema import (
    ACTIVITY,
    ATTRIBUTES,
    CASE,
    LIFECYCLE,
    ORDER,
    RESOURCE,
    SRC_ORDER,
    TIMESTAMP,
)
from sparkfield.process.extraction.extract import Extracted
from sparkfield.process.extraction.mapping import Mapping
from sparkfield.process.jobs.conformance_step import (
    Conformance,
    check_conformance,
    label_mismatch,
)
from sparkfield.process.jobs.model_step import DiscoveredModel, discover_model
from sparkfield.process.jobs.params import (
    event_dates,
)
from sparkfield.process.jobs.statistics_step import LogStatistics, log_statistics

log = logging.getLogger("sparkfield.process")


# what a rejected event's record holds: the event as read
REJECT_FIELDS = [CASE, ACTIVITY, RAW_TS, RESOURCE, LIFECYCLE, ATTRIBUTES]


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
    # each case's events in one partition of ``events``, in event order (the cache's order)
    events_in_order: bool = False


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
    # cached with each case's rows in one partition, in event order: the sequences group
    # them and the writer writes the events' files from them without a shuffle of their own
    kept = kept.repartition(CASE).sortWithinPartitions(CASE, *ORDER)
    rows = stack.enter_context(cached(kept, "classified_rows", report=stats))
    dated = plausible_dates(p)
    with stats.step("validate"):  # with the events' dates: no pass of their own
        counts = rows.groupBy(SRC_ORDER, REASON).agg(
            F.count(F.lit(1)).alias("count"), *date_tallies(*dated)).collect()
    _account(stats, counts, labels)
    _require_events(stats, input_name)
    ev = with_classifier(good_events(rows), p.classifier)
    n_events = sum(r["count"] for r in counts if r[REASON] is None)
    odd = sum(r["odd"] for r in counts)
    _report_suspicious(stats, ev, dated, odd)  # of every good event, before the filters
    calls = [*log_filters, *plan_filters(p.filters)]
    # what the statistics' periods span, when they count these events (no filter ran)
    within = [r for r in counts if r["lo"] is not None]
    span = None if calls else {
        "all": n_events, "n": n_events - odd, "lo": min((r["lo"] for r in within), default=None),
        "hi": max((r["hi"] for r in within), default=None)}
    if calls:
        ev = apply_filters(ev, calls, stats, stack, timezone)
        n_events = stats.counts["filters"][-1]["events_kept"]
    # the filters may regroup the events, the classifier renames the activities (the last
    # tie-break of the order): the writer then orders them itself
    in_order = not calls and p.classifier == "name"
    # the statistics' resource tables come from the sequences too: they carry the resource
    with _aggregating_in_order(ev.sparkSession, not calls):
        seqs, n_cases = stack.enter_context(cached_rows(
            case_sequences(ev, resource=bool(p.statistics)), "case_sequences", report=stats))
    with stats.step("views"):
        views = compute_views(ev, seqs, n_cases)
        counted = tallies(seqs).toPandas()  # every small table in one job
        small = small_views(counted)
    # the per-case table feeds the variants, the duration statistics and cases.csv: made
    # from the sequences once, not once for each, in few partitions (see _case_partitions)
    case_table = stack.enter_context(cached(
        views.cases.coalesce(_case_partitions(n_cases, n_events)), "cases", report=stats))
    # counted here and written later: the table (a row a variant) kept in between, not
    # aggregated from the cases again; the conformance replays its variants
    variants, stats.counts["variants"] = stack.enter_context(
        cached_rows(view_variants(case_table, n_cases), "variants", report=stats))
    views = replace(views, cases=case_table, variants=variants)
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
            conformance = check_conformance(case_table, variants, net, stack)
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
                                               dated, timezone, resource_tables(counted), span)
        for text in notes:
            stats.note(text)
    stats.counts["cases"] = n_cases
    stats.outputs["events"] = n_events
    rejects = rejects_of(rows, source, fields=REJECT_FIELDS)
    if not any(r[REASON] is not None for r in counts):
        # none, as counted: the writer writes the schema without reading every row again
        rejects = rejects.limit(0)
    return ProcessComputed(events=ev, views=views, small=small, rejects=rejects, stats=stats,
                           statistics=statistics, model=model, conformance=conformance,
                           events_in_order=in_order)


# cases a partition of the per-case table holds, and events its tasks read from the
# sequences (see _case_partitions)
CASES_PER_PARTITION = 200_000
EVENTS_PER_PARTITION = 4_000_000


def _case_partitions(n_cases: int, n_events: int) -> int:
    """Partitions for the cached per-case table of ``n_cases`` cases. It has a row a case,
    a small part of the events' bytes, and is read by many small aggregations (the
    statistics, the variants, the conformance) whose cost follows its partitions, not its
    rows: with the 64 partitions of the events it came from, bpic2012 x8's (105 k cases)
    took 9.1-16.5 s, with 2 partitions 1.2-2.3 s. Coalesced, with no shuffle, so the tasks
    that build it read the cases' whole sequences: one per ``EVENTS_PER_PARTITION`` of the
    ``n_events`` too (a few long cases are not read by two tasks). At least 2, so both
    cores of a small machine build it."""
    return max(2, -(-n_cases // CASES_PER_PARTITION), -(-n_events // EVENTS_PER_PARTITION))


_OBJECT_HASH_AGG = "spark.sql.execution.useObjectHashAggregateExec"


def _aggregating_in_order(spark: SparkSession, grouped: bool
                          ) -> AbstractContextManager[None]:
    """While the block plans (and fills) a cache of per-case aggregates of events that are
    ``grouped`` (each case whole in one partition, sorted by case: :func:`compute`'s cache),
    Spark aggregates them in their order, one case after another, rather than in a hash map
    of the cases, which past 128 cases in a task sorts its input all the same (bpic2012 x8's
    sequences: 1.6 s against 2.4-2.7 s). The session's setting is given back after."""
    return session_setting(spark, _OBJECT_HASH_AGG, "false") if grouped else nullcontext()


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


def _report_suspicious(stats: Stats, events: DataFrame, dated: tuple[str, str],
                       n: int) -> None:
    """Events with implausible dates (``n`` of them, dated outside ``dated``) are kept (as
    pm4py and Disco keep them) and reported; only when there are any are they looked up."""
    before, after = dated
    if not n:
        stats.counts["suspicious_timestamps"] = {"events": 0}
        return
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
