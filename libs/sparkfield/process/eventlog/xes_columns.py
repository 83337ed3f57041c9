"""Trace records of the usual writing read a batch at a time with Arrow's string kernels
(RE2 and plain cuts in C++), so no Python step runs per trace, event or attribute: the rows
of :func:`sparkfield.process.eventlog.xes_fast.trace_events`, several times faster.

A batch is read this way only when every record in it is of
:mod:`~sparkfield.process.eventlog.xes_fast`'s common shape and written the usual way:
``key`` first and one space before ``value`` in every attribute, no trace attribute after an
event, the case named before the first event, and no key twice in one event. Then every
``"`` opens or closes a key or value (values hold no ``"`` and no ``<``), so the record cut at
``"`` is, for attribute i, the text before its key (``... key=``), the key, `` value=``, the
value, and after the last value the rest; the events are counted by the ``<event>`` tags in
the text between attributes. Any other batch gets None and is read trace by trace."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sparkfield.process.eventlog.xes_fast import SLOTS, shape_patterns

_TRACE, _AFTER_EVENT = shape_patterns("\\x{fffe}\\x{ffff}")
_TRACE = f"\\A(?:{_TRACE})\\z"
# distinct keys a batch may have for the repeated-key test by bit masks: bits up to 2^31, so
# the sum of an event's bits cannot wrap around 2^64 and pass for their union
_MAX_MASK_KEYS = 32


def usual_batch(texts: pa.Array, pos: np.ndarray, schema: pa.Schema) -> pa.RecordBatch | None:
    """Rows of ``schema`` (case, activity, time, resource, lifecycle, the other attributes,
    row order) of trace records (the text after ``<trace``, without the log's end tag), each
    record's events numbered from its ``pos``; None unless every record is of the usual
    writing (see the module)."""
    n = len(texts)
    if n == 0 or texts.null_count:
        return None
    if pa.types.is_large_string(texts.type):  # a batch's text is far below 2 GiB
        texts = texts.cast(pa.string())
    if not pc.all(pc.match_substring_regex(texts, _TRACE)).as_py() or \
            pc.any(pc.match_substring_regex(texts, _AFTER_EVENT)).as_py():
        return None
    cut = pc.split_pattern(texts, '"')
    per_record = pc.list_value_length(cut).to_numpy().astype(np.int64)
    if ((per_record - 1) % 4).any():
        return None
    pieces = pc.list_flatten(cut)
    # each piece's place within its record, in 32 bits (a batch is far below 2 GiB)
    offsets = np.asarray(cut.offsets)
    offsets = offsets - offsets[0]
    at = np.arange(len(pieces), dtype=np.int32) - np.repeat(offsets[:-1], per_record)
    kind = at & 3  # 0: text before a key (or after the last value), 1: key, 2: " value=", 3
    last = np.zeros(len(pieces), dtype=bool)
    last[offsets[1:] - 1] = True
    if not pc.all(pc.equal(pieces.filter(pa.array(kind == 2)), " value=")).as_py() or \
            not pc.all(pc.ends_with(pieces.filter(pa.array((kind == 0) & ~last)),
                                    " key=")).as_py():
        return None
    keys, values = pieces.filter(pa.array(kind == 1)), pieces.filter(pa.array(kind == 3))
    # <event> tags: only in the text between attributes and after the last value
    tags = pc.count_substring(pieces.filter(pa.array(kind == 0)), "<event>").to_numpy()
    tag_record = np.repeat(np.arange(n), (per_record - 1) // 4 + 1)  # of each kind 0
    return _rows(n, pos, schema, keys, values, tag_record, last[kind == 0],
                 tags.astype(np.int64))


def _rows(n: int, pos: np.ndarray, schema: pa.Schema, keys: pa.Array, values: pa.Array,
          tag_record: np.ndarray, tag_last: np.ndarray, tags: np.ndarray
          ) -> pa.RecordBatch | None:
    """The rows, from each record's keys and values, and the ``<event>`` tags in the text
    before each key (``tag_last`` false) and after the last value (true)."""
    events_of = np.bincount(tag_record, weights=tags, minlength=n).astype(np.int64)
    first_event = np.cumsum(events_of) - events_of  # of each record, in the batch
    n_events = int(events_of.sum())
    attr_record = tag_record[~tag_last]
    # events opened up to each attribute, within its record: 0 in the trace's head
    opened = np.cumsum(tags[~tag_last])
    record_start = np.searchsorted(attr_record, np.arange(n))
    opened_before = np.concatenate([[0], opened])[record_start]
    within = opened - opened_before[attr_record]
    head = within == 0
    event = first_event[attr_record] + within - 1  # the attribute's event in the batch
    encoded = keys.dictionary_encode()
    key_id = encoded.indices.to_numpy().astype(np.int64)
    names = encoded.dictionary.to_pylist()
    body = np.flatnonzero(~head)
    if _repeats_a_key(event[body], key_id[body], len(names)):
        return None
    # the case: the first concept:name of the head
    name_id = names.index("concept:name") if "concept:name" in names else -1
    named = np.flatnonzero(head & (key_id == name_id))
    case_attr = np.full(n, -1, dtype=np.int64)
    case_attr[attr_record[named][::-1]] = named[::-1]  # the first one of each record wins
    if (case_attr < 0).any():
        return None
    event_record = np.repeat(np.arange(n), events_of)
    columns = [values.take(pa.array(case_attr)).take(pa.array(event_record))]
    # each key's slot (-1: one of the other attributes), looked up once per attribute
    slot_of_key = np.full(len(names), -1, dtype=np.int8)
    for i, slot in enumerate(SLOTS):
        if slot in names:
            slot_of_key[names.index(slot)] = i
    body_slot = slot_of_key[key_id[body]]
    for i in range(len(SLOTS)):
        mine = body[body_slot == i]
        attr = np.full(n_events, -1, dtype=np.int64)
        attr[event[mine]] = mine
        columns.append(values.take(pa.array(attr, mask=attr < 0)))
    others = body[body_slot < 0]
    per_event = np.bincount(event[others], minlength=n_events)
    offsets = pa.array(np.concatenate([[0], np.cumsum(per_event)]).astype(np.int32))
    attributes = pa.MapArray.from_arrays(offsets, keys.take(pa.array(others)),
                                         values.take(pa.array(others)),
                                         type=schema.field(5).type)
    if (per_event == 0).any():  # no other attribute: null, as the trace reader gives
        attributes = pc.if_else(pa.array(per_event > 0), attributes,
                                pa.nulls(n_events, attributes.type))
    order = np.repeat(pos - first_event, events_of) + np.arange(n_events)
    return pa.RecordBatch.from_arrays([*columns, attributes, pa.array(order, pa.int64())],
                                      schema=schema)


def _repeats_a_key(event: np.ndarray, key_id: np.ndarray, n_keys: int) -> bool:
    """Whether an event (the attributes in event order) holds a key twice: then the trace
    reader's "a later key wins" applies, and the batch is left to it."""
    if len(event) == 0:
        return False
    if n_keys > _MAX_MASK_KEYS:
        pairs = event * n_keys + key_id
        return np.unique(pairs).size != pairs.size
    bits = np.left_shift(np.uint64(1), key_id.astype(np.uint64))
    starts = np.flatnonzero(np.concatenate([[True], event[1:] != event[:-1]]))
    # distinct bits add up to their union; a repeated one does not
    return bool((np.add.reduceat(bits, starts) != np.bitwise_or.reduceat(bits, starts)).any())
