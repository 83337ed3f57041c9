"""The JVM's XES trace reader against the Python reader it stands in for: the same rows and
instants on every record either reads, no answer where the Python reader has none, the same
rows on a whole log, and the Python reader where a later trace is of another shape."""

from __future__ import annotations

import json
import random

import pyarrow as pa
import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.process.eventlog.iso_instants import iso_instants
from sparkfield.process.eventlog.xes import read_xes_on_driver
from sparkfield.process.eventlog.xes_fast import trace_events, without_log_end
from sparkfield.process.eventlog.xes_jvm import (
    FUNCTION,
    NOT_OF_THE_SHAPE,
    jvm_rows,
    needs_python_reader,
)
from sparkfield.process.eventlog.xes_split import read_xes
from tests.conftest import ROOT, job_module
from tests.process.test_iso_instants import EDGES, _fuzz
from tests.process.test_xes_fast import BROKEN, COMMON, CUT, OTHER, _random_record
from tests.process.test_xes_split import FIXTURES, _rows, count, split_every

SLOTS = ("concept:name", "time:timestamp", "org:resource", "lifecycle:transition")


def _plan(df) -> str:
    return df._jdf.queryExecution().toString()


def _python(record: str) -> list | None:
    """The Python reader's answer for one record, shaped as the Java function's."""
    read = trace_events(without_log_end(record))
    if read is None:
        return None
    case, events = read
    rows = []
    for event in events:
        slots = [event.pop(k, None) for k in SLOTS]
        rows.append([*slots, list(event.items()) or None])
    return [case, rows]


def _jvm(spark, records: list[str]) -> list[list | None]:
    df = spark.createDataFrame([(i, r) for i, r in enumerate(records)],
                               "i long, record string")
    t = F.call_function(FUNCTION, F.col("record"))
    # the attributes as their entries: the map's order (the order keys first appear) is kept
    events = F.transform(t["events"], lambda e: F.struct(
        e["activity"], e["time"], e["resource"], e["lifecycle"],
        F.map_entries(e["attributes"]).alias("entries")))
    got = df.select("i", F.when(t.isNotNull(), F.struct(t["case"].alias("case"),
                                                         events.alias("events"))).alias("t"))
    out = []
    for row in got.orderBy("i").collect():
        t = row["t"]
        out.append(None if t is None else [t["case"], [
            [*e[:4], [tuple(kv) for kv in e["entries"]] if e["entries"] else None]
            for e in t["events"]]])
    return out


@pytest.fixture(scope="module")
def registered(spark):
    text = spark.read.text(str(FIXTURES / "running-example.xes"))
    assert jvm_rows(spark, text, None) is not None, "the session cannot load the library's jar"


def test_every_record_the_python_reader_reads_is_read_alike_and_no_other(spark, registered):
    rng = random.Random(11)
    records = [*COMMON.values(), *CUT.values(), *OTHER.values(), *BROKEN.values(),
               *(_random_record(rng) for _ in range(3000))]
    records += [r + "</log>\n" for r in list(COMMON.values())[:3]]
    records += [r + "</x:log>" for r in list(COMMON.values())[:2]]  # left to lxml
    want = [_python(r) for r in records]
    assert sum(w is not None for w in want) > 1000 and sum(w is None for w in want) > 100
    got = _jvm(spark, records)
    for record, g, w in zip(records, got, want, strict=True):
        assert g == w, repr(record)


def test_values_the_shape_forbids_get_no_answer(spark, registered):
    forbidden = ["\x00", "\x1f", "\t", "\r", "\n", "<", "&", '"', "\ufffe", "\uffff"]
    records = [f'><string key="concept:name" value="c{c}"/></trace>' for c in forbidden]
    assert _jvm(spark, records) == [None] * len(records)
    allowed = ["\x7f", "\ufffd", "\U0001d11e", ">", "'"]
    records = [f'><string key="concept:name" value="c{c}"/></trace>' for c in allowed]
    assert _jvm(spark, records) == [[f"c{c}", []] for c in allowed]


def test_instants_are_the_python_readers(spark, registered):
    times = [*EDGES, *_fuzz(3000), None]
    record = "><string key=\"concept:name\" value=\"c\"/>" + "".join(
        f'<event><date key="time:timestamp" value="{t}"/></event>' if t is not None
        else "<event></event>" for t in times if '"' not in (t or "")) + "</trace>"
    kept = [t for t in times if '"' not in (t or "")]
    df = spark.createDataFrame([(record,)], "record string")
    events = df.select(F.inline(F.call_function(FUNCTION, F.col("record"))["events"]))
    got = [r["instant"] for r in events.select(
        F.col("time"), F.col("instant")).collect()]
    want = iso_instants(pa.array(kept, pa.string())).cast(pa.int64()).to_pylist()
    assert got == want
    assert sum(v is not None for v in got) > 150 and sum(v is None for v in got) > 1000
    assert got[list(EDGES).index("2011-10-01T00:38:44.546+02:00")] == 1317422324546000


@pytest.mark.classic  # read_xes reads the file's head through Hadoop's classes
def test_a_log_read_in_the_jvm_equals_the_driver_reader(spark, registered):
    path = FIXTURES / "running-example.xes"
    want = _rows(read_xes_on_driver(spark, str(path)))
    with split_every(spark, "2k"):
        df = read_xes(spark, str(path), jvm=True, instants=True)
        assert FUNCTION in _plan(df)  # read in the JVM, traces across the ranges' ends
        got = _rows(df)
        python = _rows(read_xes(spark, str(path), instants=True))
    assert len(got) == 42
    assert got.drop(columns=["row_order"]).equals(python.drop(columns=["row_order"]))
    assert got.drop(columns=["row_order", "timestamp_instant"]).equals(
        want.drop(columns="row_order"))
    assert got["timestamp_instant"].notna().all()


def _log_with_entity_late(tmp_path, traces: int = 60):
    """A log whose traces are of the common shape but one late one, with an entity."""
    lines = ['<?xml version="1.0" encoding="UTF-8"?>', '<log xes.version="1.0">']
    for t in range(traces):
        name = "a &amp; b" if t == traces - 3 else f"A{t % 4}"
        lines += ["<trace>", f'  <string key="concept:name" value="c{t}"/>', "  <event>",
                  f'    <string key="concept:name" value="{name}"/>',
                  f'    <date key="time:timestamp" value="2020-01-01T00:00:{t % 60:02d}Z"/>',
                  "  </event>", "</trace>"]
    lines.append("</log>")
    path = tmp_path / "entity.xes"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.classic  # read_xes reads the file's head through Hadoop's classes
def test_a_later_trace_of_another_shape_asks_for_the_python_reader(spark, registered,
                                                                      tmp_path):
    path = _log_with_entity_late(tmp_path)
    df = read_xes(spark, str(path), jvm=True)
    assert FUNCTION in _plan(df)  # the first traces passed
    with pytest.raises(Exception) as caught:
        count(df)
    assert needs_python_reader(caught.value), str(caught.value)[-2000:]
    assert NOT_OF_THE_SHAPE in str(caught.value)
    assert not needs_python_reader(ValueError("another error"))


@pytest.mark.classic  # a job builds its own session
def test_the_job_reads_such_a_log_with_the_python_reader(spark, tmp_path, capsys):
    path = _log_with_entity_late(tmp_path)
    out = tmp_path / "out"
    code = job_module("process_mining").main([
        "--conf-dir", str(ROOT / "conf"), "--log", str(path), "--output", str(out)])
    assert code == 0, capsys.readouterr().err[-3000:]
    events = spark.read.parquet(str(out / "events"))
    assert events.where(F.col("activity") == "a & b").count() == 1
    assert events.count() == 60
    report = json.loads((out / "run_report.json").read_text())
    assert any("read by the Python reader" in n for n in report["notes"])


@pytest.mark.classic  # read_xes reads the file's head through Hadoop's classes
def test_a_log_of_another_shape_from_the_start_is_never_read_in_the_jvm(spark, tmp_path):
    path = _log_with_entity_late(tmp_path, traces=5)  # the entity in the first traces
    df = read_xes(spark, str(path), jvm=True)
    assert FUNCTION not in _plan(df)
    assert count(df) == 5


@pytest.mark.classic  # read_xes reads the file's head through Hadoop's classes
def test_the_rows_have_the_python_readers_schema(spark, registered):
    path = FIXTURES / "running-example.xes"
    jvm = read_xes(spark, str(path), jvm=True, instants=True).schema
    python = read_xes(spark, str(path), instants=True).schema
    assert [(f.name, f.dataType) for f in jvm] == [(f.name, f.dataType) for f in python]
    assert jvm["row_order"].dataType == T.LongType()
