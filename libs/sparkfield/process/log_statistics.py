"""The statistics the event_log and process_mining jobs write beside their views (Disco's
statistics tab): :mod:`sparkfield.process.statistics` on the job's events, collected (each table
is as small as its periods, activities and resources) and drawn."""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sparkfield.process import statistics as st
from sparkfield.process.schema import RESOURCE, ROW_ORDER, SRC_ORDER

if TYPE_CHECKING:
    from matplotlib.figure import Figure

ORDER_COL = "__stats_order"  # the events' order (source, then row) as one column
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

    def figures(self) -> dict[str, Figure]:
        """``statistics/<name>.png`` -> its figure."""
        t = self.tables
        figs = {
            "over_time": st.over_time_figure(t["events_over_time"], t["active_cases_over_time"],
                                             self.period),
            "case_durations": st.case_duration_figure(t["case_duration_histogram"]),
            "activities": st.activities_figure(t["activities"]),
        }
        if not t["resources"].empty:
            figs["resources"] = st.resources_figure(t["resources"])
            figs["resource_activity"] = st.resource_activity_figure(t["resource_activity"])
        return {f"statistics/{name}.png": fig for name, fig in figs.items()}


def png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def log_statistics(events: DataFrame, cases: DataFrame, period: str) -> LogStatistics:
    """The statistics of the job's canonical ``events`` (cached) and its per-case table
    ``cases`` (case_id, duration_s, ...) per ``period`` (hour, day, week or month)."""
    ordered = events.withColumn(ORDER_COL, F.col(SRC_ORDER).cast("long") * (1 << 40)
                                + F.col(ROW_ORDER))
    keys = {"order": ORDER_COL}
    frames = {
        "events_over_time": st.events_over_time(ordered, period, **keys),
        "active_cases_over_time": st.active_cases_over_time(ordered, period, **keys),
        "case_duration_histogram": st.case_duration_histogram(cases, DURATION_BINS),
        "case_duration_summary": st.case_duration_summary(cases),
        "activities": st.activity_frequencies(ordered, **keys),
        "resources": st.resource_frequencies(ordered, resource=RESOURCE, **keys),
        "resource_activity": st.resource_activity_matrix(ordered, resource=RESOURCE, **keys),
        "handover_of_work": st.handover_of_work(ordered, resource=RESOURCE, **keys),
    }
    return LogStatistics(period, {name: df.toPandas() for name, df in frames.items()})
