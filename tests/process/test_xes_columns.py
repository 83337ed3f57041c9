"""Batches of trace records read with Arrow's kernels against the trace-by-trace reader: the
same rows wherever a batch is read, and every batch of the usual writing read."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from sparkfield.process.eventlog.xes_columns import usual_batch
from sparkfield.process.eventlog.xes_records import Columns, columns_of
from sparkfield.process.eventlog.xes_split import _RAW_ARROW, _parser
from tests.process.test_xes_fast import BROKEN, COMMON, CUT, OTHER, TOKENS, _usual_record

USUAL = ('>\n\t<string key="concept:name" value="{case}"/>\n\t<date key="REG" value="x"/>\n'
         '\t<event>\n\t\t<string key="org:resource" value="112"/>\n'
         '\t\t<string key="lifecycle:transition" value="COMPLETE"/>\n'
         '\t\t<string key="concept:name" value="A_{case}"/>\n'
         '\t\t<date key="time:timestamp" value="2011-10-01T00:38:44.546+02:00"/>\n'
         '\t\t<int key="amount" value="{case}0"/>\n\t</event>\n'
         '\t<event>\n\t\t<string key="concept:name" value="B"/>\n\t</event>\n</trace>\n')


def _positions(records: list[str], first: int = 0) -> np.ndarray:
    lengths = np.array([len(r) + len("<trace") for r in records], dtype=np.int64)
    return first + np.cumsum(lengths) - lengths


def by_traces(records: list[str], pos: np.ndarray) -> pa.Table:
    """The trace-by-trace reader's rows (lists of records, as for a batch holding markup)."""
    chunk = [(int(p), 1, 0, r) for p, r in zip(pos, records, strict=True)]
    return pa.Table.from_batches(list(_parser("t.xes", b"<log>")([chunk])), _RAW_ARROW)


def by_columns(records: list[str], pos: np.ndarray) -> pa.Table | None:
    batch = usual_batch(pa.array(records, pa.string()), pos, _RAW_ARROW)
    return None if batch is None else pa.Table.from_batches([batch])


def test_a_batch_of_the_usual_writing_is_read_as_columns_with_the_traces_rows():
    records = [USUAL.format(case=i) for i in range(50)]
    pos = _positions(records, first=7 << 40)
    got = by_columns(records, pos)
    assert got is not None
    assert got.equals(by_traces(records, pos))
    assert got.num_rows == 100
    assert got.column("attributes").to_pylist()[:2] == [[("amount", "00")], None]
    assert got.column("row_order").to_pylist()[:3] == [7 << 40, (7 << 40) + 1,
                                                       (7 << 40) + len(records[0]) + 6]


@pytest.mark.parametrize("record", [*COMMON.values(), *CUT.values()],
                         ids=[*COMMON, *CUT])
def test_a_common_record_is_read_alike_or_left_to_the_trace_reader(record):
    records = [USUAL.format(case=1), record]
    pos = _positions(records)
    got = by_columns(records, pos)
    if got is not None:
        assert got.equals(by_traces(records, pos))


@pytest.mark.parametrize("record", [*OTHER.values(), *BROKEN.values(), *TOKENS.values(),
                                    CUT["repeated keys in one event"]],
                         ids=[*OTHER, *BROKEN, *TOKENS, "repeated keys"])
def test_a_batch_holding_one_record_of_another_writing_is_left_to_the_trace_reader(record):
    records = [USUAL.format(case=i) for i in range(3)] + [record]
    assert by_columns(records, _positions(records)) is None


def test_random_usual_batches_equal_the_trace_reader():
    rng = random.Random(5)
    read = 0
    for _ in range(600):
        records = [_usual_record(rng) for _ in range(rng.randint(1, 3))]
        pos = _positions(records, first=rng.randint(0, 9) << 40)
        got = by_columns(records, pos)
        if got is None:
            continue
        read += 1
        assert got.equals(by_traces(records, pos)), records
    assert 50 < read < 550  # batches of both kinds (repeated keys are common here)


def test_large_strings_give_the_same_rows():
    records = [USUAL.format(case=i) for i in range(3)]
    pos = _positions(records)
    got = usual_batch(pa.array(records, pa.large_string()), pos, _RAW_ARROW)
    assert got is not None and pa.Table.from_batches([got]).equals(by_traces(records, pos))


@pytest.mark.parametrize("distinct", [8, 32, 63, 80])
def test_a_key_repeated_in_an_event_is_found_however_many_keys_the_batch_has(distinct):
    """Five times the last key: with 63 keys, bits of 2^62 would add up past 2^64 to
    their union."""
    first = "".join(f'<string key="k{i}" value="v"/>' for i in range(1, distinct))
    again = f'<string key="k{distinct - 1}" value="w"/>' * 5
    record = (f'><string key="concept:name" value="c"/><event>{first}</event>'
              f'<event><string key="concept:name" value="A"/></event>')
    pos = _positions([record + "</trace>"])
    got = by_columns([record + "</trace>"], pos)
    assert got is not None and got.equals(by_traces([record + "</trace>"], pos))
    assert by_columns([f"{record}<event>{again}</event></trace>"], pos) is None


def test_many_distinct_keys_are_checked_for_repeats_too():
    keys = [f"k{i}" for i in range(80)]
    event = "".join(f'<string key="{k}" value="v"/>' for k in keys)
    record = f'><string key="concept:name" value="c"/><event>{event}</event></trace>'
    repeated = record.replace('key="k79"', 'key="k3"')
    pos = _positions([record])
    got = by_columns([record], pos)
    assert got is not None and got.equals(by_traces([record], pos))
    assert by_columns([repeated], pos) is None


def test_columns_of_a_record_batch_give_the_same_records():
    records = [USUAL.format(case=i) for i in range(3)]
    pos = _positions(records)
    cols = Columns(pa.array(records), pos, np.array([1, 20, 40]), np.zeros(3, np.int64))
    (back,) = list(columns_of(iter([cols.batch()])))
    assert back.records() == cols.records() == [
        (int(p), line, 0, r) for p, line, r in zip(pos, [1, 20, 40], records, strict=True)]
