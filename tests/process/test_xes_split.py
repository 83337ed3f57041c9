"""The executors' XES reader against the driver's: the same rows in the same order on every
reference log, split into many byte ranges; errors still name the line."""

from __future__ import annotations

import gzip
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest

from sparkfield.core.errors import raises_input_errors
from sparkfield.process.xes import XesError, read_xes_on_driver
from sparkfield.process.xes_split import read_xes

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "process"


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


def assert_same_as_driver(spark, path: Path) -> int:
    want = _rows(read_xes_on_driver(spark, str(path)))
    got_df = read_xes(spark, str(path), partitions=3)
    got = _rows(got_df)
    # file order: the driver numbers events 0, 1, 2...; the split reader's numbers increase
    assert want["row_order"].tolist() == list(range(len(want)))
    pd.testing.assert_frame_equal(got.drop(columns="row_order"),
                                  want.drop(columns="row_order"))
    return len(got)


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
            assert assert_same_as_driver(spark, log) > 0, log.name
        # the largest log uncompressed: a plain file in many ranges
        plain = tmp_path / "bpic2012.xes"
        plain.write_bytes(gzip.decompress((folder / "bpic2012.xes.gz").read_bytes()))
        assert assert_same_as_driver(spark, plain) == 262200


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
