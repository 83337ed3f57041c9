"""The event_log and process_mining jobs' parameters: conf keys, flags, the tables in docs/jobs and
the typed parameters a run reads (``EVENT_LOG.parse(cfg.job)``) come from here."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, fields
from datetime import datetime
from typing import Any

from sparkfield.core.errors import ConfigError
from sparkfield.core.params import JobSchema, Param

_CLASSIFIER = Param("classifier", "str", "name", "event classifier: name, or name and "
                    "lifecycle joined", flag="--classifier", choices=("name", "name+lifecycle"))
_TOP_K = Param("top_k_arcs", "int", 30, "process map thinned to the most frequent arcs; null "
               "keeps all", flag="--top-k-arcs", ge=1, nullable=True)
_RENDER = Param("render_map", "bool", True, "render process_map.svg with Graphviz dot (when "
                "dot is missing, process_map.dot is kept and the run report says so)")
_STATISTICS = Param("statistics", "bool", True, "write statistics/: events and active cases "
                    "over time, case durations, activity and resource frequencies, resource x "
                    "activity, handover of work (CSV and PNG)", flag="--statistics")
_PERIOD = Param("statistics_period", "str", "day", "period of the over-time statistics",
                choices=("hour", "day", "week", "month"), flag="--statistics-period")
_MODEL = Param("model", "bool", True, "discover a process model from the DFG (Inductive Miner, "
               "directly-follows variant): model/process_tree.txt, model.pnml, model.svg",
               flag="--model")
_CONFORMANCE = Param("conformance", "bool", True, "token-based replay of every case against "
                     "conformance_model, else the discovered model: conformance/cases.csv, "
                     "non_fitting_variants.csv and the log's fitness in the run report",
                     flag="--conformance")
_CONFORMANCE_MODEL = Param("conformance_model", "str", None, "a PNML Petri net of yours to "
                           "replay the log against (any Hadoop filesystem path)",
                           flag="--conformance-model")
_FILTERS = Param("filters", "list[dict]", [], "log filters applied in order before every view "
                 "and export, each {name: <filter>, <argument>: <value>, ...}, e.g. {name: "
                 "filter_variants_top_k, k: 10} (see the manual's Filters section)")


def check_filters(job: dict[str, Any], cfg: Any = None) -> None:
    """The ``filters`` entries name known filters and arguments they take (before any JVM)."""
    from sparkfield.process.log_filters import plan_filters

    plan_filters(job.get("filters") or [])


def check_mapping(job: dict[str, Any], cfg: Any) -> None:
    """The filters, and a mapping on the local file system, read and checked (keys, time zone,
    variables, aliases) before any JVM starts; a mapping on HDFS or S3 is checked by the run,
    before data."""
    check_filters(job)
    if not job.get("mapping"):
        return
    from sparkfield.core.batch import resolve_path
    from sparkfield.process.mapping import load_mapping

    scheme, path = resolve_path(str(job["mapping"]))
    if scheme == "file" and os.path.isfile(path):
        load_mapping(path)


EVENT_LOG = JobSchema("event_log", [
    Param("mapping", "str", None, "mapping YAML (see conf/event_logs/)", flag="--mapping"),
    _CLASSIFIER,
    Param("dedupe", "bool", True, "identical (case, activity, timestamp, resource, lifecycle) "
          "events go to rejects"),
    _TOP_K,
    _RENDER,
    _FILTERS,
    _STATISTICS,
    _PERIOD,
    _MODEL,
    _CONFORMANCE,
    _CONFORMANCE_MODEL,
], output="out/event_log", preflight=check_mapping)

PROCESS_MINING = JobSchema("process_mining", [
    Param("log", "str", None, "event log: .xes, .xes.gz, .csv or a Parquet directory",
          flag="--log"),
    Param("columns.case", "str", "case:concept:name", "case id column", flag="--case-col"),
    Param("columns.activity", "str", "concept:name", "activity column",
          flag="--activity-col"),
    Param("columns.timestamp", "str", "time:timestamp", "timestamp column",
          flag="--timestamp-col"),
    Param("columns.resource", "str", "org:resource", "resource column (optional in the log)"),
    Param("columns.lifecycle", "str", "lifecycle:transition", "lifecycle column (optional in "
          "the log)"),
    Param("timezone", "timezone", "UTC", "time zone of timestamps without an offset"),
    Param("csv_multiline", "bool", True, "a CSV log may hold quoted line breaks inside a "
          "field (read as spreadsheets read it); false lets Spark split a large log known to "
          "have none", flag="--csv-multiline"),
    _CLASSIFIER,
    Param("dedupe", "bool", False, "reject exact repeats (a log is taken as it is by "
          "default)"),
    Param("min_timestamp", "timestamp", None, "events before this are rejected; null keeps "
          "every event"),
    Param("max_timestamp", "timestamp", None, "events after this are rejected; null keeps "
          "every event"),
    Param("suspect_before", "timestamp", "1970-01-01", "events dated before this are kept and "
          "reported (count, range, cases, examples)"),
    Param("suspect_after", "timestamp", None, "events dated after this are kept and reported; "
          "null: the time of the run"),
    _TOP_K,
    _RENDER,
    _FILTERS,
    _STATISTICS,
    _PERIOD,
    _MODEL,
    _CONFORMANCE,
    _CONFORMANCE_MODEL,
], output="out/process_mining", preflight=check_filters)

SCHEMAS = {s.job: s for s in (EVENT_LOG, PROCESS_MINING)}


@dataclass(frozen=True)
class EventDates:
    """Events dated outside ``min_timestamp`` .. ``max_timestamp`` are rejected (None: no
    bound); kept events dated outside ``suspect_before`` .. ``suspect_after`` are reported
    (``suspect_after`` None: the time of the run)."""

    min_timestamp: str | None
    max_timestamp: str | None
    suspect_before: str
    suspect_after: str | None


def event_dates(p: Any) -> EventDates:
    """The date parameters of a parsed job section, checked as dates (the schema takes any
    text). A blank one, or one the job does not have (event_log: its mapping's
    timestamp_bounds reject), is process_mining's default."""
    values: dict[str, str | None] = {}
    for f in fields(EventDates):
        value = getattr(p, f.name, None)
        if value is None or not str(value).strip():
            value = PROCESS_MINING.by_key[f.name].default
        elif not _is_timestamp(value):
            raise ConfigError(f"{f.name} must be a date or timestamp (YYYY-MM-DD...), "
                              f"got {value!r}")
        values[f.name] = value
    return EventDates(**values)


def _is_timestamp(text: str) -> bool:
    try:
        datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def report_params(p: Any, seed: int) -> dict[str, Any]:
    """The parameters a run report lists: the parsed job section and the sampling seed."""
    return {**asdict(p), "seed": seed}


LogColumns = PROCESS_MINING.params_type("columns")
"""The column names of an event log read from a file (``columns.*`` of process_mining)."""
