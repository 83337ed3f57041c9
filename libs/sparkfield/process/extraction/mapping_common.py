"""What the classic and the object-centric mapping forms share: the error type, the ``sources``
and ``views`` sections, and the checks of keys, time zone, timestamp bounds, attributes and
activity entries.

A mapping of frames (for source tables given as DataFrames) has the same form, but its
sources are the frames: ``sources`` may be left out (every frame is a source) or name them.

Errors name the place (source, activity, field) before any data is read.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparkfield.core.errors import ConfigError
from sparkfield.core.timezones import timezone_problem

FORMATS = {"csv", "parquet", "json", "jdbc"}
FRAME = "frame"  # the format of a source given as a DataFrame
SOURCE_KEYS = ("format", "path", "options", "url", "table", "user_env", "password_env",
               "partition_column", "lower_bound", "upper_bound", "num_partitions")
BOUNDS_KEYS = ("min", "max")
_CREDENTIALS = "credentials come only from the environment (user_env / password_env)"


class MappingError(ConfigError):
    """The mapping file is invalid; the message names the place."""


@dataclass(frozen=True)
class Source:
    name: str
    format: str
    path: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    url: str | None = None
    table: str | None = None
    user_env: str | None = None
    password_env: str | None = None
    partition_column: str | None = None
    lower_bound: int | None = None
    upper_bound: int | None = None
    num_partitions: int | None = None


def check_keys(entry: dict, allowed: Collection[str], where: str,
               misplaced: dict[str, str] | None = None) -> None:
    """Every key of ``entry`` must be one of ``allowed``: a misspelt key would silently drop
    what it holds (a filter, the attributes). ``misplaced`` gives keys a message of their
    own."""
    for key in entry:
        if misplaced and key in misplaced:
            raise MappingError(f"{where}: {misplaced[key]}")
    unknown = [str(k) for k in entry if k not in allowed]
    if unknown:
        raise MappingError(f"{where}: " + "; ".join(
            f"unknown key {k!r}{_nearest(k, allowed)}" for k in unknown))


def _nearest(key: str, allowed: Collection[str]) -> str:
    near = difflib.get_close_matches(key, list(allowed), n=1)
    return f" (did you mean {near[0]!r}?)" if near else f" (keys: {', '.join(allowed)})"


def need(entry: dict, keys: Collection[str], where: str) -> None:
    """Each of ``keys`` must be given (neither missing nor null nor empty)."""
    for key in keys:
        if entry.get(key) in (None, ""):
            raise MappingError(f"{where}: missing {key!r}")


def attributes_of(raw: Any, where: str) -> dict[str, str]:
    """``attributes``: a list of columns, or a mapping name -> expression."""
    raw = raw or {}
    if isinstance(raw, list):
        return {str(c): f"`{c}`" for c in raw}
    if not isinstance(raw, dict):
        raise MappingError(f"{where}: 'attributes' must be a list of columns or a mapping "
                           "name -> expression")
    return {str(k): str(v) for k, v in raw.items()}


def check_timezone(doc: dict, origin: str) -> str:
    """The mapping's ``timezone`` (UTC by default), checked as Spark will read it."""
    zone = doc.get("timezone", "UTC")
    problem = timezone_problem(zone) if isinstance(zone, str) else \
        f"expected a time zone as text, got {zone!r} (quote an offset: '+02:00')"
    if problem:
        raise MappingError(f"{origin}: timezone {problem}")
    return zone


def timestamp_bounds(doc: dict, origin: str) -> tuple[str, str]:
    bounds = doc.get("timestamp_bounds") or {}
    if not isinstance(bounds, dict):
        raise MappingError(f"{origin}: 'timestamp_bounds' must be {{min, max}}")
    check_keys(bounds, BOUNDS_KEYS, f"{origin}: timestamp_bounds")
    return str(bounds.get("min", "1970-01-01")), str(bounds.get("max", "2100-01-01"))


_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _expand(text: str, where: str) -> str:
    """``${VAR}`` and ``${VAR:-default}`` (the default when VAR is unset or empty, as in the
    shell). An unset ``${VAR}`` is an error: as "" it would move a path to the root."""
    def value(m: re.Match[str]) -> str:
        name, default = m.group(1), m.group(2)
        got = os.environ.get(name)
        if got:
            return got
        if default is None:
            state = "is empty" if name in os.environ else "is not set"
            raise MappingError(f"{where}: environment variable {name} {state} (set it, or "
                               f"give a default: ${{{name}:-...}})")
        return default

    return _ENV.sub(value, text)


def _resolve(path: str, base: Path | str | None, where: str) -> str:
    path = _expand(path, where)
    if "://" in path or base is None or os.path.isabs(path):
        return path
    if isinstance(base, str) and "://" in base:  # a mapping read from HDFS, S3, ...
        return f"{base.rstrip('/')}/{path}"
    return str((Path(base) / path).resolve())


def activity_entries(doc: dict, origin: str, keys: Collection[str],
                     misplaced: dict[str, str] | None = None
                     ) -> Iterator[tuple[int, dict, str]]:
    """``(position, entry, where)`` for each entry of ``activities``, after the checks that
    both mapping forms share (a non-empty list of mappings with known ``keys``, each naming
    its activity once)."""
    raw_acts = doc.get("activities") or []
    if not isinstance(raw_acts, list) or not raw_acts:
        raise MappingError(f"{origin}: 'activities' must list at least one activity")
    for i, a in enumerate(raw_acts):
        where = f"{origin}: activity #{i + 1}"
        if not isinstance(a, dict):
            raise MappingError(f"{where}: must be a mapping")
        label = a.get("name") or a.get("label") or a.get("activity")
        check_keys(a, keys, f"{where} ({label})" if label else where, misplaced)
        if bool(a.get("name")) == bool(a.get("activity")):
            raise MappingError(f"{where}: give exactly one of 'name' (literal) or 'activity' "
                               "(expression)")
        yield i, a, where


@dataclass(frozen=True)
class Tables:
    """What an entry's ``source`` may name: the mapping's sources (the frames given, for a
    mapping of frames) and its views."""

    sources: tuple[str, ...]
    views: tuple[str, ...] = ()
    frames: bool = False

    def __contains__(self, name: object) -> bool:
        return name in self.sources or name in self.views

    def listing(self) -> str:
        """The names, for an error message."""
        text = f"{'frames' if self.frames else 'sources'}: {', '.join(self.sources)}"
        return f"{text}; views: {', '.join(self.views)}" if self.views else text


def tables_of(sources: dict[str, Source], views: dict[str, str]) -> Tables:
    return Tables(tuple(sources), tuple(views),
                  frames=any(s.format == FRAME for s in sources.values()))


def parse_sources(doc: dict, base: Path | str | None, origin: str,
                  frames: Collection[str] | None = None
                  ) -> tuple[dict[str, Source], dict[str, str]]:
    """The ``sources`` and ``views`` sections; with ``frames`` (the names of the frames
    given) the sources are those frames (:func:`frame_sources`)."""
    if frames is not None:
        sources = frame_sources(doc.get("sources"), frames, origin)
    else:
        raw_sources = doc.get("sources") or {}
        if not isinstance(raw_sources, dict) or not raw_sources:
            raise MappingError(f"{origin}: 'sources' must name at least one source")
        sources = {name: _source(name, s, base, origin) for name, s in raw_sources.items()}
    views = doc.get("views") or {}
    if not isinstance(views, dict):
        raise MappingError(f"{origin}: 'views' must map names to SQL queries")
    clash = set(views) & set(sources)
    if clash:
        raise MappingError(f"{origin}: view names clash with sources: {sorted(clash)}")
    return sources, {str(k): str(v) for k, v in views.items()}


def frame_sources(raw: Any, frames: Collection[str], origin: str) -> dict[str, Source]:
    """The sources of a mapping of frames: every frame when ``sources`` is left out, else the
    frames it names (a list of names, or a mapping whose reader settings are ignored: the
    frame is the source, already read). A source without a frame is an error naming it."""
    if raw is None:
        names = [str(n) for n in frames]
    elif isinstance(raw, dict):
        names = [str(n) for n in raw]
    elif isinstance(raw, list) and all(isinstance(n, str) for n in raw):
        names = list(raw)
    else:
        raise MappingError(f"{origin}: 'sources' must list the names of the frames given")
    if not names:
        raise MappingError(f"{origin}: no source table: give at least one frame")
    missing = [n for n in names if n not in frames]
    if missing:
        raise MappingError(f"{origin}: no frame given for source(s) "
                           f"{', '.join(map(repr, missing))} "
                           f"(frames: {', '.join(map(str, frames)) or 'none'})")
    return {n: Source(name=n, format=FRAME) for n in names}


def _source(name: str, s: Any, base: Path | str | None, origin: str) -> Source:
    where = f"{origin}: source {name!r}"
    if not isinstance(s, dict):
        raise MappingError(f"{where}: must be a mapping")
    check_keys(s, SOURCE_KEYS, where, {"password": _CREDENTIALS, "user": _CREDENTIALS})
    fmt = str(s.get("format", "")).lower()
    if fmt not in FORMATS:
        raise MappingError(f"{origin}: source {name!r}: format must be one of "
                           f"{sorted(FORMATS)}, got {s.get('format')!r}")
    if fmt == "jdbc":
        for key in ("url", "table"):
            if not s.get(key):
                raise MappingError(f"{origin}: source {name!r}: jdbc needs {key!r}")
    elif not s.get("path"):
        raise MappingError(f"{origin}: source {name!r}: needs 'path'")
    options = s.get("options") or {}
    if not isinstance(options, dict):
        raise MappingError(f"{where}: 'options' must map reader options to values")
    return Source(
        name=name, format=fmt,
        path=_resolve(str(s["path"]), base, f"{where}: path") if s.get("path") else None,
        options={str(k): str(v) for k, v in options.items()},
        url=_expand(str(s["url"]), f"{where}: url") if s.get("url") else None,
        table=s.get("table"), user_env=s.get("user_env"), password_env=s.get("password_env"),
        partition_column=s.get("partition_column"),
        lower_bound=s.get("lower_bound"), upper_bound=s.get("upper_bound"),
        num_partitions=s.get("num_partitions"),
    )


def source_of(entry: dict, where: str, tables: Tables) -> str:
    """The entry's ``source``, which must name one of ``tables``."""
    if entry["source"] not in tables:
        raise MappingError(f"{where}: unknown source {entry['source']!r} "
                           f"({tables.listing()})")
    return str(entry["source"])
