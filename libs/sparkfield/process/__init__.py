"""Event logs for process mining: extraction from source tables, XES/CSV/Parquet logs, and the
views a process miner expects (directly-follows graph, variants, cases, process map).

The views also work on any DataFrame: ``discover_dfg(df, case=..., activity=...,
timestamp=...)`` and friends (:mod:`sparkfield.process.discover`)."""

from sparkfield.process.discover import (
    activities,
    all_views,
    case_durations,
    discover_dfg,
    end_activities,
    event_frame,
    start_activities,
    variants,
)
from sparkfield.process.job import run_event_log, run_process_mining
from sparkfield.process.result import ProcessResult

__all__ = ["ProcessResult", "activities", "all_views", "case_durations", "discover_dfg",
           "end_activities", "event_frame", "run_event_log", "run_process_mining",
           "start_activities", "variants"]
