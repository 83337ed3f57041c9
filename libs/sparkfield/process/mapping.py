"""The extraction mapping (YAML): sources, time zone and one entry per activity.

Errors (unknown source, missing field, bad expression, missing credential variable) are raised
as :class:`MappingError` naming the activity and field, before any data is read.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sparkfield.core.conf import ConfigError

FORMATS = {"csv", "parquet", "json", "jdbc"}


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


_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _expand(text: str) -> str:
    return _ENV.sub(lambda m: os.environ.get(m.group(1), m.group(2) or ""), text)


def _resolve(path: str, base: Path | str | None) -> str:
    path = _expand(path)
    if "://" in path or base is None or os.path.isabs(path):
        return path
    if isinstance(base, str) and "://" in base:  # a mapping read from HDFS, S3, ...
        return f"{base.rstrip('/')}/{path}"
    return str((Path(base) / path).resolve())


def load_mapping(path: str | os.PathLike[str], spark=None) -> Mapping:
    """Read and check a mapping file. With ``spark`` the path is resolved as Hadoop resolves
    it (``hdfs://``, ``s3a://``, or a path against ``fs.defaultFS``) and read through Hadoop's
    FileSystem; relative source paths are taken against the mapping's folder either way."""
    base: Path | str
    if spark is not None:
        from sparkfield.core.batch import resolve_path
        from sparkfield.core.io import path_exists, read_text_file

        scheme, resolved = resolve_path(str(path), spark)
        if scheme != "file":
            if not path_exists(spark, resolved):
                raise MappingError(f"mapping file not found: {path}")
            text, base, origin = read_text_file(spark, resolved), resolved.rsplit("/", 1)[0], \
                resolved
            return _parse_text(text, base, origin)
        path = resolved
    p = Path(path)
    if not p.is_file():
        raise MappingError(f"mapping file not found: {p}")
    return _parse_text(p.read_text(), p.parent, str(p))


def _parse_text(text: str, base: Path | str, origin: str) -> Mapping:
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise MappingError(f"{origin}: invalid YAML: {exc}") from exc
    if isinstance(doc, dict) and "objects" in doc:  # the object-centric (OCEL 2.0) form
        from sparkfield.process.ocel_mapping import parse_ocel_mapping

        return parse_ocel_mapping(doc, base=base, origin=origin)
    return parse_mapping(doc, base=base, origin=origin)


def activity_entries(doc: dict, origin: str) -> Iterator[tuple[int, dict, str]]:
    """``(position, entry, where)`` for each entry of ``activities``, after the checks that
    both mapping forms share (a non-empty list of mappings, each naming its activity once)."""
    raw_acts = doc.get("activities") or []
    if not isinstance(raw_acts, list) or not raw_acts:
        raise MappingError(f"{origin}: 'activities' must list at least one activity")
    for i, a in enumerate(raw_acts):
        where = f"{origin}: activity #{i + 1}"
        if not isinstance(a, dict):
            raise MappingError(f"{where}: must be a mapping")
        if bool(a.get("name")) == bool(a.get("activity")):
            raise MappingError(f"{where}: give exactly one of 'name' (literal) or 'activity' "
                               "(expression)")
        yield i, a, where


def parse_mapping(doc: Any, base: Path | str | None = None, origin: str = "<inline>"
                  ) -> Mapping:
    if not isinstance(doc, dict):
        raise MappingError(f"{origin}: expected a mapping with 'sources' and 'activities'")
    sources, views = parse_sources(doc, base, origin)
    acts = []
    for i, a, where in activity_entries(doc, origin):
        label = a.get("name") or a.get("activity")
        for key in ("source", "case_id", "timestamp"):
            if not a.get(key):
                raise MappingError(f"{where} ({label}): missing {key!r}")
        if a["source"] not in sources and a["source"] not in views:
            raise MappingError(f"{where} ({label}): unknown source {a['source']!r} "
                               f"(sources: {', '.join([*sources, *views])})")
        attrs = a.get("attributes") or {}
        if isinstance(attrs, list):
            attrs = {str(c): f"`{c}`" for c in attrs}
        acts.append(Activity(
            index=i, source=a["source"], case_id=str(a["case_id"]),
            timestamp=str(a["timestamp"]), name=a.get("name"), activity=a.get("activity"),
            resource=a.get("resource"), lifecycle=a.get("lifecycle"), where=a.get("where"),
            attributes={str(k): str(v) for k, v in attrs.items()},
            timestamp_format=a.get("timestamp_format"), title=a.get("label"),
        ))
    bounds = doc.get("timestamp_bounds") or {}
    return Mapping(sources=sources, activities=acts, views=views,
                   timezone=str(doc.get("timezone", "UTC")),
                   min_timestamp=str(bounds.get("min", "1970-01-01")),
                   max_timestamp=str(bounds.get("max", "2100-01-01")), origin=origin)


def parse_sources(doc: dict, base: Path | None, origin: str
                  ) -> tuple[dict[str, Source], dict[str, str]]:
    """The ``sources`` and ``views`` sections (shared by the classic and OCEL forms)."""
    raw_sources = doc.get("sources") or {}
    if not isinstance(raw_sources, dict) or not raw_sources:
        raise MappingError(f"{origin}: 'sources' must name at least one source")
    sources = {}
    for name, s in raw_sources.items():
        if not isinstance(s, dict):
            raise MappingError(f"{origin}: source {name!r} must be a mapping")
        fmt = str(s.get("format", "")).lower()
        if fmt not in FORMATS:
            raise MappingError(f"{origin}: source {name!r}: format must be one of "
                               f"{sorted(FORMATS)}, got {s.get('format')!r}")
        if fmt == "jdbc":
            for key in ("url", "table"):
                if not s.get(key):
                    raise MappingError(f"{origin}: source {name!r}: jdbc needs {key!r}")
            if "password" in s or "user" in s:
                raise MappingError(f"{origin}: source {name!r}: credentials come only from "
                                   "the environment (user_env / password_env)")
        elif not s.get("path"):
            raise MappingError(f"{origin}: source {name!r}: needs 'path'")
        sources[name] = Source(
            name=name, format=fmt,
            path=_resolve(str(s["path"]), base) if s.get("path") else None,
            options={k: str(v) for k, v in (s.get("options") or {}).items()},
            url=_expand(str(s["url"])) if s.get("url") else None,
            table=s.get("table"), user_env=s.get("user_env"), password_env=s.get("password_env"),
            partition_column=s.get("partition_column"),
            lower_bound=s.get("lower_bound"), upper_bound=s.get("upper_bound"),
            num_partitions=s.get("num_partitions"),
        )
    views = doc.get("views") or {}
    if not isinstance(views, dict):
        raise MappingError(f"{origin}: 'views' must map names to SQL queries")
    clash = set(views) & set(sources)
    if clash:
        raise MappingError(f"{origin}: view names clash with sources: {sorted(clash)}")
    return sources, {str(k): str(v) for k, v in views.items()}
