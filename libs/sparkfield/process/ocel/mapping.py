"""The object-centric (OCEL 2.0) form of the extraction mapping.

Besides ``sources``, ``views``, ``timezone`` and ``timestamp_bounds`` (as in the classic form)
it has ``objects`` (object types: id, attributes, attribute values that change over time),
``activities`` whose events relate to objects with a qualifier (event-to-object), and
``object_relations`` (object-to-object). ``case_object_type`` optionally names the object type
whose flattened log is also written as a classic event log. Every error names the object type,
activity or relation and the field, before any data is read.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparkfield.process.extraction.mapping_common import (
    MappingError,
    Source,
    Tables,
    activity_entries,
    attributes_of,
    check_keys,
    check_timezone,
    need,
    parse_sources,
    source_of,
    tables_of,
    timestamp_bounds,
)

TOP_KEYS = ("sources", "views", "timezone", "timestamp_bounds", "case_object_type", "objects",
            "activities", "object_relations")
OBJECT_KEYS = ("source", "id", "where", "attributes", "changes")
CHANGE_KEYS = ("source", "id", "timestamp", "timestamp_format", "where", "attributes")
ACTIVITY_KEYS = ("name", "activity", "label", "source", "timestamp", "timestamp_format", "where",
                 "attributes", "objects")
EVENT_OBJECT_KEYS = ("type", "id", "qualifier")
RELATION_KEYS = ("source", "from", "to", "qualifier", "where")
END_KEYS = ("type", "id")
_CLASSIC_ONLY = "belongs to the classic form: relate the event to an object, or give it as an " \
    "attribute"
_MISPLACED = {
    "case_id": "an object-centric mapping relates events to 'objects', not to a 'case_id'",
    "resource": f"'resource' {_CLASSIC_ONLY}",
    "lifecycle": f"'lifecycle' {_CLASSIC_ONLY}",
}


SOURCE_KEY = "source_key"  # the object attribute that keeps the source system's key


@dataclass(frozen=True)
class AttributeChange:
    """Values of object attributes recorded at a time (OCEL 2.0 object attribute history)."""

    source: str
    id: str
    timestamp: str
    attributes: dict[str, str]
    where: str | None = None
    timestamp_format: str | None = None


@dataclass(frozen=True)
class ObjectType:
    index: int
    name: str
    source: str
    id: str
    attributes: dict[str, str] = field(default_factory=dict)
    where: str | None = None
    changes: tuple[AttributeChange, ...] = ()

    @property
    def label(self) -> str:
        return f"object type {self.name!r}"


@dataclass(frozen=True)
class EventObject:
    """One event-to-object relation of an activity: the object's type, id and qualifier."""

    type: str
    id: str
    qualifier: str = ""


@dataclass(frozen=True)
class OcelActivity:
    index: int
    source: str
    timestamp: str
    objects: tuple[EventObject, ...]
    name: str | None = None
    activity: str | None = None
    where: str | None = None
    attributes: dict[str, str] = field(default_factory=dict)
    timestamp_format: str | None = None
    title: str | None = None

    @property
    def label(self) -> str:
        return f"activity {self.name or self.title or '#' + str(self.index + 1)!r}"


@dataclass(frozen=True)
class ObjectRelation:
    index: int
    source: str
    from_type: str
    from_id: str
    to_type: str
    to_id: str
    qualifier: str = ""
    where: str | None = None

    @property
    def label(self) -> str:
        return f"object relation #{self.index + 1} ({self.from_type} -> {self.to_type})"


@dataclass(frozen=True)
class OcelMapping:
    sources: dict[str, Source]
    objects: dict[str, ObjectType]
    activities: list[OcelActivity]
    object_relations: list[ObjectRelation] = field(default_factory=list)
    views: dict[str, str] = field(default_factory=dict)
    timezone: str = "UTC"
    min_timestamp: str = "1970-01-01"
    max_timestamp: str = "2100-01-01"
    case_object_type: str | None = None
    origin: str = "<inline>"

    @property
    def main_type(self) -> str:
        """The object type whose views stand for the log: the case object type, else the
        first."""
        return self.case_object_type or next(iter(self.objects))


def parse_ocel_mapping(doc: Any, base: Path | str | None = None, origin: str = "<inline>",
                       frames: Collection[str] | None = None) -> OcelMapping:
    """The object-centric form of a parsed mapping document; with ``frames``, a mapping of
    frames (:func:`~sparkfield.process.extraction.mapping_common.frame_sources`)."""
    if not isinstance(doc, dict):
        raise MappingError(f"{origin}: expected a mapping with 'sources', 'objects' and "
                           "'activities'")
    check_keys(doc, TOP_KEYS, origin)
    timezone = check_timezone(doc, origin)
    min_ts, max_ts = timestamp_bounds(doc, origin)
    sources, views = parse_sources(doc, base, origin, frames)
    tables = tables_of(sources, views)
    types = _object_types(doc, origin, tables)
    acts = _activities(doc, origin, tables, types)
    o2o = _object_relations(doc, origin, tables, types)
    case_type = doc.get("case_object_type")
    if case_type is not None:
        _typed(case_type, f"{origin}: case_object_type", types)
    return OcelMapping(
        sources=sources, objects=types, activities=acts, object_relations=o2o, views=views,
        timezone=timezone, min_timestamp=min_ts, max_timestamp=max_ts,
        case_object_type=case_type, origin=origin)


def _typed(name: Any, where: str, types: dict[str, ObjectType]) -> str:
    """``name``, which must be one of the object ``types``."""
    if name not in types:
        raise MappingError(f"{where}: unknown object type {name!r} "
                           f"(types: {', '.join(types)})")
    return str(name)


def _object_types(doc: dict, origin: str, tables: Tables) -> dict[str, ObjectType]:
    raw_types = doc.get("objects")
    if not isinstance(raw_types, dict) or not raw_types:
        raise MappingError(f"{origin}: 'objects' must map object type names to their source "
                           "and id")
    return {str(name): _object_type(i, name, o, f"{origin}: object type {name!r}", tables)
            for i, (name, o) in enumerate(raw_types.items())}


def _object_type(i: int, name: Any, o: Any, where: str, tables: Tables) -> ObjectType:
    if not isinstance(o, dict):
        raise MappingError(f"{where}: must be a mapping")
    check_keys(o, OBJECT_KEYS, where)
    need(o, ("source", "id"), where)
    changes = _changes(o, where, tables)
    if ":" in str(name):  # object ids are <type>:<key>, unique only without it
        raise MappingError(f"{where}: an object type name cannot hold ':'")
    # each type's views are written in a folder of its name, inside the output
    if str(name) in ("", ".", "..") or any(c in str(name) for c in "/\\") or \
            not str(name).isprintable():
        raise MappingError(f"{where}: an object type name is a folder name of the output "
                           "(ocel_views/<type>/): it cannot be empty, '.' or '..', or hold "
                           "'/', '\\' or control characters")
    t = ObjectType(
        index=i, name=str(name), source=source_of(o, where, tables), id=str(o["id"]),
        attributes=attributes_of(o.get("attributes"), where), where=o.get("where"),
        changes=changes)
    if any(SOURCE_KEY in a for a in (t.attributes, *(c.attributes for c in t.changes))):
        raise MappingError(f"{where}: attribute {SOURCE_KEY!r} is reserved (it holds the "
                           "object's source key)")
    return t


def _changes(o: dict, where: str, tables: Tables) -> tuple[AttributeChange, ...]:
    """An object type's ``changes``; source and id default to the type's own."""
    raw_changes = o.get("changes") or []
    if not isinstance(raw_changes, list):
        raise MappingError(f"{where}: 'changes' must list attribute changes")
    changes = []
    for j, c in enumerate(raw_changes):
        cw = f"{where}: change #{j + 1}"
        if not isinstance(c, dict):
            raise MappingError(f"{cw}: must be a mapping")
        check_keys(c, CHANGE_KEYS, cw)
        need(c, ("timestamp", "attributes"), cw)
        changes.append(AttributeChange(
            source=source_of({"source": c.get("source", o["source"])}, cw, tables),
            id=str(c.get("id", o["id"])), timestamp=str(c["timestamp"]),
            attributes=attributes_of(c["attributes"], cw), where=c.get("where"),
            timestamp_format=c.get("timestamp_format")))
    return tuple(changes)


def _activities(doc: dict, origin: str, tables: Tables, types: dict[str, ObjectType]
                ) -> list[OcelActivity]:
    acts = []
    for i, a, where in activity_entries(doc, origin, ACTIVITY_KEYS, _MISPLACED):
        where = f"{where} ({a.get('name') or a.get('label') or a.get('activity')})"
        need(a, ("source", "timestamp"), where)
        objs = _event_objects(a, where, types)
        acts.append(OcelActivity(
            index=i, source=source_of(a, where, tables), timestamp=str(a["timestamp"]),
            objects=objs, name=a.get("name"),
            activity=a.get("activity"), where=a.get("where"),
            attributes=attributes_of(a.get("attributes"), where),
            timestamp_format=a.get("timestamp_format"), title=a.get("label")))
    return acts


def _event_objects(a: dict, where: str, types: dict[str, ObjectType]
                   ) -> tuple[EventObject, ...]:
    rels = a.get("objects")
    if not isinstance(rels, list) or not rels:
        raise MappingError(f"{where}: 'objects' must list the objects each event relates "
                           "to ({type, id, qualifier})")
    objs = []
    for j, r in enumerate(rels):
        rw = f"{where}: objects #{j + 1}"
        if not isinstance(r, dict):
            raise MappingError(f"{rw}: must be a mapping with type, id and qualifier")
        check_keys(r, EVENT_OBJECT_KEYS, rw)
        need(r, ("type", "id"), rw)
        objs.append(EventObject(type=_typed(r["type"], rw, types), id=str(r["id"]),
                                qualifier=str(r.get("qualifier") or "")))
    return tuple(objs)


def _object_relations(doc: dict, origin: str, tables: Tables,
                      types: dict[str, ObjectType]) -> list[ObjectRelation]:
    raw_o2o = doc.get("object_relations") or []
    if not isinstance(raw_o2o, list):
        raise MappingError(f"{origin}: 'object_relations' must list {{source, from, to}}")
    o2o = []
    for i, r in enumerate(raw_o2o):
        where = f"{origin}: object relation #{i + 1}"
        if not isinstance(r, dict):
            raise MappingError(f"{where}: must be a mapping")
        check_keys(r, RELATION_KEYS, where)
        need(r, ("source", "from", "to"), where)
        from_type, from_id = _relation_end(r, "from", where, types)
        to_type, to_id = _relation_end(r, "to", where, types)
        o2o.append(ObjectRelation(
            index=i, source=source_of(r, where, tables), from_type=from_type,
            from_id=from_id, to_type=to_type, to_id=to_id,
            qualifier=str(r.get("qualifier") or ""), where=r.get("where")))
    return o2o


def _relation_end(r: dict, side: str, where: str, types: dict[str, ObjectType]
                  ) -> tuple[str, str]:
    """The ``side`` (from, to) of an object relation: (object type, id expression)."""
    end = r[side]
    if not isinstance(end, dict):
        raise MappingError(f"{where}: {side!r} must be {{type, id}}")
    check_keys(end, END_KEYS, f"{where}: {side}")
    need(end, ("type", "id"), f"{where}: {side}")
    return _typed(end["type"], f"{where}: {side}", types), str(end["id"])
