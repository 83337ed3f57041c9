"""The ``filters`` of the event_log and process_mining jobs: a list of the filter functions of
:mod:`sparkfield.process.filters` with their arguments, checked before any data is read and
applied in the order given to the log's events, before every view and export.

A filter is written as its function's name and keyword arguments::

    filters:
      - {name: filter_time_range, start: "2011-10-01", end: "2012-01-01", mode: traces_contained}
      - {name: filter_variants_top_k, k: 10}

The column keywords (``case``, ``activity``, ``timestamp``, ``order``, ``timezone``) are the
job's and cannot be given."""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sparkfield.core.errors import ConfigError, InputError
from sparkfield.core.practices import cached_rows
from sparkfield.core.report import Stats
from sparkfield.process import filters as _filters
from sparkfield.process.schema import CASE, ROW_ORDER, SRC_ORDER

FILTERS: dict[str, Callable[..., DataFrame]] = {
    name: getattr(_filters, name) for name in _filters.__all__ if name.startswith("filter_")}
RESERVED = frozenset({"case", "activity", "timestamp", "order", "timezone"})
ORDER_COL = "__filter_order"  # the events' order (source, then row) as one column


@dataclass(frozen=True)
class FilterCall:
    """One checked entry of ``filters``."""

    position: int
    name: str
    kwargs: dict[str, Any]

    @property
    def label(self) -> str:
        return f"filters[{self.position}] ({self.name})"


def plan_filters(entries: list[dict[str, Any]]) -> list[FilterCall]:
    """The ``filters`` entries checked: a known filter, arguments its function takes, none of
    the job's column keywords. ConfigError names the entry."""
    calls = []
    for i, entry in enumerate(entries):
        name = entry.get("name")
        if not isinstance(name, str) or name not in FILTERS:
            near = difflib.get_close_matches(str(name), FILTERS, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise ConfigError(f"filters[{i}]: unknown filter {name!r}{hint}; filters: "
                              f"{', '.join(sorted(FILTERS))}")
        kwargs = {k: v for k, v in entry.items() if k != "name"}
        taken = sorted(RESERVED & set(kwargs))
        if taken:
            raise ConfigError(f"filters[{i}] ({name}): {', '.join(taken)} are the job's "
                              "columns and cannot be set here")
        signature = inspect.signature(FILTERS[name])
        takes = [a for a in list(signature.parameters)[1:] if a not in RESERVED]
        for arg in kwargs:
            if arg not in takes:
                near = difflib.get_close_matches(arg, takes, n=1)
                hint = f" (did you mean {near[0]!r}?)" if near else ""
                raise ConfigError(f"filters[{i}] ({name}): unknown argument {arg!r}{hint}; "
                                  f"it takes {', '.join(takes)}")
        try:
            signature.bind(None, **kwargs)
        except TypeError as exc:
            raise ConfigError(f"filters[{i}] ({name}): {exc}") from None
        calls.append(FilterCall(i, name, kwargs))
    return calls


def _size(events: DataFrame) -> tuple[int, int]:
    row = events.agg(F.count(F.lit(1)).alias("events"),
                     F.countDistinct(CASE).alias("cases")).first()
    return int(row["cases"]), int(row["events"])


def apply_filters(events: DataFrame, calls: list[FilterCall], stats: Stats,
                  stack: ExitStack) -> DataFrame:
    """``events`` (the job's canonical events, cached) after each filter in turn. Each result
    is cached and counted (the run report lists cases and events kept and removed per
    filter); the last stays cached until ``stack`` closes, the ones before are released.
    InputError when no event is left."""
    if not calls:
        return events
    with stats.step("count_before_filters"):
        cases, n = _size(events)
    current = events.withColumn(ORDER_COL, F.col(SRC_ORDER).cast("long") * (1 << 40)
                                + F.col(ROW_ORDER))
    table = []
    with ExitStack() as between:
        for k, call in enumerate(calls):
            with stats.step(f"filter {call.name}"):
                try:
                    kept = FILTERS[call.name](current, **call.kwargs, order=ORDER_COL)
                except ValueError as exc:  # a value the function refuses: the user's to fix
                    raise ConfigError(f"{call.label}: {exc}") from None
                holder = stack if k == len(calls) - 1 else between
                current, n_kept = holder.enter_context(cached_rows(kept, f"filtered{k}"))
                cases_kept = current.select(CASE).distinct().count()
            table.append({"filter": call.name, "args": call.kwargs,
                          "cases_kept": cases_kept, "cases_removed": cases - cases_kept,
                          "events_kept": n_kept, "events_removed": n - n_kept})
            stats.note(f"{call.label}: kept {cases_kept} of {cases} cases, {n_kept} of {n} "
                       "events")
            cases, n = cases_kept, n_kept
    stats.counts["filters"] = table
    if n == 0:
        raise InputError(f"the filters left no event ({table[-1]['filter']} removed the last "
                         f"{table[-1]['events_removed']}): loosen them")
    return current.drop(ORDER_COL)
