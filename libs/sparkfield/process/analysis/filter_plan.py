"""The ``filters`` of the event_log and process_mining jobs: a list of the filter functions of
:mod:`sparkfield.process.analysis.filters` with their arguments, checked before any data is read and
applied in the order given to the log's events, before every view and export.

A filter is written as its function's name and keyword arguments::

    filters:
      - {name: filter_time_range, start: "2011-10-01", end: "2012-01-01", mode: traces_contained}
      - {name: filter_variants_top_k, k: 10}

The column keywords (``case_col``, ``activity_col``, ``timestamp_col``, ``order_col``) and
``timezone`` are the job's and cannot be given: naive times (``start``, ``end``) are read in
the log's time zone.
A classic mapping may hold ``filters`` of its own (the same form): they run first, then the
job's (its conf file's, then those of the ``--filter-*`` flags)."""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sparkfield.core.errors import ConfigError, InputError
from sparkfield.core.practices import cached_rows, cut_lineage
from sparkfield.core.report import Stats
from sparkfield.process.analysis import filters as _filters
from sparkfield.process.eventlog.events import EVENT_ORDER, with_event_order
from sparkfield.process.eventlog.schema import CASE
from sparkfield.process.extraction.mapping_common import MappingError

FILTERS: dict[str, Callable[..., DataFrame]] = {
    name: getattr(_filters, name) for name in _filters.__all__ if name.startswith("filter_")}
RESERVED = frozenset({"case_col", "activity_col", "timestamp_col", "order_col", "timezone"})
# filters whose plan reads their input three times (the events, and each case's variant twice):
# chained without a cut, every later plan holds 3, 9, 27, ... copies of the plan before them
REREAD_INPUT = frozenset({"filter_variants_top_k", "filter_variants_by_coverage_percentage"})


@dataclass(frozen=True)
class FilterCall:
    """One checked entry of ``filters``: of the job (``source`` "job") or of its mapping
    ("mapping")."""

    position: int
    name: str
    kwargs: dict[str, Any]
    source: str = "job"

    @property
    def label(self) -> str:
        prefix = "mapping " if self.source == "mapping" else ""
        return f"{prefix}filters[{self.position}] ({self.name})"


def plan_filters(entries: list[dict[str, Any]], mapping: str | None = None
                 ) -> list[FilterCall]:
    """The ``filters`` entries checked: a known filter, arguments its function takes, none of
    the job's column keywords. ConfigError names the entry; for the filters of a mapping
    (``mapping``: its origin) MappingError names the file and the entry."""
    where = f"{mapping}: " if mapping is not None else ""
    error = MappingError if mapping is not None else ConfigError
    calls = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise error(f"{where}filters[{i}]: expected {{name: <filter>, <argument>: "
                        f"<value>, ...}}, got {entry!r}")
        name = entry.get("name")
        if not isinstance(name, str) or name not in FILTERS:
            near = difflib.get_close_matches(str(name), FILTERS, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise error(f"{where}filters[{i}]: unknown filter {name!r}{hint}; filters: "
                        f"{', '.join(sorted(FILTERS))}")
        label = f"{where}filters[{i}] ({name})"
        kwargs = {str(k): v for k, v in entry.items() if k != "name"}
        taken = sorted(RESERVED & set(kwargs))
        if taken:
            raise error(f"{label}: {', '.join(taken)} are the job's columns and cannot be "
                        "set here")
        signature = inspect.signature(FILTERS[name])
        takes = [a for a in list(signature.parameters)[1:] if a not in RESERVED]
        for arg in kwargs:
            if arg not in takes:
                near = difflib.get_close_matches(arg, takes, n=1)
                hint = f" (did you mean {near[0]!r}?)" if near else ""
                raise error(f"{label}: unknown argument {arg!r}{hint}; it takes "
                            f"{', '.join(takes)}")
        try:
            signature.bind(None, **kwargs)
        except TypeError as exc:
            raise error(f"{label}: {exc}") from None
        calls.append(FilterCall(i, name, kwargs, "job" if mapping is None else "mapping"))
    return calls


def _size(events: DataFrame) -> tuple[int, int]:
    row = events.agg(F.count(F.lit(1)).alias("events"),
                     F.countDistinct(CASE).alias("cases")).first()
    return int(row["cases"]), int(row["events"])


def apply_filters(events: DataFrame, calls: Sequence[FilterCall], stats: Stats,
                  stack: ExitStack, timezone: str = "UTC") -> DataFrame:
    """``events`` (the job's canonical events, cached) after each filter in turn, naive times
    in the filters' arguments read in ``timezone`` (the log's). Each result is cached and
    counted (the run report lists cases and events kept and removed per filter); the last
    stays cached until ``stack`` closes, the ones before are released. The result of a filter
    that reads its input several times (the variant filters) is checkpointed first, so the
    plans after it start from its rows, not from a copy of every plan before it for each
    read. InputError when no event is left."""
    if not calls:
        return events
    with stats.step("count_before_filters"):
        cases, n = _size(events)
    current = with_event_order(events)
    table = []
    with ExitStack() as between:
        for k, call in enumerate(calls):
            with stats.step(f"filter {call.name}"):
                try:
                    kept = FILTERS[call.name](current, **call.kwargs, order_col=EVENT_ORDER,
                                              timezone=timezone)
                except ValueError as exc:  # a value the function refuses: the user's to fix
                    raise ConfigError(f"{call.label}: {exc}") from None
                holder = stack if k == len(calls) - 1 else between
                if call.name in REREAD_INPUT:
                    kept = cut_lineage(kept)
                current, n_kept = holder.enter_context(cached_rows(kept, f"filtered{k}"))
                cases_kept = current.select(CASE).distinct().count()
            table.append({"filter": call.name, "args": call.kwargs, "source": call.source,
                          "cases_kept": cases_kept, "cases_removed": cases - cases_kept,
                          "events_kept": n_kept, "events_removed": n - n_kept})
            stats.note(f"{call.label}: kept {cases_kept} of {cases} cases, {n_kept} of {n} "
                       "events")
            cases, n = cases_kept, n_kept
    stats.counts["filters"] = table
    if n == 0:
        raise InputError(f"the filters left no event ({table[-1]['filter']} removed the last "
                         f"{table[-1]['events_removed']}): loosen them")
    return current.drop(EVENT_ORDER)
