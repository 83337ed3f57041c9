"""The common shape of an XES trace read with string operations and regular expressions
instead of an XML parser: several times the speed of lxml, and exactly its rows.

A trace qualifies only when the whole record is, with XML white space between them, the
rest of ``<trace>`` then typed attributes (``<string key="..." value="..."/>`` and the
other XES types, ``key`` and ``value`` in either order, double-quoted) and ``<event>``
elements holding only such attributes, then ``</trace>``. Values may not hold ``&``
(entities), a tab or line break (XML normalises them to spaces), control characters or
``<``. Any other record (namespaced or nested attributes, comments, entities, text,
malformed XML) gets ``None`` and goes to :func:`sparkfield.process.eventlog.xes.xes_rows`, which
parses it or names the error.

Within that shape most logs are written one way: ``key`` first, one space before ``value``,
the trace's name before its first event and no trace attribute after one. Such a record is
cut at ``<event>`` and each piece's attributes taken with one ``findall`` (no per-attribute
Python step); counting ``<`` proves that every attribute was taken. Other records of the shape
are read attribute by attribute (:func:`_token_events`)."""

from __future__ import annotations

import re
from typing import Any

_WS = "[ \t\r\n]*"
_SEP = "[ \t\r\n]+"
_TYPE = "string|date|int|float|boolean|id"


def _value(nonchars: str) -> str:
    return f'[^"<&\\t\\n\\r\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f{nonchars}]*'


def shape_patterns(nonchars: str) -> tuple[str, str]:
    """The record of the common shape (after ``<trace``: the tag's end, its children, its end
    tag) and a trace attribute after an event in such a record, as regular expressions;
    ``nonchars`` writes U+FFFE and U+FFFF in the engine's syntax (Python's ``\\ufffe``,
    RE2's ``\\x{fffe}``)."""
    value = _value(nonchars)
    attr = (f'<(?:{_TYPE}){_SEP}(?:key="{value}"{_SEP}value="{value}"'
            f'|value="{value}"{_SEP}key="{value}"){_WS}/>')
    event = f"<event>(?:{_WS}{attr})*{_WS}</event>"
    return (f"{_WS}>(?:{_WS}(?:{attr}|{event}))*{_WS}</trace>{_WS}",
            f"</event>{_WS}<[^e/]")


_TRACE_TEXT, _AFTER_EVENT_TEXT = shape_patterns("\\ufffe\\uffff")
_VALUE = _value("\\ufffe\\uffff")
_TRACE = re.compile(_TRACE_TEXT)
_TOKEN = re.compile(f'<(?:{_TYPE}){_SEP}(?:key="({_VALUE})"{_SEP}value="({_VALUE})"'
                    f'|value="({_VALUE})"{_SEP}key="({_VALUE})")|<(/?)event>')
# in a record of the shape: an attribute of the trace after an event
_AFTER_EVENT = re.compile(_AFTER_EVENT_TEXT)
# in a record of the shape: an attribute written key first, one space before value (every
# "<" starts a tag and '"' only opens and closes keys and values, so no match starts or ends
# inside a key or value)
_USUAL = re.compile('<[a-z]+ key="([^"]*)" value="([^"]*)"')
# the log's end tag, which the last record holds after its trace
LOG_CLOSE = re.compile(r"</(?:[\w.-]+:)?log>\s*$")
SLOTS = ("concept:name", "time:timestamp", "org:resource", "lifecycle:transition")

Events = list[dict[str, str]]


def without_log_end(record: str) -> str:
    """A trace record without the log's end tag, cut where the readers cut it."""
    return LOG_CLOSE.sub("", record) if "</log" in record else record


def trace_events(record: str) -> tuple[str, Events] | None:
    """The case name and each event's attributes (key to value, a later key wins, in the
    order keys first appear) of one trace record (the text after ``<trace``), as
    :func:`sparkfield.process.eventlog.xes.xes_rows` reads them, or None when the record is not of
    the common shape above or names no case (lxml's reader names the error)."""
    if _TRACE.fullmatch(record) is None:
        return None
    parts = record.split("<event>")
    if _AFTER_EVENT.search(record) is None:
        head = _USUAL.findall(parts[0])
        pairs = [_USUAL.findall(p) for p in parts[1:]]
        # every "<" of the record starts a tag: its attributes, 2 per event and </trace>
        if len(head) + sum(map(len, pairs)) == record.count("<") - 2 * len(parts) + 1:
            for key, value in head:
                if key == "concept:name":
                    return value, [dict(p) for p in pairs]
    return _token_events(record)


def _token_events(record: str) -> tuple[str, Events] | None:
    """:func:`trace_events` for any record of the shape, attribute by attribute."""
    case: str | None = None
    events: Events = []
    event: dict[str, str] | None = None
    for m in _TOKEN.finditer(record):
        key, value, value2, key2, slash = m.groups()
        if slash is not None:  # <event> or </event>: the grammar has checked their nesting
            if slash:
                events.append(event)  # type: ignore[arg-type]
                event = None
            else:
                event = {}
            continue
        if key is None:
            key, value = key2, value2
        if event is not None:
            event[key] = value
        elif case is None and key == "concept:name":  # the first name of the trace
            case = value
    if case is None:
        return None
    return case, events


def event_columns(events: Events) -> list[list[Any]]:
    """activity, time, resource, lifecycle and the other attributes (None where there are
    none) of events from :func:`trace_events`; the dictionaries are emptied of the first
    four."""
    columns: list[list[Any]] = [[e.pop(key, None) for e in events] for key in SLOTS]
    columns.append([e or None for e in events])
    return columns


def trace_rows(record: str) -> list[list[Any]] | None:
    """Rows ``[case, activity, time, resource, lifecycle, attributes]`` of one trace record,
    as :func:`sparkfield.process.eventlog.xes.xes_rows` gives them, or None (see
    :func:`trace_events`)."""
    read = trace_events(record)
    if read is None:
        return None
    case, events = read
    return [[case, *row] for row in zip(*event_columns(events), strict=True)]
