"""The executors' XES reader against the driver's: the same rows in the same order on every
reference log, split into many byte ranges; errors still name the line."""

from __future__ import annotations

import gzip
import json
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest

from sparkfield.core.failures import raises_input_errors
from sparkfield.process.eventlog.xes import XesError, read_xes_on_driver
from sparkfield.process.eventlog.xes_split import XesRangeError, needs_one_range, read_xes
from tests.conftest import ROOT, job_module

FIXTURES = ROOT / "tests" / "fixtures" / "process"


@contextmanager
def split_every(spark, size: str):
    """Byte ranges of ``size``: small files read by several tasks."""
    key = "spark.sql.files.maxPartitionBytes"
    old = spark.conf.get(key)
    spark.conf.set(key, size)
    try:
        yield
    finally:
        spark.conf.set(key, old)


@raises_input_errors
def count(df) -> int:
    """An action, with an executor's input error raised as itself on the driver."""
    return df.count()


def _rows(df) -> pd.DataFrame:
    pdf = df.toPandas().sort_values("row_order").reset_index(drop=True)
    assert pdf["row_order"].is_unique
    pdf["attributes"] = pdf["attributes"].map(
        lambda m: sorted(m.items()) if m is not None else None)
    return pdf


def assert_same_as_driver(spark, path: Path, jvm: bool = False) -> int:
    """The executors' rows equal the driver reader's; ``jvm``: those parsed in the JVM too."""
    want = _rows(read_xes_on_driver(spark, str(path)))
    # file order: the driver numbers events 0, 1, 2...; the split reader's numbers increase
    assert want["row_order"].tolist() == list(range(len(want)))
    for in_jvm in {False, jvm}:
        got = _rows(read_xes(spark, str(path), partitions=3, jvm=in_jvm))
        pd.testing.assert_frame_equal(got.drop(columns="row_order"),
                                      want.drop(columns="row_order"))
    return len(want)


def test_plain_file_read_in_many_ranges_equals_the_driver_reader(spark):
    path = FIXTURES / "running-example.xes"
    with split_every(spark, "2k"):
        scan = spark.read.option("lineSep", "<trace").text(str(path))
        assert scan.rdd.getNumPartitions() >= 6  # traces cross range ends
        assert assert_same_as_driver(spark, path) == 42


def test_gzip_file_dealt_to_every_executor_equals_the_driver_reader(spark):
    path = FIXTURES / "roadtraffic_1t_per_variant.xes.gz"
    assert read_xes(spark, str(path), partitions=3).rdd.getNumPartitions() == 3
    assert assert_same_as_driver(spark, path) == 1891


@pytest.mark.slow
def test_every_reference_log_equals_the_driver_reader(spark, shared_data, tmp_path):
    folder = shared_data / "process_mining/event_logs/pm4py"
    logs = sorted(p for p in folder.iterdir() if p.name.endswith((".xes", ".xes.gz")))
    assert len(logs) >= 9
    with split_every(spark, "1m"):
        for log in logs:
            assert assert_same_as_driver(spark, log, jvm=True) > 0, log.name
        # the largest log uncompressed: a plain file in many ranges, parsed in Python workers
        # and in the JVM
        plain = tmp_path / "bpic2012.xes"
        plain.write_bytes(gzip.decompress((folder / "bpic2012.xes.gz").read_bytes()))
        assert assert_same_as_driver(spark, plain, jvm=True) == 262200


def _bad_trace_log(tmp_path: Path, traces: int = 40) -> tuple[Path, int]:
    """A log whose last trace has an unclosed attribute; returns it and that line."""
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             '<log xes.version="1.0" xmlns="http://www.xes-standard.org/">']
    for t in range(traces):
        lines += ["<trace>", f'  <string key="concept:name" value="c{t}"/>', "  <event>",
                  '    <string key="concept:name" value="a">' if t == traces - 1 else
                  '    <string key="concept:name" value="a"/>',
                  '    <date key="time:timestamp" value="2020-01-01T00:00:00+00:00"/>',
                  "  </event>", "</trace>"]
    lines.append("</log>")
    path = tmp_path / "bad.xes"
    path.write_text("\n".join(lines) + "\n")
    return path, 2 + 7 * (traces - 1) + 6  # the </event> that closes the open <string>


def test_malformed_trace_names_the_file_line(spark, tmp_path):
    path, line = _bad_trace_log(tmp_path)
    with pytest.raises(XesError, match=f"bad.xes: line {line}: malformed XML") as driver:
        read_xes_on_driver(spark, str(path))
    with pytest.raises(XesError, match=f"bad.xes: line {line}: malformed XML") as split:
        count(read_xes(spark, str(path)))
    # lxml's own text names lines too ("tag mismatch: string line N and event, line M")
    assert str(split.value) == str(driver.value)


def test_malformed_trace_in_a_later_range_names_the_range(spark, tmp_path):
    path, _ = _bad_trace_log(tmp_path)
    with split_every(spark, "1k"), pytest.raises(
            XesError, match=r"bad.xes \(from byte \d+\): line \d+: malformed XML"):
        count(read_xes(spark, str(path)))


def test_a_plain_log_cut_between_traces_is_refused(spark, tmp_path):
    text = (FIXTURES / "running-example.xes").read_text()
    cut = tmp_path / "cut.xes"
    cut.write_text(text[: text.rindex("</trace>") + len("</trace>")])
    with pytest.raises(XesError, match="does not end with </log>"):
        read_xes(spark, str(cut))


def test_an_event_outside_a_trace_is_named(spark, tmp_path):
    text = (FIXTURES / "running-example.xes").read_text()
    i = text.rindex("</trace>") + len("</trace>")
    bad = tmp_path / "stray.xes"
    bad.write_text(text[:i] + '\n<event><string key="concept:name" value="x"/></event>\n'
                   + text[i:])
    with pytest.raises(XesError, match="<event> outside <trace>"):
        count(read_xes(spark, str(bad)))


# --- "<trace" inside comments, CDATA sections and processing instructions ----------------------

_HEAD = ('<?xml version="1.0" encoding="UTF-8"?>\n<!-- written by hand -->\n'
         '<log xes.version="1.0" xmlns="http://www.xes-standard.org/">\n'
         '<string key="concept:name" value="log"/>\n')


def _trace(n: int, inside: str = "", note: str = "") -> str:
    """A trace of three events; ``inside`` goes between its first two events, ``note``
    inside its second event."""
    events = [f'  <event>\n    <string key="concept:name" value="a{k}"/>\n{note if k == 1 else ""}'
              f'    <date key="time:timestamp" value="2020-01-01T00:00:{n % 60:02d}+00:00"/>\n'
              "  </event>\n" for k in range(3)]
    return (f'<trace>\n  <string key="concept:name" value="c{n}"/>\n{events[0]}{inside}'
            f"{events[1]}{events[2]}</trace>\n")


def _markup_log(tmp_path: Path, name: str, traces: int = 24) -> Path:
    """Valid XES with ``<trace`` in comments, CDATA sections and a processing instruction:
    a commented-out trace first, a comment holding ``</trace><trace>`` inside a trace, CDATA
    holding ``<trace`` in attribute elements and between traces, a comment holding four
    traces, and one after the last trace."""
    body = ["<!--\n" + _trace(900) + "-->\n"]  # commented out, right after the header
    for n in range(traces):
        if n == 3:
            body.append(_trace(n, inside="  <!-- </trace><trace> -->\n"))
        elif n == 5:
            body.append(_trace(n, note='    <string key="note" value="x"><![CDATA[</trace>'
                                       '<trace key="y">]]></string>\n'))
        elif n == 8:
            body.append("<!-- old cases:\n" + "".join(_trace(800 + k) for k in range(4))
                        + "-->\n" + _trace(n))
        elif n == 12:
            body.append('<?sparkfield <trace> is not here ?>\n' + _trace(n))
        elif n == 16:
            body.append("<![CDATA[ <trace> ]]>\n" + _trace(n, inside=(
                '  <string key="cdata" value="v"><![CDATA[\n<trace>\n<trace>\n]]></string>\n')))
        else:
            body.append(_trace(n))
    path = tmp_path / name
    path.write_text(_HEAD + "".join(body) + "<!-- <trace> -->\n</log>\n")
    return path


def _rows_like_the_job(spark, path: Path) -> pd.DataFrame:
    """read_xes, and read as one range when it says a region crosses a range's end."""
    try:
        return _rows(read_xes(spark, str(path), partitions=3))
    except Exception as exc:
        if not needs_one_range(exc):
            raise
    return _rows(read_xes(spark, str(path), partitions=3, one_range=True))


def test_markup_holding_trace_in_one_range_equals_the_driver_reader(spark, tmp_path):
    path = _markup_log(tmp_path, "markup.xes")
    want = _rows(read_xes_on_driver(spark, str(path)))
    assert sorted(set(want["case_id"])) == sorted(f"c{n}" for n in range(24))
    assert len(want) == 72
    got = _rows(read_xes(spark, str(path), partitions=3))  # one range: the file is small
    pd.testing.assert_frame_equal(got.drop(columns="row_order"),
                                  want.drop(columns="row_order"))


@pytest.mark.parametrize("size", ["200", "700", "2k"])
def test_markup_holding_trace_across_ranges_equals_the_driver_reader(spark, tmp_path, size):
    path = _markup_log(tmp_path, "markup.xes")
    want = _rows(read_xes_on_driver(spark, str(path))).drop(columns="row_order")
    with split_every(spark, size):
        assert spark.read.text(str(path)).rdd.getNumPartitions() >= 4
        with pytest.raises(Exception) as crossed:
            count(read_xes(spark, str(path)))
        # the range holding the region's start says so, or a later one fails on its text
        assert isinstance(crossed.value, XesRangeError)  # one clear line at worst
        assert needs_one_range(crossed.value)
        one = _rows(read_xes(spark, str(path), partitions=3, one_range=True))
        pd.testing.assert_frame_equal(one.drop(columns="row_order"), want)
        pd.testing.assert_frame_equal(_rows_like_the_job(spark, path).drop(
            columns="row_order"), want)


def test_gzip_log_with_markup_holding_trace_equals_the_driver_reader(spark, tmp_path):
    plain = _markup_log(tmp_path, "markup.xes")
    packed = tmp_path / "markup.xes.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert assert_same_as_driver(spark, packed) == 72


def test_a_commented_out_first_trace_is_no_case(spark, tmp_path):
    path = tmp_path / "first.xes"
    path.write_text(_HEAD + "<!-- " + _trace(1) + " -->\n" + _trace(2) + "</log>\n")
    assert assert_same_as_driver(spark, path) == 3
    assert set(read_xes(spark, str(path)).toPandas()["case_id"]) == {"c2"}
    prolog = tmp_path / "prolog.xes"  # before <log>: the cut is in the prolog
    prolog.write_text(_HEAD.replace("written by hand", _trace(0)) + _trace(2) + "</log>\n")
    assert assert_same_as_driver(spark, prolog) == 3


def test_an_error_in_a_later_range_asks_for_one_range(spark, tmp_path):
    path, line = _bad_trace_log(tmp_path)
    with split_every(spark, "1k"), pytest.raises(XesRangeError) as split:
        count(read_xes(spark, str(path)))
    assert needs_one_range(split.value)
    with split_every(spark, "1k"), pytest.raises(
            XesError, match=f"bad.xes: line {line}: malformed XML") as whole:
        count(read_xes(spark, str(path), one_range=True))
    assert not needs_one_range(whole.value)


def test_an_unclosed_comment_is_malformed_in_one_range(spark, tmp_path):
    path = tmp_path / "open.xes"
    path.write_text(_HEAD + _trace(1) + "<!-- " + _trace(2) + "</log>\n")
    with pytest.raises(XesError):
        read_xes_on_driver(spark, str(path))
    with pytest.raises(XesError, match=r"open.xes: line \d+: malformed XML"):
        count(read_xes(spark, str(path), one_range=True))


def test_a_plain_log_with_markup_across_ranges_is_read_by_the_job(spark, tmp_path, capsys):
    path = _markup_log(tmp_path, "markup.xes")
    want = _rows(read_xes_on_driver(spark, str(path)))
    out = tmp_path / "out"
    with split_every(spark, "700"):
        code = job_module("process_mining").main([
            "--conf-dir", str(ROOT / "conf"), "--log", str(path), "--output", str(out)])
    assert code == 0, capsys.readouterr().err[-3000:]
    events = spark.read.parquet(str(out / "events")).toPandas()
    assert sorted(zip(events["case_id"], events["activity"], strict=True)) == \
        sorted(zip(want["case_id"], want["activity"], strict=True))
    report = json.loads((out / "run_report.json").read_text())
    assert report["outputs"]["events"] == 72 and report["total_rejects"] == 0
    assert any("read as one range" in n for n in report["notes"])


def test_a_gzip_log_cut_between_traces_is_refused(spark, tmp_path):
    """Spark reads a gzip file as one range, so its end is checked as the range ends."""
    text = (FIXTURES / "running-example.xes").read_text()
    cut = tmp_path / "cut.xes.gz"
    cut.write_bytes(gzip.compress(text[: text.rindex("</trace>") + len("</trace>")].encode()))
    with pytest.raises(XesError, match="does not end with </log>"):
        count(read_xes(spark, str(cut)))
    whole = tmp_path / "whole.xes.gz"
    whole.write_bytes(gzip.compress(text.encode()))
    assert count(read_xes(spark, str(whole))) == count(read_xes_on_driver(spark, str(whole)))


def test_an_event_before_the_first_trace_is_named(spark, tmp_path):
    text = (FIXTURES / "running-example.xes").read_text()
    i = text.index("<trace")
    stray = '<event><string key="concept:name" value="x"/></event>\n'
    bad = tmp_path / "early.xes"
    bad.write_text(text[:i] + stray + text[i:])
    with pytest.raises(XesError, match="<event> outside <trace>"):
        count(read_xes(spark, str(bad)))
    # the same text in a comment is no event
    fine = tmp_path / "commented.xes"
    fine.write_text(text[:i] + "<!-- " + stray + " -->\n" + text[i:])
    assert count(read_xes(spark, str(fine))) == count(read_xes_on_driver(spark, str(fine)))
