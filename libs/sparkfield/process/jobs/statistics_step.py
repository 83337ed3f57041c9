"""The statistics the event_log and process_mining jobs write beside their views (Disco's
statistics tab): :mod:`sparkfield.process.analysis.statistics` on the job's events, collected
(each table is as small as its periods, activities and resources) and drawn."""

from __future__ import annotations

import io
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sparkfield.core.collect import collect_small
from sparkfield.process.analysis import statistics as st
from sparkfield.process.eventlog.events import EVENT_ORDER, with_event_order
from sparkfield.process.eventlog.schema import RESOURCE, TIMESTAMP

if TYPE_CHECKING:
    from matplotlib.figure import Figure

DURATION_BINS = 20


@dataclass
class LogStatistics:
    """The statistics tables of one log, collected: name -> pandas frame."""

    period: str
    tables: dict[str, pd.DataFrame]

    def csv_files(self) -> dict[str, str]:
        """``statistics/<name>.csv`` -> its text."""
        return {f"statistics/{name}.csv": frame.to_csv(index=False)
                for name, frame in self.tables.items()}

    def figure_makers(self) -> dict[str, Callable[[], Figure]]:
        """``statistics/<name>.png`` -> what draws its figure."""
        t = self.tables
        makers: dict[str, Callable[[], Figure]] = {
            "over_time": lambda: st.over_time_figure(
                t["events_over_time"], t["active_cases_over_time"], self.period),
            "case_durations": lambda: st.case_duration_figure(t["case_duration_histogram"]),
            "activities": lambda: st.activities_figure(t["activities"]),
        }
        if not t["resources"].empty:
            makers["resources"] = lambda: st.resources_figure(t["resources"])
            makers["resource_activity"] = lambda: st.resource_activity_figure(
                t["resource_activity"])
        return {f"statistics/{name}.png": make for name, make in makers.items()}

    def pngs_in_background(self) -> dict[str, Future[tuple[bytes | None, Exception | None]]]:
        """Every figure drawn to PNG on a thread of its own, started now: drawing is the
        driver's Python work, so it runs while the job's other outputs are written by Spark
        (the main thread waits on the JVM meanwhile). Each future gives the PNG bytes, or
        None and what saving the figure raised; it raises what making the figure raised
        (a missing plotting library among them), as drawing on the main thread would."""
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="statistics-figures")
        try:
            return {name: pool.submit(_draw, make)
                    for name, make in self.figure_makers().items()}
        finally:
            pool.shutdown(wait=False)  # the queued figures are still drawn


def _draw(make: Callable[[], Figure]) -> tuple[bytes | None, Exception | None]:
    fig = make()
    try:
        return png(fig), None
    except Exception as exc:  # reported by the caller, as an optional output is
        return None, exc


def png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def log_statistics(events: DataFrame, cases: DataFrame, period: str,
                   dated: tuple[str, str], timezone: str = "UTC",
                   counted: dict[str, pd.DataFrame] | None = None,
                   span: dict[str, Any] | None = None) -> tuple[LogStatistics, list[str]]:
    """The statistics of the job's canonical ``events`` (cached) and its per-case table
    ``cases`` (case_id, start, end, duration_s, ...) per ``period`` (hour, day, week or month:
    wall-clock periods in ``timezone``, the log's), and notes on what the over-time tables
    leave out. Those count only the events dated within ``dated`` (the job's plausible range:
    a placeholder date such as 0001-01-01 would stretch them over centuries), and are left
    out when they would hold over ``MAX_PERIODS`` periods. ``counted``: the activities,
    resources, resource_activity and handover_of_work tables already collected (the job's
    :func:`sparkfield.process.analysis.views.resource_tables`, from the per-case sequences), so no
    pass over the events makes them again. ``span``: the events' count (``all``), how many
    are dated within ``dated`` (``n``) and the earliest and latest of those (``lo``, ``hi``),
    already counted (:func:`sparkfield.process.eventlog.events.date_tallies`), so no pass
    counts them again."""
    ordered = with_event_order(events)
    keys = {"order_col": EVENT_ORDER, "checked": True}  # validated events
    timed, notes = _over_time(ordered, cases, period, dated, timezone, span)
    frames = {
        **timed,
        "case_duration_histogram": st.case_duration_histogram(cases, DURATION_BINS),
        "case_duration_summary": st.case_duration_summary(cases),
        **(counted if counted is not None else {
            "activities": st.activity_frequencies(ordered, **keys),
            "resources": st.resource_frequencies(ordered, resource_col=RESOURCE, **keys),
            "resource_activity": st.resource_activity_matrix(ordered, resource_col=RESOURCE,
                                                             **keys),
            "handover_of_work": st.handover_of_work(ordered, resource_col=RESOURCE, **keys),
        }),
    }
    return LogStatistics(period, collect_small(frames)), notes


MAX_PERIODS = 20_000  # over-time tables longer than this are left out (a coarser period fits)
_PERIOD_SECONDS = {"hour": 3_600, "day": 86_400, "week": 604_800, "month": 2_629_746}


def _over_time(events: DataFrame, cases: DataFrame, period: str, dated: tuple[str, str],
               timezone: str, span: dict[str, Any] | None = None
               ) -> tuple[dict[str, DataFrame | pd.DataFrame], list[str]]:
    """The two over-time tables of the events dated within ``dated``, or empty ones. When
    every event is, the active cases come from the per-case table (start, end)."""
    ts = F.col(TIMESTAMP)
    dated_in = ts.between(F.to_timestamp(F.lit(dated[0])), F.to_timestamp(F.lit(dated[1])))
    inside = events.where(dated_in)
    if span is None:  # the span of the dated events and how many are not, in one pass
        span = events.agg(F.count(F.lit(1)).alias("all"), F.count_if(dated_in).alias("n"),
                          F.min(F.when(dated_in, ts)).alias("lo"),
                          F.max(F.when(dated_in, ts)).alias("hi")).first().asDict()
    notes = []
    left_out = int(span["all"]) - int(span["n"])
    if left_out:
        notes.append(f"statistics over time: {left_out} event(s) dated outside {dated[0]} .. "
                     f"{dated[1]} left out")
    periods = ((span["hi"] - span["lo"]).total_seconds() / _PERIOD_SECONDS[period]
               if span["n"] else 0)
    if periods > MAX_PERIODS:
        notes.append(f"statistics over time left out: {periods:,.0f} {period}s from "
                     f"{span['lo']} to {span['hi']}; choose a longer statistics_period")
        return {"events_over_time": pd.DataFrame(columns=["period_start", "events"]),
                "active_cases_over_time": pd.DataFrame(columns=["period_start", "cases"])}, notes
    keys = {"order_col": EVENT_ORDER, "timezone": timezone, "checked": True}
    active = (st.active_cases_over_time(inside, period, **keys) if left_out else
              st.active_cases_from_cases(cases, period, timezone=timezone))
    return {"events_over_time": st.events_over_time(inside, period, **keys),
            "active_cases_over_time": active}, notes
