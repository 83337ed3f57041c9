"""The event_log job as functions on DataFrames, for source tables already held as DataFrames
(a lakehouse, a notebook): a mapping in, the log and its views out, nothing written.

``event_log_from_frames`` runs the classic form, ``ocel_from_frames`` the object-centric one;
both plan, validate and compute exactly as the job does (:mod:`.job`, :mod:`.ocel.job`), with
the frames in place of the sources the job reads. They use the DataFrame API only, so they
work on classic Spark and over Spark Connect alike.

The tables of a result stay cached until :meth:`release` (or the end of a ``with`` block):
the views are derived from them, and a table read twice must give the same rows (a source
row's order, and with it an OCEL event id, is taken once).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from collections.abc import Mapping as AnyMapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame

from sparkfield.core.errors import ConfigError
from sparkfield.core.keep import Keeper
from sparkfield.core.report import Stats
from sparkfield.process.analysis.views import Views
from sparkfield.process.extraction.extract import extract_from
from sparkfield.process.extraction.mapping import Mapping, frames_mapping
from sparkfield.process.extraction.mapping_common import MappingError
from sparkfield.process.extraction.sources import given_frames
from sparkfield.process.jobs import ocel as ocel_job
from sparkfield.process.jobs.compute import classify_extracted, compute, note_empty_sources
from sparkfield.process.jobs.params import EVENT_LOG
from sparkfield.process.ocel.build import plan_from, shared_keep
from sparkfield.process.ocel.mapping import OcelMapping
from sparkfield.process.ocel.views import TypeViews

__all__ = ["EventLog", "OcelLog", "event_log_from_frames", "ocel_from_frames"]

MappingSpec = dict[str, Any] | str | os.PathLike[str]
INPUT_NAME = "frames"  # how a "no usable events" error names the input


class _Cached:
    """A result whose tables stay cached on ``_stack`` until :meth:`release`."""

    _stack: ExitStack

    def release(self) -> None:
        """Unpersist the cached tables; the frames stay usable (read again from the
        sources)."""
        self._stack.close()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


@dataclass
class EventLog(_Cached):
    """The classic event log of a mapping of frames (see :func:`event_log_from_frames`)."""

    events: DataFrame  # the canonical event columns (sparkfield.process.eventlog.schema)
    rejects: DataFrame  # source (the activity), reason, record (JSON)
    views: Views  # dfg, variants, activities, start and end activities, cases
    small: dict[str, pd.DataFrame]  # dfg, activities, start and end activities, collected
    stats: Stats  # rows by activity, rejects by activity and reason, cases, notes
    _stack: ExitStack = field(repr=False, default_factory=ExitStack)


@dataclass
class OcelLog(_Cached):
    """The object-centric log (OCEL 2.0) of a mapping of frames (see
    :func:`ocel_from_frames`)."""

    objects: DataFrame  # ocel_id, ocel_type, type_index, attributes, row_order
    events: DataFrame  # ocel_id, activity, timestamp, attributes, src_order, row_order
    e2o: DataFrame  # ocel_event_id, ocel_object_id, ocel_type, ocel_qualifier
    o2o: DataFrame  # ocel_source_id, ocel_target_id, ocel_qualifier
    changes: DataFrame  # ocel_id, ocel_type, ocel_time, ocel_changed_field, value
    rejects: DataFrame  # source, reason, record (JSON)
    views: dict[str, TypeViews]  # each object type's flattened log's views
    map_dot: str  # the object-centric process map (Graphviz DOT)
    stats: Stats  # rows read and kept by kind, rejects by source and reason, notes
    _stack: ExitStack = field(repr=False, default_factory=ExitStack)

    def dfg(self, object_type: str) -> pd.DataFrame:
        """The type's directly-follows arcs: source, target, frequency, mean_s, median_s."""
        return self._type(object_type).small["dfg"]

    def activities(self, object_type: str) -> pd.DataFrame:
        """The type's activities: activity, events, cases (objects)."""
        return self._type(object_type).small["activities"]

    def variants(self, object_type: str) -> DataFrame:
        """The type's variants: variant (JSON array), cases, share, mean_duration_s."""
        return self._type(object_type).variants

    def _type(self, object_type: str) -> TypeViews:
        if object_type not in self.views:
            raise KeyError(f"unknown object type {object_type!r} "
                           f"(types: {', '.join(self.views)})")
        return self.views[object_type]


def event_log_from_frames(frames: AnyMapping[str, DataFrame], mapping: MappingSpec, *,
                          classifier: str = "name", dedupe: bool = True,
                          sample: float | None = None, seed: int = 42) -> EventLog:
    """The classic event log of ``mapping`` (the form of conf/event_logs/olist_orders.yaml,
    as a dict, YAML text or a ``pathlib.Path``) over ``frames`` (DataFrames by source name;
    ``sources`` may be left out of the mapping). Events, rejects and views as the event_log
    job computes them, after the mapping's ``filters``; ``sample`` keeps whole cases (a hash
    of the case id and ``seed``).

    Raises :class:`MappingError` naming the place (a source without a frame, an unknown
    column, ...) before any data is read, and ``InputError`` when no row is a usable event."""
    p = EVENT_LOG.parse({"classifier": classifier, "dedupe": dedupe, "sample": sample,
                         "output": None, "statistics": False, "model": False,
                         "conformance": False})
    parsed = _mapping(mapping, frames, Mapping)
    stats = Stats()
    with stats.step("plan"):
        extracted = extract_from(given_frames(frames, parsed), parsed, p.sample, seed)
    note_empty_sources(stats, extracted)
    classified, source, labels = classify_extracted(extracted, parsed, p.dedupe)
    stack = ExitStack()
    with _released_on_error(stack):
        c = compute(classified, source, labels, p, stack, INPUT_NAME,
                    log_filters=parsed.filters, timezone=parsed.timezone)
    stats.merge(c.stats)
    return EventLog(events=c.events, rejects=c.rejects, views=c.views, small=c.small,
                    stats=stats, _stack=stack)


def ocel_from_frames(frames: AnyMapping[str, DataFrame], mapping: MappingSpec, *,
                     top_k_arcs: int | None = 30) -> OcelLog:
    """The object-centric log (OCEL 2.0) of ``mapping`` (the form of
    conf/event_logs/olist_ocel.yaml, as a dict, YAML text or a ``pathlib.Path``) over
    ``frames`` (DataFrames by source name; ``sources`` may be left out of the mapping):
    objects, events, relations, attribute changes and rejects as the event_log job builds
    them, with each object type's flattened views and the process map (its top
    ``top_k_arcs`` arcs per type).

    Raises :class:`MappingError` naming the place before any data is read, and
    ``InputError`` when no event is usable."""
    p = EVENT_LOG.parse({"top_k_arcs": top_k_arcs, "output": None})
    parsed = _mapping(mapping, frames, OcelMapping)
    stats = Stats()
    stack = ExitStack()
    with _released_on_error(stack):
        keep = Keeper(stack)
        with stats.step("plan"):
            planned = plan_from(given_frames(frames, parsed, shared_keep(parsed, keep)),
                                parsed, shared_kept=True)
        c = ocel_job.compute(planned, stack, p.top_k_arcs, INPUT_NAME, keep)
    stats.merge(c.stats)
    t = c.tables
    return OcelLog(objects=t.objects, events=t.events, e2o=t.e2o, o2o=t.o2o, changes=t.changes,
                   rejects=t.rejects, views=c.views, map_dot=c.map_dot, stats=stats,
                   _stack=stack)


_OTHER_FORM = {
    Mapping: "event_log_from_frames needs a classic mapping (activities with a case_id); "
             "this one is object-centric (it has 'objects'): use ocel_from_frames",
    OcelMapping: "ocel_from_frames needs an object-centric mapping (with 'objects'); this "
                 "one is classic: use event_log_from_frames",
}


def _mapping(mapping: MappingSpec, frames: Any, form: type) -> Any:
    """The mapping of ``frames`` in ``form`` (classic or object-centric), checked."""
    if not isinstance(frames, AnyMapping) or not frames:
        raise ConfigError("frames: expected a dict of source name -> DataFrame, got "
                          f"{_what(frames)}")
    names = [k for k in frames if isinstance(k, str)]
    if len(names) != len(frames):
        raise ConfigError(f"frames: source names must be strings, got "
                          f"{[k for k in frames if not isinstance(k, str)]!r}")
    parsed = frames_mapping(mapping, names)
    if not isinstance(parsed, form):
        raise MappingError(f"{parsed.origin}: {_OTHER_FORM[form]}")
    return parsed


def _what(value: Any) -> str:
    return "an empty dict" if isinstance(value, AnyMapping) else type(value).__name__


@contextmanager
def _released_on_error(stack: ExitStack) -> Iterator[None]:
    """Closes ``stack`` when the block fails, so a failed call keeps nothing cached."""
    try:
        yield
    except BaseException:
        stack.close()
        raise
