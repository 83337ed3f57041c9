"""The event_log job for an object-centric mapping: OCEL 2.0 files, per-type flattened views,
an object-centric process map, rejects, and (``case_object_type``) a classic log for one type.

Outputs at the top of ``--output``: ``ocel.json``, ``ocel.sqlite``, ``ocel_views/<type>/``
(``dfg.csv``, ``variants.csv``, ``activities.csv``), ``ocel_map.dot`` / ``ocel_map.svg``,
``ocel_rejects/`` (Parquet: source, reason, record) and, with a case object type,
``classic_log/`` (``events/``, ``event_log.xes.gz``, ``event_log.csv.gz`` and the classic
views of that type's flattened log).

:func:`run_ocel` plans the log, then :func:`compute` (pure: the plan in; the tables, views,
map and counts out) and writes the outputs atomically.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import pandas as pd
from pyspark.sql import SparkSession

from sparkfield.core.errors import ConfigError, InputError
from sparkfield.core.io import AtomicOutput, optional_output
from sparkfield.core.keep import Keeper
from sparkfield.core.report import RunReport, Stats
from sparkfield.core.spark_ui import publish
from sparkfield.process.analysis import process_map
from sparkfield.process.eventlog import xes
from sparkfield.process.eventlog.schema import CASE, ORDER, SRC_ORDER
from sparkfield.process.jobs.params import export_formats
from sparkfield.process.jobs.result import ProcessResult
from sparkfield.process.ocel import process_map as ocel_map
from sparkfield.process.ocel.build import OcelPlan, OcelTables, plan, reject_kinds, validate
from sparkfield.process.ocel.mapping import OcelMapping
from sparkfield.process.ocel.views import TypeViews, all_type_views
from sparkfield.process.ocel.write import Types, log_types, write_json, write_sqlite

log = logging.getLogger("sparkfield.process")

LOST_WORDS = {"objects": "objects", "events": "events", "e2o": "event-object relations",
              "o2o": "object-object relations", "changes": "attribute changes"}


@dataclass
class OcelComputed:
    """What :func:`compute` returns. The tables and each type's variants (and the case
    object type's flattened log) are kept (cached until the ``stack`` given to compute
    closes, or local checkpoints), so the writers read them as computed once."""

    tables: OcelTables
    rows: dict[str, int]  # rows of every kept table, by its name
    types: Types
    views: dict[str, TypeViews]  # by object type, in mapping order
    map_dot: str  # the object-centric process map (DOT)
    stats: Stats


def run_ocel(spark: SparkSession, p: Any, mapping: OcelMapping, report: RunReport,
             skew_ratio: float) -> ProcessResult:
    """The object-centric log of ``mapping`` with event_log's parsed parameters ``p``."""
    if p.sample is not None and p.sample < 1:
        raise ConfigError("sample is not supported for an object-centric mapping: an event "
                          "relates to many objects, so there is no whole case to keep")
    with ExitStack() as stack:
        keep = Keeper(stack, release_checkpoints=False)  # the result's tables stay readable
        with report.step("plan"):  # reads headers and checks every expression, no data yet
            planned = plan(spark, mapping, keep)
        report.counts["object_centric"] = True
        return _computed(spark, p, mapping, report, skew_ratio, planned, keep)


def _computed(spark: SparkSession, p: Any, mapping: OcelMapping, report: RunReport,
              skew_ratio: float, planned: OcelPlan, keep: Keeper) -> ProcessResult:
    """The planned log computed and written (while ``keep``'s frames are kept)."""
    with optional_output(spark, p.output, report.job) as out:
        c = compute(planned, keep.stack, p.top_k_arcs, p.mapping, keep)
        report.merge(c.stats)
        small = {otype: tv.small for otype, tv in c.views.items()}
        result = ProcessResult(events=c.tables.events, views=small[mapping.main_type],
                               report=report, rejects=report.total_rejects, output=p.output)
        result.extras["ocel_views"] = small
        result.extras["ocel"] = c.tables  # after the run: from the sources (cached) or checkpoints
        if out is not None:
            _write(spark, p, out, c, mapping, report)
        publish(spark, out, report, skew_ratio, p.max_reject_fraction)
    log.info(report.summary())
    return result


def compute(planned: OcelPlan, stack: ExitStack, top_k_arcs: int | None = None,
            input_name: str | None = None, keep: Keeper | None = None) -> OcelComputed:
    """The planned log validated into its tables (kept: cached, or local checkpoints as the
    session's ``spark.sparkfield.keep`` says, see :mod:`sparkfield.core.keep`), with their
    rejects, each object type's flattened views, the process map and what was counted.
    Writes nothing; raises InputError when no event is usable. ``keep``: the keeper
    ``planned`` was planned with, if any (its frames are then listed with the others).

    Validation is one Spark action: the tallies of every row set (rows by source and reject
    reason, objects by type, kept events by activity) are aggregated together, and computing
    them fills the kept frames that the log's tables, the views and the writers read."""
    stats = Stats()
    keep = keep if keep is not None else Keeper(stack)
    mapping = planned.mapping
    with stats.step("validate"):
        t = validate(planned, keep)
        tallies = t.tallies.collect()
    rows = _rows(tallies)
    stats.cached.extend({"name": n, "level": keep.level, "rows": rows.get(n)}
                        for n in keep.names)
    by_source = _count_rejects(tallies, stats)
    if not rows["ocel_events"]:
        raise InputError(f"{input_name}: no usable events ({sum(by_source.values())} rejects)")
    _count_rows(stats, rows)
    lost = _lost(by_source, mapping)
    if lost:
        stats.note(f"left out of the log (reasons in ocel_rejects): {lost}")
    per_type = _sum(tallies, "objects", lambda r: r["detail"], kept_only=True)
    stats.counts["objects_by_type"] = {n: per_type.get(n, 0) for n in mapping.objects}
    acts = _sum(tallies, "events", lambda r: (r["detail"], r["src_order"]), kept_only=True)
    types = log_types(t, mapping, acts)
    stats.counts["event_types"] = len(types.events)
    with stats.step("views"):
        views = all_type_views(t, mapping, keep, stats)
    stats.counts["flattened"] = {otype: tv.flattened for otype, tv in views.items()}
    stats.counts["cases"] = views[mapping.main_type].flattened["cases"]  # objects of it
    with stats.step("ocel_map"):
        dot = _map(acts, views, top_k_arcs)
    return OcelComputed(tables=t, rows=rows, types=types, views=views, map_dot=dot, stats=stats)


# the cached tables' names (as in the run report) by tally kind
_TABLES = {"objects": ("ocel_object_rows", "ocel_objects"),
           "events": ("ocel_event_rows", "ocel_events"), "e2o": ("ocel_e2o_rows", None),
           "o2o": ("ocel_o2o_rows", None), "changes": ("ocel_change_rows", None),
           "e2o_kept": (None, "ocel_e2o"), "o2o_kept": (None, "ocel_o2o"),
           "changes_kept": (None, "ocel_changes")}


def _rows(tallies: list) -> dict[str, int]:
    """Rows of every table by its name: all the rows of a row set, and its kept rows (the
    kept objects and events; the relations and changes once their duplicates are dropped)."""
    rows = {n: 0 for names in _TABLES.values() for n in names if n is not None}
    for r in tallies:
        read, good = _TABLES[r["kind"]]
        if read is not None:
            rows[read] += r["n"]
        if good is not None and (r["kind"].endswith("_kept") or r["reason"] is None):
            rows[good] += r["n"]
    return rows


def _sum(tallies: list, kind: str, key: Any, kept_only: bool = False) -> dict:
    """The tallied rows of ``kind`` summed by ``key(row)``."""
    out: dict = {}
    for r in tallies:
        if r["kind"] == kind and not (kept_only and r["reason"] is not None):
            out[key(r)] = out.get(key(r), 0) + r["n"]
    return out


def _count_rejects(tallies: list, stats: Stats) -> dict[str, int]:
    """Rejects by source and reason into ``stats``; the number by source."""
    by_source: dict[str, int] = {}
    for r in tallies:
        if r["reason"] is None:
            continue
        stats.add_rejects(r["source"], {r["reason"]: r["n"]})
        by_source[r["source"]] = by_source.get(r["source"], 0) + r["n"]
    return by_source


def _count_rows(stats: Stats, rows: dict[str, int]) -> None:
    """Rows read (before validation) and written, by kind."""
    stats.inputs.update(object_rows=rows["ocel_object_rows"],
                        event_rows=rows["ocel_event_rows"], e2o_relations=rows["ocel_e2o_rows"],
                        o2o_relations=rows["ocel_o2o_rows"],
                        object_changes=rows["ocel_change_rows"])
    stats.outputs.update(events=rows["ocel_events"], objects=rows["ocel_objects"],
                         e2o=rows["ocel_e2o"], o2o=rows["ocel_o2o"],
                         object_changes=rows["ocel_changes"])


def _lost(by_source: dict[str, int], mapping: OcelMapping) -> str:
    """What the validation left out, by kind, in words ('' when nothing)."""
    kinds = reject_kinds(mapping)
    lost: dict[str, int] = {}
    for source, n in by_source.items():
        kind = kinds.get(source, "events")
        lost[kind] = lost.get(kind, 0) + n
    return ", ".join(f"{lost[k]:,} {w}" for k, w in LOST_WORDS.items() if lost.get(k))


def _map(acts: dict[tuple[str, int], int], views: dict[str, TypeViews],
         top_k_arcs: int | None) -> str:
    """The object-centric process map: the activities over the whole log (the kept events'
    tally), each type's arcs."""
    events: dict[str, int] = {}
    for (activity, _), n in acts.items():
        events[activity] = events.get(activity, 0) + n
    table = pd.DataFrame(sorted(events.items(), key=lambda kv: (-kv[1], kv[0])),
                         columns=["activity", "events"])
    return ocel_map.to_dot({k: v.small["dfg"] for k, v in views.items()}, table, top_k_arcs)


def _write(spark: SparkSession, p: Any, out: AtomicOutput, c: OcelComputed,
           mapping: OcelMapping, report: RunReport) -> None:
    with report.step("write_ocel_views"):
        for otype, tv in c.views.items():
            _write_type_views(out, otype, tv)
    out.write_text("ocel_map.dot", c.map_dot)
    if p.render_map:
        with report.optional("ocel_map.svg"):
            out.write_text("ocel_map.svg", process_map.render_svg(c.map_dot))
    parts: dict[str, Callable[[], object]] = {}
    case_type = mapping.case_object_type
    if case_type is not None:
        parts["write_classic_log"] = lambda: _classic(spark, out, c.views[case_type],
                                                      export_formats(p.exports, None))
    parts["write_ocel_json"] = lambda: write_json(spark, c.tables, c.types,
                                                  out.path("ocel.json"), c.rows)
    parts["write_ocel_sqlite"] = lambda: write_sqlite(spark, c.tables, c.types,
                                                      out.path("ocel.sqlite"), c.rows,
                                                      p.sqlite_part_rows)
    parts["write_rejects"] = lambda: out.write_parquet("ocel_rejects", c.tables.rejects,
                                                       partitions=1)
    # different files from frames already kept: written side by side
    report.side_by_side("write_logs", parts)


def _write_type_views(out: AtomicOutput, otype: str, tv: TypeViews) -> None:
    """One object type's views; dfg and activities are small: written from the driver."""
    base = f"ocel_views/{otype}"
    out.write_csv(f"{base}/dfg.csv", tv.small["dfg"])
    _write_variants(out, f"{base}/variants.csv", tv)
    out.write_csv(f"{base}/activities.csv", tv.small["activities"])


def _write_variants(out: AtomicOutput, name: str, tv: TypeViews) -> None:
    """Collected with the small views (a small log): from the driver; else by Spark."""
    if "variants" in tv.small:
        out.write_csv(name, tv.small["variants"])
    else:
        out.write_single_csv(name, tv.variants)


def _classic(spark: SparkSession, out: AtomicOutput, tv: TypeViews,
             formats: tuple[str, ...]) -> None:
    """The case object type's flattened log as a classic event log under ``classic_log/``,
    exported in ``formats`` (the job's ``exports``). The views are small and collected:
    written from the driver, as the classic job writes them."""
    ev = tv.events
    out.write_parquet("classic_log/events", ev.repartition(CASE)
                      .sortWithinPartitions(CASE, *ORDER).drop(SRC_ORDER))
    for name in ("dfg", "activities", "start_activities", "end_activities"):
        out.write_csv(f"classic_log/{name}.csv", tv.small[name])
    _write_variants(out, "classic_log/variants.csv", tv)
    if "csv" in formats:
        xes.write_csv_gz(spark, ev, out.path("classic_log/event_log.csv.gz"))
    if "xes" in formats:
        xes.write_xes_gz(spark, ev, out.path("classic_log/event_log.xes.gz"))
