"""The regular-expression trace reader against lxml's (the driver reader's rules): the same
rows wherever it answers, and no answer wherever its shape is not met."""

from __future__ import annotations

import contextlib
import io
import random

import pytest

from sparkfield.process.xes import XesError, xes_rows
from sparkfield.process.xes_fast import trace_rows

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


def test_random_traces_equal_lxml_wherever_read():
    rng = random.Random(7)
    read = 0
    for _ in range(3000):
        record = _random_record(rng)
        rows = trace_rows(record)
        try:
            want = lxml_rows(record)
        except XesError:
            assert rows is None, record
            continue
        if rows is not None:
            read += 1
            assert rows == want, record
    assert read > 300  # the comparison covered many traces the fast reader read
