"""The regular-expression trace reader against lxml's (the driver reader's rules): the same
rows wherever it answers, and no answer wherever its shape is not met."""

from __future__ import annotations

import contextlib
import io
import random

import pytest

from sparkfield.process.eventlog import xes_fast
from sparkfield.process.eventlog.xes import XesError, xes_rows
from sparkfield.process.eventlog.xes_fast import trace_rows

OPEN = b'<?xml version="1.0" encoding="UTF-8"?> <log xes.version="1.0">'


def lxml_rows(record: str) -> list[list]:
    doc = OPEN + b"<trace" + record.encode("utf-8") + b"</log>"
    return list(xes_rows(io.BytesIO(doc), "t.xes"))


COMMON = {
    "plain": '>\n\t<string key="concept:name" value="c1"/>\n\t<event>\n'
             '\t\t<string key="concept:name" value="A"/>\n'
             '\t\t<date key="time:timestamp" value="2011-10-01T00:38:44.546+02:00"/>\n'
             '\t\t<string key="org:resource" value="112"/>\n'
             '\t\t<string key="lifecycle:transition" value="COMPLETE"/>\n'
             '\t\t<int key="amount" value="20000"/>\n\t</event>\n</trace>\n',
    "value before key, spaces before />": '><string value="c2" key="concept:name" />'
        '<event><string value="B" key="concept:name"  /><float key="x" value="1.5"/>'
        '<boolean key="ok" value="true"/><id key="u" value="7"/></event></trace>',
    "name after events, later keys win": '><event><string key="concept:name" value="A"/>'
        '<string key="concept:name" value="A2"/><string key="k" value="1"/>'
        '<string key="k" value="2"/></event><int key="n" value="3"/>'
        '<string key="concept:name" value="late"/>'
        '<string key="concept:name" value="later"/></trace>',
    "empty values, > and quotes of the other kind": '\r\n><string key="concept:name" value=""/>'
        '<event><string key="concept:name" value="a>b \'c\'"/><string key="" value=""/>'
        '</event></trace>',
    "no events": '><string key="concept:name" value="c"/></trace>',
    "an event without attributes": '><string key="concept:name" value="c"/><event></event>'
        '<event>\n</event></trace>',
    "unicode": '><string key="concept:name" value="Café ☕"/><event>'
               '<string key="concept:name" value="Noël — 𝄞"/></event></trace>',
    "closing tag of the log after the trace": '><string key="concept:name" value="c"/>'
        '<event><string key="concept:name" value="A"/></event></trace>\n',
}

OTHER = {
    "entity": '><string key="concept:name" value="a &amp; b"/><event>'
              '<string key="concept:name" value="x &#233;"/></event></trace>',
    "tab in a value": '><string key="concept:name" value="a\tb"/><event>'
                      '<string key="concept:name" value="x\ny"/></event></trace>',
    "nested attribute": '><string key="concept:name" value="c"/><event>'
        '<string key="concept:name" value="A"><string key="inner" value="1"/></string>'
        '</event></trace>',
    "list attribute": '><string key="concept:name" value="c"/><event><list key="l">'
        '<values><string key="a" value="1"/></values></list></event></trace>',
    "namespaced tags": ' xmlns:x="http://www.xes-standard.org/"><x:string key="concept:name" '
        'value="c"/><event><x:string key="concept:name" value="A"/></event></trace>',
    "single quotes": "><string key='concept:name' value='c'/><event></event></trace>",
    "comment": '><!-- note --><string key="concept:name" value="c"/><event></event></trace>',
    "text content": '>hello<string key="concept:name" value="c"/><event></event></trace>',
    "an attribute on event": '><string key="concept:name" value="c"/><event id="1">'
                             '</event></trace>',
    "an extra attribute": '><string key="concept:name" value="c" extra="1"/></trace>',
    "an unknown type": '><string key="concept:name" value="c"/><event>'
                       '<container key="a" value="1"/></event></trace>',
    "a value without key": '><string key="concept:name" value="c"/><event>'
                           '<string value="1"/></event></trace>',
    "a nameless trace": '><event><string key="concept:name" value="A"/></event></trace>',
}

BROKEN = {
    "an unclosed event": '><string key="concept:name" value="c"/><event></trace>',
    "a control character": '><string key="concept:name" value="c\x01"/></trace>',
    "an undefined entity": '><string key="concept:name" value="&nbsp;"/></trace>',
    "a raw <": '><string key="concept:name" value="a<b"/></trace>',
    "an event in an event": '><string key="concept:name" value="c"/><event><event></event>'
                            '</event></trace>',
}


@pytest.mark.parametrize("record", COMMON.values(), ids=COMMON.keys())
def test_common_traces_are_read_and_equal_lxml(record):
    rows = trace_rows(record)
    assert rows is not None
    assert rows == lxml_rows(record)


@pytest.mark.parametrize("record", OTHER.values(), ids=OTHER.keys())
def test_other_traces_are_left_to_lxml(record):
    assert trace_rows(record) is None
    with contextlib.suppress(XesError):  # a nameless trace: lxml's reader gives the error
        lxml_rows(record)


@pytest.mark.parametrize("record", BROKEN.values(), ids=BROKEN.keys())
def test_malformed_traces_are_left_to_lxml_which_names_the_error(record):
    assert trace_rows(record) is None
    with pytest.raises(XesError):
        lxml_rows(record)


def test_list_and_container_attributes_are_kept_as_json():
    record = ('><string key="concept:name" value="c"/><event>'
              '<string key="concept:name" value="A"/>'
              '<list key="items"><string key="meta" value="m"/><values>'
              '<string key="i" value="pen"/><int key="i" value="2"/>'
              '<container key="box"><float key="w" value="1.5"/></container>'
              '</values></list>'
              '<container key="addr"><string key="city" value="Köln"/>'
              '<list key="lines"><string key="l" value="a"/><string key="l" value="b"/></list>'
              '</container><list key="none"/></event></trace>')
    assert trace_rows(record) is None  # left to lxml
    (row,) = lxml_rows(record)
    assert row[:2] == ["c", "A"]
    assert row[5] == {"items": '["pen", "2", {"w": "1.5"}]',
                      "addr": '{"city": "Köln", "lines": ["a", "b"]}', "none": "[]"}


def _random_record(rng: random.Random) -> str:
    ws = ["", " ", "\n", "\t", "\r\n  "]
    values = ["A", "", "x y", "é", "a>b", "1.5", "'q'"] * 6 + ["a &amp; b", "t\tab"]
    keys = ["concept:name", "time:timestamp", "org:resource", "lifecycle:transition", "k",
            "k2", ""]

    def attr() -> str:
        tag = rng.choice(["string", "date", "int", "float", "boolean", "id"] * 8
                         + ["x:string"])
        k, v = rng.choice(keys), rng.choice(values)
        pair = [f'key="{k}"', f'value="{v}"']
        if rng.random() < 0.3:
            pair.reverse()
        return f"<{tag} {pair[0]}{rng.choice(ws) or ' '}{pair[1]}{rng.choice(['', ' '])}/>"

    parts = [rng.choice(ws) + ">"]
    if rng.random() < 0.8:
        parts.append(f'<string key="concept:name" value="{rng.choice(values)}"/>')
    for _ in range(rng.randint(0, 5)):
        if rng.random() < 0.4:
            parts.append(rng.choice(ws) + attr())
        else:
            inner = "".join(rng.choice(ws) + attr() for _ in range(rng.randint(0, 5)))
            parts.append(f"{rng.choice(ws)}<event>{inner}{rng.choice(ws)}</event>")
    parts.append(rng.choice(ws) + "</trace>" + rng.choice(ws))
    return "".join(parts)


def _with_lxml(record: str) -> tuple[list | None, list | None]:
    """``trace_rows(record)`` and lxml's rows; both None where lxml names an error (the fast
    reader must then decline the record too)."""
    rows = trace_rows(record)
    try:
        return rows, lxml_rows(record)
    except XesError:
        assert rows is None, record
        return None, None


def test_random_traces_equal_lxml_wherever_read():
    rng = random.Random(7)
    read = 0
    for _ in range(3000):
        record = _random_record(rng)
        rows, want = _with_lxml(record)
        if want is not None and rows is not None:
            read += 1
            assert rows == want, record
    assert read > 300  # the comparison covered many traces the fast reader read


# the way most logs are written (key first, one space, the name before the events): read by
# cutting at <event> and '"'; each must equal lxml with the attribute-by-attribute reader off
CUT = {
    "repeated keys in one event": '><string key="concept:name" value="c"/><event>'
        '<string key="k" value="1"/><string key="concept:name" value="A"/>'
        '<string key="j" value="x"/><string key="k" value="2"/>'
        '<string key="concept:name" value="A2"/><date key="time:timestamp" value="t1"/>'
        '<date key="time:timestamp" value="t2"/></event></trace>',
    "attributes beyond the four": '>\n<string key="concept:name" value="c"/>\n<event>\n'
        '<string key="org:resource" value="r"/>\n<int key="amount" value="5"/>\n'
        '<string key="lifecycle:transition" value="complete"/>\n'
        '<float key="cost" value="1.5"/>\n<boolean key="ok" value="true"/>\n</event>\n'
        '</trace>\n',
    "a later trace name is not the case": '><string key="x" value="1"/>'
        '<string key="concept:name" value="first"/><string key="concept:name" value="2nd"/>'
        '<event><string key="concept:name" value="A"/></event></trace>',
    "/> and key= text inside values": '><string key="concept:name" value="c/> key=x"/>'
        '<event><string key="concept:name" value="a /> key= value= b"/>'
        '<string key="k=" value="/>"/><string key="x /> y" value=" key=1"/></event></trace>',
    "an empty trace": '><string key="concept:name" value="c"/></trace>',
    "events without attributes": '><string key="concept:name" value="c"/><event></event>'
        '<event>\n\t</event><event><string key="concept:name" value="A"/></event>'
        '</trace>',
    "empty keys and values, > and quotes of the other kind": '><string key="concept:name" '
        'value=""/><event><string key="" value=""/><string key="concept:name" '
        'value="a>b \'c\'"/><id key="u" value=""/></event></trace>',
    "tabs and line breaks around the tags": '\r\n\t>\r\n<string key="concept:name" value="c"'
        '   />\n\t<event>\r\n<string key="concept:name" value="A"\n/>\t</event>\r\n</trace>\r\n',
    "a value ending in key=": '><string key="concept:name" value="c"/><event>'
        '<string key="a" value="x key="/><string key="b" value="y"/></event></trace>',
    "a key ending in value=": '><string key="concept:name" value="c"/><event>'
        '<string key="a value=" value="x"/><string key="b" value="y"/></event></trace>',
    "a value ending in value=": '><string key="concept:name" value="c"/><event>'
        '<string key="a" value=" value="/><string key="b" value="y"/></event></trace>',
}
# of the shape but not written that way: read attribute by attribute
TOKENS = {
    "value before key": '><string key="concept:name" value="c"/><event>'
        '<string value="A" key="concept:name"/><string key="k" value="1"/></event></trace>',
    "value before key in the trace": '><string value="c" key="concept:name"/>'
        '<string key="concept:name" value="d"/><event></event></trace>',
    "a line break before value": '><string key="concept:name"\nvalue="c"/><event>'
        '<string key="concept:name"  value="A"/></event></trace>',
    "a trace attribute after an event": '><string key="concept:name" value="c"/><event>'
        '<string key="concept:name" value="A"/></event><string key="n" value="1"/><event>'
        '<string key="k" value="v"/></event></trace>',
    "the trace name after the events": '><event><string key="concept:name" value="A"/>'
        '</event><string key="concept:name" value="late"/></trace>',
    "value before key, one ending in key=, the other starting with value=":
        '><string key="concept:name" value="c"/><event><string value="p key=" '
        'key=" value="/><string key="b" value="y"/></event></trace>',
}


def _no_token_reader(monkeypatch) -> None:
    def refuse(record):
        raise AssertionError("read attribute by attribute")

    monkeypatch.setattr(xes_fast, "_token_events", refuse)


@pytest.mark.parametrize("record", CUT.values(), ids=CUT.keys())
def test_traces_cut_at_events_and_quotes_equal_lxml(record, monkeypatch):
    want = lxml_rows(record)
    _no_token_reader(monkeypatch)
    assert trace_rows(record) == want


def _token_reader_calls(monkeypatch) -> list[str]:
    """The records the attribute-by-attribute reader is given from now on."""
    calls: list[str] = []
    token_events = xes_fast._token_events
    monkeypatch.setattr(xes_fast, "_token_events",
                        lambda r: calls.append(r) or token_events(r))
    return calls


@pytest.mark.parametrize("record", TOKENS.values(), ids=TOKENS.keys())
def test_other_writings_are_read_attribute_by_attribute_and_equal_lxml(record, monkeypatch):
    want = lxml_rows(record)
    calls = _token_reader_calls(monkeypatch)
    assert trace_rows(record) == want
    assert calls == [record]


def test_repeated_keys_keep_the_last_value_and_the_first_place():
    rows = trace_rows(CUT["repeated keys in one event"])
    assert rows == [["c", "A2", "t2", None, None, {"k": "2", "j": "x"}]]
    assert list(rows[0][5]) == ["k", "j"]


def _usual_record(rng: random.Random) -> str:
    """A trace as most writers put it, with keys that repeat, odd values and, now and then,
    one of the writings that :func:`trace_events` leaves to the attribute-by-attribute
    reader."""
    values = ["A", "", "x y", "é", "a>b", "/>", " key=1", "k=", "'q'", "2011-10-01T00:38"]
    keys = ["concept:name", "time:timestamp", "org:resource", "lifecycle:transition", "k",
            "k2", "", "/> x"]

    def attr() -> str:
        tag = rng.choice(["string", "date", "int", "float", "boolean", "id"])
        k, v = rng.choice(keys), rng.choice(values)
        if rng.random() < 0.03:
            return f'<{tag} value="{v}" key="{k}"/>'
        if rng.random() < 0.03:
            v += " key="
        return f'<{tag} key="{k}" value="{v}"/>'

    parts = [">"]
    if rng.random() < 0.95:
        parts.append(f'\n\t<string key="concept:name" value="{rng.choice(values)}"/>')
    for _ in range(rng.randint(0, 6)):
        if rng.random() < 0.05:
            parts.append("\n\t" + attr())
        else:
            inner = "".join("\n\t\t" + attr() for _ in range(rng.randint(0, 6)))
            parts.append(f"\n\t<event>{inner}\n\t</event>")
    parts.append("\n</trace>\n")
    return "".join(parts)


def test_random_usual_traces_equal_lxml(monkeypatch):
    rng = random.Random(11)
    by_tokens = _token_reader_calls(monkeypatch)
    cut = 0
    for _ in range(3000):
        record = _usual_record(rng)
        before = len(by_tokens)
        rows, want = _with_lxml(record)
        if want is None:
            continue
        assert rows == want, record
        cut += len(by_tokens) == before
    assert 1000 < cut < 2900  # both readers covered
