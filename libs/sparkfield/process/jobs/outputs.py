"""A classic log's run after its rows are classified: :func:`finish` computes (:mod:`.compute`),
writes every output through one atomic writer and publishes the run report."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from sparkfield.core.io import AtomicOutput, optional_output
from sparkfield.core.report import RunReport
from sparkfield.core.spark_ui import publish
from sparkfield.process.analysis import petri, process_map
from sparkfield.process.analysis.filter_plan import FilterCall
from sparkfield.process.analysis.petri import to_pnml
from sparkfield.process.eventlog import xes
from sparkfield.process.eventlog.read import log_format
from sparkfield.process.eventlog.schema import (
    CASE,
    ORDER,
    SRC_ORDER,
)
from sparkfield.process.jobs.compute import ProcessComputed, compute
from sparkfield.process.jobs.conformance_step import (
    load_model,
)
from sparkfield.process.jobs.params import (
    export_formats,
)
from sparkfield.process.jobs.result import ProcessResult

log = logging.getLogger("sparkfield.process")


def finish(spark: SparkSession, p: Any, classified: DataFrame, source: Column,
           report: RunReport, labels: dict[int, str], skew_ratio: float,
           input_name: str | None, log_filters: Sequence[FilterCall] = (),
           timezone: str = "UTC", unique_order: bool = False) -> ProcessResult:
    """Compute the classic log (:func:`compute`), write its outputs into ``p.output`` (when
    set) through one atomic writer, and publish the run report. ``unique_order``: every
    event's ``row_order`` differs from the others' (one log file's), so no two events of a case
    are alike in all of the event order."""
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
            write_outputs(spark, p, out, c, report, unique_order)
        publish(spark, out, report, skew_ratio, p.max_reject_fraction)
    log.info(report.summary())
    return result


def write_outputs(spark: SparkSession, p: Any, out: AtomicOutput, c: ProcessComputed,
                  report: RunReport, unique_order: bool = False) -> None:
    """Every output of the run, each file from frames already kept or results already
    collected: written side by side (:meth:`~sparkfield.core.report.Stats.side_by_side`)."""
    ev, views, small = c.events, c.views, c.small
    # the statistics' figures are drawn in the background while the other outputs are written
    pngs = c.statistics.pngs_in_background() if c.statistics is not None else {}
    parts: dict[str, Callable[[], object]] = {}

    def events() -> None:  # each case's events in one file, in event order
        ordered = ev if c.events_in_order else \
            ev.repartition(CASE).sortWithinPartitions(CASE, *ORDER)
        out.write_parquet("events", ordered.drop(SRC_ORDER))

    def write_views() -> None:
        for name in ("dfg", "activities", "start_activities", "end_activities"):
            out.write_csv(f"{name}.csv", small[name])  # collected by compute: not again
        out.write_single_csv("variants.csv", views.variants.select("variant", "cases", "share",
                                                                     "mean_duration_s"))

    def write_cases() -> None:
        out.write_single_csv("cases.csv", views.cases.orderBy(CASE).select(
            CASE, F.date_format("start", "yyyy-MM-dd'T'HH:mm:ss.SSSXXX").alias("start"),
            F.date_format("end", "yyyy-MM-dd'T'HH:mm:ss.SSSXXX").alias("end"),
            "duration_s", "events", "variant"))

    # the per-case tables' jobs submitted first (jobs are submitted in this order): each
    # samples its sort's ranges before its tasks start
    parts["write_views"] = write_views
    parts["write_cases"] = write_cases
    conformance = c.conformance
    if conformance is not None:
        def conformance_files() -> None:
            out.write_single_csv("conformance/cases.csv", conformance.cases.orderBy(CASE))
            out.write_csv("conformance/non_fitting_variants.csv", conformance.non_fitting)

        parts["write_conformance"] = conformance_files
    parts["write_events"] = events
    formats = export_formats(p.exports, log_format(p.log) if getattr(p, "log", None)
                             else None)
    if "csv" in formats:
        parts["write_csv_log"] = lambda: xes.write_csv_gz(
            spark, ev, out.path("event_log.csv.gz"), in_order=c.events_in_order,
            ties=not unique_order)
    if "xes" in formats:
        parts["write_xes"] = lambda: xes.write_xes_gz(
            spark, ev, out.path("event_log.xes.gz"), in_order=c.events_in_order)

    def process_map_files() -> None:
        dot = process_map.to_dot(small["dfg"], small["activities"], small["start_activities"],
                                 small["end_activities"], p.top_k_arcs)
        out.write_text("process_map.dot", dot)
        if p.render_map:
            with report.optional("process_map.svg"):
                out.write_text("process_map.svg", process_map.render_svg(dot))

    parts["process_map"] = process_map_files
    model = c.model
    if model is not None:
        def model_files() -> None:
            out.write_text("model/process_tree.txt", model.tree.to_string() + "\n")
            out.write_bytes("model/model.pnml", to_pnml(model.net))
            if p.render_map:
                with report.optional("model/model.svg"):
                    out.write_text("model/model.svg", petri.to_svg(model.net))

        parts["write_model"] = model_files
    statistics = c.statistics
    if statistics is not None:
        def statistics_files() -> None:
            for name, text in statistics.csv_files().items():
                out.write_text(name, text)
            for name, drawn in pngs.items():
                data, failed = drawn.result()  # a figure that cannot be made stops the run
                with report.optional(name):
                    if failed is not None:
                        raise failed
                    out.write_bytes(name, data)

        parts["write_statistics"] = statistics_files
    parts["write_rejects"] = lambda: out.write_parquet("rejects", c.rejects, partitions=1)
    report.side_by_side("write_outputs", parts)
    report.outputs["dfg_arcs"] = len(small["dfg"])
    report.outputs["activities"] = len(small["activities"])
