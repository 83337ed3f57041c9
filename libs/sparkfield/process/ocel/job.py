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
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sparkfield.core.errors import ConfigError, InputError
from sparkfield.core.io import AtomicOutput, optional_output
from sparkfield.core.practices import cached_rows
from sparkfield.core.report import RunReport, Stats
from sparkfield.core.stages import publish
from sparkfield.process import process_map, xes
from sparkfield.process.ocel import process_map as ocel_map
from sparkfield.process.ocel.build import OTYPE, OcelPlan, OcelTables, plan, reject_kinds, validate
from sparkfield.process.ocel.mapping import OcelMapping
from sparkfield.process.ocel.views import VARIANT_COLUMNS, TypeViews, type_views
from sparkfield.process.ocel.write import Types, log_types, write_json, write_sqlite
from sparkfield.process.params import export_formats
from sparkfield.process.result import ProcessResult
from sparkfield.process.schema import CASE, ORDER, SRC_ORDER
from sparkfield.process.views import Views

log = logging.getLogger("sparkfield.process")

LOST_WORDS = {"objects": "objects", "events": "events", "e2o": "event-object relations",
              "o2o": "object-object relations", "changes": "attribute changes"}


@dataclass
class OcelComputed:
    """What :func:`compute` returns. The tables and each type's variants (and the case
    object type's flattened log) stay cached until the ``stack`` given to compute closes, so
    the writers read them from the cache."""

    tables: OcelTables
    rows: dict[str, int]  # rows of every cached table, by its name
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
    with report.step("plan"):  # reads headers and checks every expression, no data yet
        planned = plan(spark, mapping)
    report.counts["object_centric"] = True
    with optional_output(spark, p.output, report.job) as out, ExitStack() as stack:
        c = compute(planned, stack, p.top_k_arcs, p.mapping)
        report.merge(c.stats)
        small = {otype: tv.small for otype, tv in c.views.items()}
        result = ProcessResult(events=c.tables.events, views=small[mapping.main_type],
                               report=report, rejects=report.total_rejects, output=p.output)
        result.extras["ocel_views"] = small
        result.extras["ocel"] = c.tables  # read again from the sources once the run is over
        if out is not None:
            _write(spark, p, out, c, mapping, report)
        publish(spark, out, report, skew_ratio, p.max_reject_fraction)
    log.info(report.summary())
    return result


def compute(planned: OcelPlan, stack: ExitStack, top_k_arcs: int | None = None,
            input_name: str | None = None) -> OcelComputed:
    """The planned log validated into its tables (cached), with their rejects, each object
    type's flattened views, the process map and what was counted. Writes nothing; raises
    InputError when no event is usable."""
    stats = Stats()
    rows: dict[str, int] = {}

    def keep(df: DataFrame, name: str) -> DataFrame:
        persisted, n = stack.enter_context(cached_rows(df, name, report=stats))
        rows[name] = n
        return persisted

    mapping = planned.mapping
    with stats.step("validate"):
        t = _cached_tables(validate(planned, keep), keep)
        by_source = _count_rejects(t.rejects, stats)
        per_type = {r[OTYPE]: r["count"] for r in t.objects.groupBy(OTYPE).count().collect()}
    if not rows["ocel_events"]:
        raise InputError(f"{input_name}: no usable events ({sum(by_source.values())} rejects)")
    _count_rows(stats, rows)
    lost = _lost(by_source, mapping)
    if lost:
        stats.note(f"left out of the log (reasons in ocel_rejects): {lost}")
    stats.counts["objects_by_type"] = {n: per_type.get(n, 0) for n in mapping.objects}
    types = log_types(t, mapping)
    stats.counts["event_types"] = len(types.events)
    views = _all_type_views(t, mapping, stack, stats)
    with stats.step("ocel_map"):
        dot = _map(t, views, top_k_arcs)
    return OcelComputed(tables=t, rows=rows, types=types, views=views, map_dot=dot, stats=stats)


def _cached_tables(b: OcelTables, keep: Any) -> OcelTables:
    return OcelTables(events=keep(b.events, "ocel_events"),
                      objects=keep(b.objects, "ocel_objects"), e2o=keep(b.e2o, "ocel_e2o"),
                      o2o=keep(b.o2o, "ocel_o2o"), changes=keep(b.changes, "ocel_changes"),
                      rejects=b.rejects)


def _count_rejects(rejects: DataFrame, stats: Stats) -> dict[str, int]:
    """Rejects by source and reason into ``stats``; the number by source."""
    by_source: dict[str, int] = {}
    for r in rejects.groupBy("source", "reason").count().collect():
        stats.add_rejects(r["source"], {r["reason"]: r["count"]})
        by_source[r["source"]] = by_source.get(r["source"], 0) + r["count"]
    return by_source


def _count_rows(stats: Stats, rows: dict[str, int]) -> None:
    """Rows read (before validation) and written, by kind."""
    stats.inputs.update(object_rows=rows["ocel_object_rows"],
                        event_rows=rows["ocel_event_rows"], e2o_relations=rows["ocel_e2o_rows"],
                        o2o_relations=rows.get("ocel_o2o_rows", 0),
                        object_changes=rows.get("ocel_change_rows", 0))
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


def _all_type_views(t: OcelTables, mapping: OcelMapping, stack: ExitStack, stats: Stats
                    ) -> dict[str, TypeViews]:
    """Every object type's views, one type at a time; the case object type's flattened log
    is kept for its classic log."""
    views: dict[str, TypeViews] = {}
    for otype in mapping.objects:
        with stats.step(f"views_{otype}"):
            views[otype] = type_views(t, otype, stack, stats,
                                      keep_log=otype == mapping.case_object_type)
    stats.counts["flattened"] = {otype: tv.flattened for otype, tv in views.items()}
    stats.counts["cases"] = views[mapping.main_type].flattened["cases"]  # objects of it
    return views


def _map(t: OcelTables, views: dict[str, TypeViews], top_k_arcs: int | None) -> str:
    """The object-centric process map: the activities over the whole log, each type's arcs."""
    acts = (t.events.groupBy("activity").agg(F.count(F.lit(1)).alias("events"))
            .orderBy(F.desc("events"), "activity").toPandas())
    return ocel_map.to_dot({k: v.small["dfg"] for k, v in views.items()}, acts, top_k_arcs)


def _write(spark: SparkSession, p: Any, out: AtomicOutput, c: OcelComputed,
           mapping: OcelMapping, report: RunReport) -> None:
    with report.step("write_ocel_views"):
        for otype, tv in c.views.items():
            _write_type_views(out, otype, tv)
    case_type = mapping.case_object_type
    if case_type is not None:
        with report.step("write_classic_log"):
            tv = c.views[case_type]
            _classic(spark, out, tv.events, tv.views, tv.variants,
                     export_formats(p.exports, None))
    out.write_text("ocel_map.dot", c.map_dot)
    if p.render_map:
        with report.optional("ocel_map.svg"):
            out.write_text("ocel_map.svg", process_map.render_svg(c.map_dot))
    with report.step("write_ocel_json"):
        write_json(spark, c.tables, c.types, out.path("ocel.json"))
    with report.step("write_ocel_sqlite"):
        write_sqlite(spark, c.tables, c.types, out.path("ocel.sqlite"), c.rows)
    with report.step("write_rejects"):
        out.write_parquet("ocel_rejects", c.tables.rejects, partitions=1)


def _write_type_views(out: AtomicOutput, otype: str, tv: TypeViews) -> None:
    """One object type's views; dfg and activities are small: written from the driver."""
    base = f"ocel_views/{otype}"
    out.write_csv(f"{base}/dfg.csv", tv.small["dfg"])
    out.write_single_csv(f"{base}/variants.csv", tv.variants)
    out.write_csv(f"{base}/activities.csv", tv.small["activities"])


def _classic(spark: SparkSession, out: AtomicOutput, ev: DataFrame, views: Views,
             variants: DataFrame, formats: tuple[str, ...]) -> None:
    """The case object type's flattened log as a classic event log under ``classic_log/``,
    exported in ``formats`` (the job's ``exports``)."""
    out.write_parquet("classic_log/events", ev.repartition(CASE)
                      .sortWithinPartitions(CASE, *ORDER).drop(SRC_ORDER))
    for name in ("dfg", "activities", "start_activities", "end_activities"):
        out.write_single_csv(f"classic_log/{name}.csv", getattr(views, name))
    out.write_single_csv("classic_log/variants.csv", variants.select(*VARIANT_COLUMNS))
    if "csv" in formats:
        xes.write_csv_gz(spark, ev, out.path("classic_log/event_log.csv.gz"))
    if "xes" in formats:
        xes.write_xes_gz(spark, ev, out.path("classic_log/event_log.xes.gz"))
