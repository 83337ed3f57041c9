"""Event logs for process mining: extraction from source tables, XES/CSV/Parquet logs, and the
views a process miner expects (directly-follows graph, variants, cases, process map).

The views also work on any DataFrame: ``discover_dfg(df, case_col=..., activity_col=...,
timestamp_col=...)`` and friends (:mod:`sparkfield.process.analysis.discover`), and so do
pm4py's log filters (``filter_variants_top_k(df, 5, case_col=...)``,
:mod:`sparkfield.process.analysis.filters`), the statistics of a process-mining tool's
statistics tab (``activity_frequencies``, ``handover_of_work``, ``events_over_time`` and their
figures, :mod:`sparkfield.process.analysis.statistics`) and the extraction:
``event_log_from_frames`` and ``ocel_from_frames`` build a log from source tables held as
DataFrames and a mapping (:mod:`sparkfield.process.jobs.frames`). A process model:
``discover_process_tree`` (the Inductive Miner, directly-follows variant, on the DFG Spark
computes), ``from_process_tree`` (its Petri net), ``write_pnml`` / ``read_pnml``."""

from sparkfield.process.analysis.discover import (
    activities,
    all_views,
    case_durations,
    discover_dfg,
    end_activities,
    event_frame,
    start_activities,
    variants,
)
from sparkfield.process.analysis.filters import (
    filter_activities_rework,
    filter_case_performance,
    filter_case_size,
    filter_directly_follows_relation,
    filter_end_activities,
    filter_event_attribute_values,
    filter_eventually_follows_relation,
    filter_start_activities,
    filter_time_range,
    filter_variants_by_coverage_percentage,
    filter_variants_top_k,
)
from sparkfield.process.analysis.inductive import (
    ProcessTree,
    discover_process_tree,
    inductive_miner_dfg,
)
from sparkfield.process.analysis.petri import PetriNet, from_process_tree, read_pnml, write_pnml
from sparkfield.process.analysis.statistics import (
    CaseDurationDistribution,
    active_cases_from_cases,
    active_cases_over_time,
    activities_figure,
    activity_frequencies,
    case_duration_distribution,
    case_duration_figure,
    case_duration_histogram,
    case_duration_summary,
    events_over_time,
    handover_of_work,
    over_time_figure,
    resource_activity_figure,
    resource_activity_matrix,
    resource_frequencies,
    resources_figure,
)
from sparkfield.process.extraction.mapping_common import MappingError
from sparkfield.process.jobs.event_log import run as run_event_log
from sparkfield.process.jobs.frames import (
    EventLog,
    OcelLog,
    event_log_from_frames,
    ocel_from_frames,
)
from sparkfield.process.jobs.process_mining import run as run_process_mining
from sparkfield.process.jobs.result import ProcessResult

__all__ = ["CaseDurationDistribution", "EventLog", "MappingError", "OcelLog", "PetriNet",
           "ProcessResult", "ProcessTree", "active_cases_from_cases", "active_cases_over_time",
           "activities",
           "activities_figure", "activity_frequencies", "all_views", "case_duration_distribution",
           "case_duration_figure", "case_duration_histogram", "case_duration_summary",
           "case_durations", "discover_dfg", "discover_process_tree", "end_activities",
           "event_frame", "event_log_from_frames", "events_over_time", "filter_activities_rework",
           "filter_case_performance", "filter_case_size", "filter_directly_follows_relation",
           "filter_end_activities", "filter_event_attribute_values",
           "filter_eventually_follows_relation", "filter_start_activities", "filter_time_range",
           "filter_variants_by_coverage_percentage", "filter_variants_top_k", "from_process_tree",
           "handover_of_work", "inductive_miner_dfg", "ocel_from_frames", "over_time_figure",
           "read_pnml", "resource_activity_figure", "resource_activity_matrix",
           "resource_frequencies", "resources_figure", "run_event_log", "run_process_mining",
           "start_activities", "variants", "write_pnml"]
