"""The extraction mapping (YAML): reading a mapping file, telling its form (classic, or
object-centric with ``objects``: :mod:`sparkfield.process.ocel.mapping`), and the classic form:
sources, time zone, one entry per activity, each naming its case, and optionally ``filters``
that narrow the extracted log (:mod:`sparkfield.process.analysis.filter_plan`).

Errors (unknown source, missing field, unknown key, bad time zone, unset variable, bad
expression, missing credential variable) are raised as :class:`MappingError` naming the
activity and field, before any data is read.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparkfield.core.conf import load_yaml
from sparkfield.core.io import path_exists, read_text_file
from sparkfield.core.paths import resolve_path
from sparkfield.process.analysis.filter_plan import FilterCall, plan_filters
from sparkfield.process.extraction.mapping_common import (
    MappingError,
    Source,
    Tables,
    activity_entries,
    attributes_of,
    check_keys,
    check_timezone,
    parse_sources,
    source_of,
    tables_of,
    timestamp_bounds,
)
from sparkfield.process.ocel.mapping import OcelMapping, parse_ocel_mapping

__all__ = ["Activity", "Mapping", "MappingError", "Source", "frames_mapping", "load_mapping",
           "parse_mapping"]

TOP_KEYS = ("sources", "views", "timezone", "timestamp_bounds", "activities", "filters")
ACTIVITY_KEYS = ("name", "activity", "label", "source", "case_id", "timestamp",
                 "timestamp_format", "resource", "lifecycle", "where", "attributes")


@dataclass(frozen=True)
class Activity:
    index: int
    source: str
    case_id: str
    timestamp: str
    name: str | None = None  # literal activity name
    activity: str | None = None  # or a Spark SQL expression giving it
    resource: str | None = None
    lifecycle: str | None = None
    where: str | None = None
    attributes: dict[str, str] = field(default_factory=dict)  # name -> expression
    timestamp_format: str | None = None
    title: str | None = None  # how reports name an expression-named activity

    @property
    def label(self) -> str:
        return self.name or self.title or f"activity #{self.index + 1}"


@dataclass(frozen=True)
class Mapping:
    sources: dict[str, Source]
    activities: list[Activity]
    views: dict[str, str] = field(default_factory=dict)  # name -> Spark SQL over sources
    timezone: str = "UTC"
    min_timestamp: str = "1970-01-01"
    max_timestamp: str = "2100-01-01"
    origin: str = "<inline>"
    # run on the extracted log before the job's own filters, every view and every export
    filters: tuple[FilterCall, ...] = ()


def load_mapping(path: str | os.PathLike[str], spark: Any = None) -> Mapping | OcelMapping:
    """Read and check a mapping file, in the form it is written in. With ``spark`` the path is
    resolved as Hadoop resolves it (``hdfs://``, ``s3a://``, or a path against
    ``fs.defaultFS``) and read through Hadoop's FileSystem; relative source paths are taken
    against the mapping's folder either way."""
    if spark is not None:
        scheme, resolved = resolve_path(str(path), spark)
        if scheme != "file":
            if not path_exists(spark, resolved):
                raise MappingError(f"mapping file not found: {path}")
            return _parse_text(read_text_file(spark, resolved), resolved.rsplit("/", 1)[0],
                               resolved)
        path = resolved
    p = Path(path)
    if not p.is_file():
        raise MappingError(f"mapping file not found: {p}")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MappingError(f"{p}: cannot read the mapping ({exc})") from None
    return _parse_text(text, p.parent, str(p))


def _parse_text(text: str, base: Path | str, origin: str) -> Mapping | OcelMapping:
    doc = load_yaml(text, origin, MappingError)
    if isinstance(doc, dict) and "objects" in doc:  # the object-centric (OCEL 2.0) form
        return parse_ocel_mapping(doc, base=base, origin=origin)
    return parse_mapping(doc, base=base, origin=origin)


def frames_mapping(mapping: dict | str | os.PathLike[str], frames: Collection[str]
                   ) -> Mapping | OcelMapping:
    """A mapping of frames, in the form it is written in: a parsed document, YAML text or a
    file; its sources are the ``frames`` (names of the DataFrames given), so file paths and
    reader settings are not needed (and are ignored when present)."""
    origin = "mapping"
    if isinstance(mapping, os.PathLike):
        origin = os.fspath(mapping)
        try:
            mapping = Path(mapping).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise MappingError(f"{origin}: cannot read the mapping ({exc})") from None
    doc = load_yaml(mapping, origin, MappingError) if isinstance(mapping, str) else mapping
    if not isinstance(doc, dict):
        hint = ""
        if isinstance(doc, str) and doc.strip().endswith((".yaml", ".yml")):
            hint = " (a file name? pass pathlib.Path(...) to read the file)"
        raise MappingError(f"{origin}: expected the mapping as a dict or YAML text, got "
                           f"{str(doc)[:80]!r}{hint}")
    if "objects" in doc:
        return parse_ocel_mapping(doc, origin=origin, frames=frames)
    return parse_mapping(doc, origin=origin, frames=frames)


def parse_mapping(doc: Any, base: Path | str | None = None, origin: str = "<inline>",
                  frames: Collection[str] | None = None) -> Mapping:
    """The classic form of a parsed mapping document; with ``frames``, a mapping of frames
    (:func:`~sparkfield.process.extraction.mapping_common.frame_sources`)."""
    if not isinstance(doc, dict):
        raise MappingError(f"{origin}: expected a mapping with 'sources' and 'activities'")
    check_keys(doc, TOP_KEYS, origin)
    timezone = check_timezone(doc, origin)
    min_ts, max_ts = timestamp_bounds(doc, origin)
    sources, views = parse_sources(doc, base, origin, frames)
    tables = tables_of(sources, views)
    acts = [_activity(i, a, where, tables)
            for i, a, where in activity_entries(doc, origin, ACTIVITY_KEYS)]
    return Mapping(sources=sources, activities=acts, views=views, timezone=timezone,
                   min_timestamp=min_ts, max_timestamp=max_ts, origin=origin,
                   filters=_filters(doc, origin))


def _filters(doc: dict, origin: str) -> tuple[FilterCall, ...]:
    """``filters``: the log filters of the job's conf (the same form), checked here."""
    raw = doc.get("filters")
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise MappingError(f"{origin}: 'filters' must list filters, each {{name: <filter>, "
                           f"<argument>: <value>, ...}}, got {raw!r}")
    return tuple(plan_filters(raw, mapping=origin))


def _activity(i: int, a: dict, where: str, tables: Tables) -> Activity:
    where = f"{where} ({a.get('name') or a.get('activity')})"
    for key in ("source", "case_id", "timestamp"):
        if not a.get(key):
            raise MappingError(f"{where}: missing {key!r}")
    return Activity(
        index=i, source=source_of(a, where, tables), case_id=str(a["case_id"]),
        timestamp=str(a["timestamp"]), name=a.get("name"), activity=a.get("activity"),
        resource=a.get("resource"), lifecycle=a.get("lifecycle"), where=a.get("where"),
        attributes=attributes_of(a.get("attributes"), where),
        timestamp_format=a.get("timestamp_format"), title=a.get("label"),
    )
