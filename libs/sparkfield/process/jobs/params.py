"""The event_log and process_mining jobs' parameters: conf keys, flags, the tables in docs/jobs and
the typed parameters a run reads (``EVENT_LOG.parse(cfg.job)``) come from here."""

from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from datetime import datetime
from typing import Any

from sparkfield.core.csv_utf8 import ENCODINGS
from sparkfield.core.errors import ConfigError
from sparkfield.core.param_flags import AppendFlag
from sparkfield.core.params import JobSchema, Param
from sparkfield.process.analysis.filters import TIME_RANGE_MODES

_CLASSIFIER = Param("classifier", "str", "name", "event classifier: name, or name and "
                    "lifecycle joined", flag="--classifier", choices=("name", "name+lifecycle"))
_TOP_K = Param("top_k_arcs", "int", 30, "process map thinned to the most frequent arcs; null "
               "keeps all", flag="--top-k-arcs", ge=1, nullable=True)
_RENDER = Param("render_map", "bool", True, "render process_map.svg with Graphviz dot (when "
                "dot is missing, process_map.dot is kept and the run report says so)")
_EXPORTS = Param("exports", "str", "auto", "the event log re-written as event_log.csv.gz "
                 "and/or event_log.xes.gz: auto writes the formats the input is not in (an XES "
                 "log gets the CSV, a CSV log the XES, Parquet and extractions both); both, "
                 "csv, xes or none", flag="--exports",
                 choices=("auto", "both", "csv", "xes", "none"))
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
                 "filter_variants_top_k, k: 10} (see the manual's Filters section); each "
                 "--filter-* flag appends one, in the order given")


# -- filter flags: each appends one entry to ``filters`` ---------------------------------------

def _whole(text: str, name: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{name} must be a whole number, got {text!r}") from None
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


_UNITS = {"": 1, "s": 1, "m": 60, "h": 3_600, "d": 86_400, "w": 604_800}
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*([smhdw]?)")


def _duration(text: str, name: str) -> float:
    """Seconds, or a number with a unit: ``90``, ``30m``, ``12h``, ``7d``, ``2w``."""
    m = _DURATION.fullmatch(text.strip().lower())
    if not m:
        raise ValueError(f"{name} must be seconds or a duration such as 90, 30m, 12h, 7d, 2w; "
                         f"got {text!r}")
    return float(m.group(1)) * _UNITS[m.group(2)]


def _instant(text: str, name: str) -> tuple[str, datetime]:
    value = text.strip()
    try:
        return value, datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{name} must be an ISO date or timestamp (2011-10-01, "
                         f"2011-10-01T08:00:00, ...+02:00), got {text!r}") from None


def _activities(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise ValueError(f"expected activity names separated by commas, got {text!r}")
    return names


def _top_k(values: list[str]) -> dict[str, Any]:
    return {"name": "filter_variants_top_k", "k": _whole(values[0], "K", 1)}


def _coverage(values: list[str]) -> dict[str, Any]:
    text = values[0].strip()
    percent = text.endswith("%")
    try:
        value = float(text[:-1] if percent else text)
    except ValueError:
        value = math.nan
    value = value / 100 if percent else value
    if not 0 <= value <= 1:  # NaN too
        raise ValueError("expected a fraction of the cases from 0 to 1 (0.05) or a "
                         f"percentage (5%), got {values[0]!r}")
    return {"name": "filter_variants_by_coverage_percentage", "min_coverage_percentage": value}


def _time_range(values: list[str]) -> dict[str, Any]:
    (start, lo), (end, hi) = _instant(values[0], "START"), _instant(values[1], "END")
    try:
        backwards = lo > hi
    except TypeError:  # one with an offset, one without: compared once read in the time zone
        backwards = False
    if backwards:
        raise ValueError(f"START {start} is after END {end}")
    mode = values[2] if len(values) > 2 else "events"
    if mode not in TIME_RANGE_MODES:
        near = difflib.get_close_matches(mode, TIME_RANGE_MODES, n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise ValueError(f"MODE must be one of {', '.join(TIME_RANGE_MODES)}, got "
                         f"{mode!r}{hint}")
    return {"name": "filter_time_range", "start": start, "end": end, "mode": mode}


def _performance(values: list[str]) -> dict[str, Any]:
    low, high = _duration(values[0], "MIN"), _duration(values[1], "MAX")
    if low > high:
        raise ValueError(f"MAX ({high:g} s) is below MIN ({low:g} s)")
    return {"name": "filter_case_performance", "min_performance": low,
            "max_performance": high}


def _case_size(values: list[str]) -> dict[str, Any]:
    low = _whole(values[0], "MIN", 1)
    high = _whole(values[1], "MAX", 1) if len(values) > 1 else None
    if high is not None and high < low:
        raise ValueError(f"MAX ({high}) is below MIN ({low})")
    return {"name": "filter_case_size", "min_size": low, "max_size": high}


def _endpoints(name: str) -> Callable[[list[str]], dict[str, Any]]:
    def parse(values: list[str]) -> dict[str, Any]:
        return {"name": name, "activities": _activities(values[0])}
    return parse


FILTER_FLAGS = [
    AppendFlag("--filter-time-range", "filters", "START END [MODE]", _time_range,
               "filter_time_range: bounds included, ISO dates or timestamps (naive ones in the "
               "log's time zone); MODE: " + ", ".join(TIME_RANGE_MODES) + " (default events: "
               "keeps the events inside)", min_values=2, max_values=3),
    AppendFlag("--filter-case-performance", "filters", "MIN MAX", _performance,
               "filter_case_performance: the cases lasting MIN to MAX from first to last "
               "event, in seconds or with a unit (30m, 12h, 7d, 2w)", min_values=2,
               max_values=2),
    AppendFlag("--filter-case-size", "filters", "MIN [MAX]", _case_size,
               "filter_case_size: the cases with MIN to MAX events (no MAX: no upper bound)",
               max_values=2),
    AppendFlag("--filter-start-activities", "filters", "A,B,...", _endpoints(
        "filter_start_activities"), "filter_start_activities: the cases starting with one of "
        "these activities"),
    AppendFlag("--filter-end-activities", "filters", "A,B,...", _endpoints(
        "filter_end_activities"), "filter_end_activities: the cases ending with one of these "
        "activities"),
    AppendFlag("--filter-variants-top-k", "filters", "K", _top_k,
               "filter_variants_top_k: the cases of the K most frequent variants"),
    AppendFlag("--filter-variants-coverage", "filters", "FRACTION", _coverage,
               "filter_variants_by_coverage_percentage: the cases of the variants that each "
               "hold at least this share of the cases (0.05 or 5%)"),
]


def check_filters(job: dict[str, Any], cfg: Any = None) -> None:
    """The ``filters`` entries name known filters and arguments they take (before any JVM)."""
    from sparkfield.process.analysis.filter_plan import plan_filters

    plan_filters(job.get("filters") or [])


def check_mapping(job: dict[str, Any], cfg: Any) -> None:
    """The filters, and a mapping on the local file system, read and checked (keys, time zone,
    variables, aliases, its own filters; the job's filters only for a classic mapping) before
    any JVM starts; a mapping on HDFS or S3 is checked by the run, before data."""
    check_filters(job)
    if not job.get("mapping"):
        return
    from sparkfield.core.paths import resolve_path
    from sparkfield.process.extraction.mapping import load_mapping

    scheme, path = resolve_path(str(job["mapping"]))
    if scheme == "file" and os.path.isfile(path):
        from sparkfield.process.ocel.mapping import OcelMapping

        if isinstance(load_mapping(path), OcelMapping):
            refuse_filters(job.get("filters"))


def export_formats(exports: str, input_format: str | None) -> tuple[str, ...]:
    """The formats (``csv``, ``xes``) the event log is written in for the ``exports`` value;
    ``input_format`` is the log's (``xes``, ``csv``, ``parquet``; None: an extraction)."""
    if exports == "auto":
        return tuple(f for f in ("csv", "xes") if f != input_format)
    return {"both": ("csv", "xes"), "none": ()}.get(exports, (exports,))


def refuse_filters(filters: list[dict[str, Any]] | None) -> None:
    """Filters narrow a classic log (cases of events); an object-centric log has no cases,
    so filters given for it are an error rather than left unused."""
    if filters:
        raise ConfigError("filters (the conf's or --filter-* flags) apply to a classic "
                          "mapping's log; this mapping is object-centric (it has 'objects')")


EVENT_LOG = JobSchema("event_log", [
    Param("mapping", "str", None, "mapping YAML (see conf/event_logs/)", flag="--mapping"),
    _CLASSIFIER,
    Param("dedupe", "bool", True, "identical (case, activity, timestamp, resource, lifecycle) "
          "events go to rejects"),
    _TOP_K,
    _RENDER,
    _EXPORTS,
    _FILTERS,
    _STATISTICS,
    _PERIOD,
    _MODEL,
    _CONFORMANCE,
    _CONFORMANCE_MODEL,
    Param("sqlite_part_rows", "int", 100_000, "object-centric mappings: ocel.sqlite is built "
          "by the executors in parts of this many rows, which the driver appends to the file "
          "one at a time (a part is what either side holds at once)",
          flag="--sqlite-part-rows", ge=1),
], output="out/event_log", preflight=check_mapping, append_flags=FILTER_FLAGS)

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
    Param("csv_encoding", "str", "utf-8", "a CSV log's encoding; a row with bytes that are "
          "not UTF-8 read as UTF-8 is a malformed row", flag="--csv-encoding",
          choices=ENCODINGS),
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
    _EXPORTS,
    _FILTERS,
    _STATISTICS,
    _PERIOD,
    _MODEL,
    _CONFORMANCE,
    _CONFORMANCE_MODEL,
], output="out/process_mining", preflight=check_filters, append_flags=FILTER_FLAGS)

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
