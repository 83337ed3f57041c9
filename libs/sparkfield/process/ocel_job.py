"""The event_log job for an object-centric mapping: OCEL 2.0 files, per-type flattened views,
an object-centric process map, rejects, and (``case_object_type``) a classic log for one type.

Outputs at the top of ``--output``: ``ocel.json``, ``ocel.sqlite``, ``ocel_views/<type>/``
(``dfg.csv``, ``variants.csv``, ``activities.csv``), ``ocel_map.dot`` / ``ocel_map.svg``,
``ocel_rejects/`` (Parquet: source, reason, record) and, with a case object type,
``classic_log/`` (``events/``, ``event_log.xes.gz``, ``event_log.csv.gz`` and the classic
views of that type's flattened log).
"""

from __future__ import annotations

import logging
from contextlib import ExitStack
from dataclasses import dataclass

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sparkfield.core.conf import Config
from sparkfield.core.errors import ConfigError, InputError
from sparkfield.core.io import AtomicOutput, optional_output
from sparkfield.core.practices import cached_rows
from sparkfield.core.report import RunReport, Stats
from sparkfield.core.stages import publish
from sparkfield.process import ocel_map, process_map, xes
from sparkfield.process.job import ProcessParams, ProcessResult
from sparkfield.process.ocel import OTYPE, OcelTables, build, reject_kinds
from sparkfield.process.ocel_mapping import OcelMapping
from sparkfield.process.ocel_views import flatten
from sparkfield.process.ocel_write import Types, log_types, write_json, write_sqlite
from sparkfield.process.schema import CASE, ORDER, SRC_ORDER
from sparkfield.process.views import Views, case_sequences, compute_views

log = logging.getLogger("sparkfield.process")


@dataclass
class OcelComputed:
    """What :func:`compute` returns. The tables stay cached until the ``stack`` given to
    compute closes, so the writers read them from the cache."""

    tables: OcelTables
    rows: dict[str, int]  # rows of every cached frame, by its name
    types: Types
    stats: Stats


@dataclass
class TypeViews:
    """What :func:`type_views` returns for one object type; ``events`` (its flattened log)
    stays cached until the ``stack`` given to it closes."""

    events: DataFrame
    views: Views
    small: dict[str, pd.DataFrame]  # dfg and activities, collected
    flattened: dict[str, int]  # cases, events, dfg_arcs
    stats: Stats


def run_ocel(spark: SparkSession, p: ProcessParams, mapping: OcelMapping, report: RunReport,
             cfg: Config) -> ProcessResult:
    if p.sample is not None and float(p.sample) < 1:
        raise ConfigError("sample is not supported for an object-centric mapping: an event "
                          "relates to many objects, so there is no whole case to keep")
    with report.step("plan"):  # reads headers and checks every expression, no data yet
        build(spark, mapping)
    report.counts["object_centric"] = True
    with optional_output(spark, p.output, report.job) as out, ExitStack() as stack:
        c = compute(spark, mapping, stack, p.mapping)
        report.merge(c.stats)
        t = c.tables
        small: dict[str, dict[str, pd.DataFrame]] = {}
        for otype in mapping.objects:
            # one type at a time: its flattened log is released once its views are written
            with report.step(f"views_{otype}"), ExitStack() as type_stack:
                tv = type_views(t, otype, type_stack)
                report.merge(tv.stats)
                report.counts.setdefault("flattened", {})[otype] = tv.flattened
                small[otype] = tv.small
                if out is not None:
                    _write_type_views(spark, out, otype, tv, otype == mapping.case_object_type)
        with report.step("ocel_map"):
            acts = (t.events.groupBy("activity").agg(F.count(F.lit(1)).alias("events"))
                    .orderBy(F.desc("events"), "activity").toPandas())
            dot = ocel_map.to_dot({k: v["dfg"] for k, v in small.items()}, acts, p.top_k_arcs)
        if out is not None:
            out.write_text("ocel_map.dot", dot)
            if p.render_map:
                with report.optional("ocel_map.svg"):
                    out.write_text("ocel_map.svg", process_map.render_svg(dot))
            with report.step("write_ocel_json"):
                write_json(spark, t, c.types, out.path("ocel.json"))
            with report.step("write_ocel_sqlite"):
                write_sqlite(spark, t, c.types, out.path("ocel.sqlite"), c.rows)
            with report.step("write_rejects"):
                out.write_parquet("ocel_rejects", t.rejects, partitions=1)
        main = mapping.case_object_type or next(iter(mapping.objects))
        report.counts["cases"] = report.counts["flattened"][main]["cases"]  # objects of it
        result = ProcessResult(events=t.events, views=small[main], report=report,
                               rejects=report.total_rejects, output=p.output)
        result.extras["ocel_views"] = small
        publish(spark, out, report, cfg.practices.skew_ratio_threshold,
                cfg.job.get("max_reject_fraction"))
    log.info(report.summary())
    return result


def compute(spark: SparkSession, mapping: OcelMapping, stack: ExitStack,
            input_name: str | None = None) -> OcelComputed:
    """The object-centric tables of ``mapping``, cached, with their rejects and what was
    counted. Writes nothing; raises InputError when no event is usable."""
    stats = Stats()
    rows: dict[str, int] = {}

    def keep(df: DataFrame, name: str) -> DataFrame:
        persisted, n = stack.enter_context(cached_rows(df, name, report=stats))
        rows[name] = n
        return persisted

    with stats.step("validate"):
        b = build(spark, mapping, keep)
        t = OcelTables(events=keep(b.events, "ocel_events"),
                       objects=keep(b.objects, "ocel_objects"), e2o=keep(b.e2o, "ocel_e2o"),
                       o2o=keep(b.o2o, "ocel_o2o"), changes=keep(b.changes, "ocel_changes"),
                       rejects=b.rejects)
        n_rejects = 0
        by_source: dict[str, int] = {}
        for r in t.rejects.groupBy("source", "reason").count().collect():
            stats.add_rejects(r["source"], {r["reason"]: r["count"]})
            by_source[r["source"]] = by_source.get(r["source"], 0) + r["count"]
            n_rejects += r["count"]
        per_type = {r[OTYPE]: r["count"] for r in t.objects.groupBy(OTYPE).count().collect()}
    if not rows["ocel_events"]:
        raise InputError(f"{input_name}: no usable events ({n_rejects} rejects)")
    stats.inputs.update(object_rows=rows["ocel_object_rows"],
                        event_rows=rows["ocel_event_rows"], e2o_relations=rows["ocel_e2o_rows"],
                        o2o_relations=rows.get("ocel_o2o_rows", 0),
                        object_changes=rows.get("ocel_change_rows", 0))
    lost = _lost(by_source, mapping)
    if lost:
        stats.note(f"left out of the log (reasons in ocel_rejects): {lost}")
    stats.outputs.update(events=rows["ocel_events"], objects=rows["ocel_objects"],
                         e2o=rows["ocel_e2o"], o2o=rows["ocel_o2o"],
                         object_changes=rows["ocel_changes"])
    stats.counts["objects_by_type"] = {n: per_type.get(n, 0) for n in mapping.objects}
    types = log_types(t, mapping)
    stats.counts["event_types"] = len(types.events)
    return OcelComputed(tables=t, rows=rows, types=types, stats=stats)


LOST_WORDS = {"objects": "objects", "events": "events", "e2o": "event-object relations",
              "o2o": "object-object relations", "changes": "attribute changes"}


def _lost(by_source: dict[str, int], mapping: OcelMapping) -> str:
    """What the validation left out, by kind, in words ('' when nothing)."""
    kinds = reject_kinds(mapping)
    lost: dict[str, int] = {}
    for source, n in by_source.items():
        kind = kinds.get(source, "events")
        lost[kind] = lost.get(kind, 0) + n
    return ", ".join(f"{lost[k]:,} {w}" for k, w in LOST_WORDS.items() if lost.get(k))


def type_views(t: OcelTables, otype: str, stack: ExitStack) -> TypeViews:
    """One object type's flattened log (cached) and its views."""
    stats = Stats()
    ev, n_events = stack.enter_context(cached_rows(flatten(t, otype), f"flat_{otype}",
                                                   report=stats))
    seqs, n_cases = stack.enter_context(cached_rows(case_sequences(ev), f"seqs_{otype}",
                                                    report=stats))
    views = compute_views(ev, seqs, n_cases)
    small = {"dfg": views.dfg.toPandas(), "activities": views.activities.toPandas()}
    return TypeViews(events=ev, views=views, small=small,
                     flattened={"cases": n_cases, "events": n_events,
                                "dfg_arcs": len(small["dfg"])}, stats=stats)


def _write_type_views(spark: SparkSession, out: AtomicOutput, otype: str, tv: TypeViews,
                      classic: bool) -> None:
    """One object type's views (and, for the case object type, the classic log)."""
    base = f"ocel_views/{otype}"  # dfg and activities are small: written from the driver
    out.write_csv(f"{base}/dfg.csv", tv.small["dfg"])
    out.write_single_csv(f"{base}/variants.csv", tv.views.variants.select(
        "variant", "cases", "share", "mean_duration_s"))
    out.write_csv(f"{base}/activities.csv", tv.small["activities"])
    if classic:
        _classic(spark, out, tv.events, tv.views)


def _classic(spark: SparkSession, out: AtomicOutput, ev: DataFrame, views: Views) -> None:
    """The case object type's flattened log as a classic event log under ``classic_log/``."""
    out.write_parquet("classic_log/events", ev.repartition(CASE)
                      .sortWithinPartitions(CASE, *ORDER).drop(SRC_ORDER))
    for name in ("dfg", "activities", "start_activities", "end_activities"):
        out.write_single_csv(f"classic_log/{name}.csv", getattr(views, name))
    out.write_single_csv("classic_log/variants.csv", views.variants.select(
        "variant", "cases", "share", "mean_duration_s"))
    xes.write_csv_gz(spark, ev, out.path("classic_log/event_log.csv.gz"))
    xes.write_xes_gz(spark, ev, out.path("classic_log/event_log.xes.gz"))
