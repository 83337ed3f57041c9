"""Events dated ``0001-01-01`` (an ERP's empty date) through process_mining's entry point:
kept and reported as suspicious, or rejected with a reason when bounds are set, and written
back out in both exports; never a traceback."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from sparkfield.process.eventlog.xes import read_xes_on_driver
from tests.conftest import ROOT, job_module

CSV = ("case:concept:name,concept:name,time:timestamp\n"
       "1,create,0001-01-01\n1,ship,2020-01-02\n2,create,2020-01-01\n2,ship,2020-01-03\n")
XES = ('<?xml version="1.0" encoding="UTF-8"?>\n<log xmlns="http://www.xes-standard.org/">\n'
       + "".join(f'<trace><string key="concept:name" value="{c}"/>'
                 + "".join(f'<event><string key="concept:name" value="{a}"/>'
                           f'<date key="time:timestamp" value="{t}"/></event>' for a, t in ev)
                 + "</trace>\n"
                 for c, ev in (("1", (("create", "0001-01-01T00:00:00.000+00:00"),
                                      ("ship", "2020-01-02T00:00:00.000+00:00"))),
                               ("2", (("create", "2020-01-01T00:00:00.000+00:00"),
                                      ("ship", "2020-01-03T00:00:00.000+00:00")))))
       + "</log>\n")


def _mine(capsys, log: Path, out: Path, conf: Path = ROOT / "conf") -> tuple[int, str, dict]:
    code = job_module("process_mining").main(["--conf-dir", str(conf), "--log", str(log),
                                              "--output", str(out), "--exports", "both"])
    err = capsys.readouterr().err
    report = json.loads((out / "run_report.json").read_text()) if code == 0 else {}
    return code, err, report


@pytest.mark.parametrize("name,text", [("erp.csv", CSV), ("erp.xes", XES)])
def test_year_one_is_kept_reported_and_exported(spark, tmp_path, capsys, name, text):
    log = tmp_path / name
    log.write_text(text)
    out = tmp_path / "out"
    code, err, report = _mine(capsys, log, out)
    assert code == 0, err[-3000:]
    assert "Traceback" not in err
    assert report["outputs"]["events"] == 4 and report["total_rejects"] == 0
    odd = report["counts"]["suspicious_timestamps"]
    assert odd["events"] == 1 and odd["cases"] == 1
    assert odd["first"] == odd["last"] == "0001-01-01T00:00:00Z"
    assert odd["examples"] == [{"case_id": "1", "activity": "create",
                                "timestamp": "0001-01-01T00:00:00Z"}]
    assert any("0001-01-01" in n for n in report["notes"])
    cases = (out / "cases.csv").read_text()
    assert "1,0001-01-01T00:00:00.000Z,2020-01-02T00:00:00.000Z" in cases
    # both exports keep the date, and read back as they were written
    csv = gzip.decompress((out / "event_log.csv.gz").read_bytes()).decode()
    assert "1,create,0001-01-01T00:00:00.000Z," in csv
    xes = gzip.decompress((out / "event_log.xes.gz").read_bytes()).decode()
    assert 'value="0001-01-01T00:00:00.000Z"' in xes
    back = read_xes_on_driver(spark, str(out / "event_log.xes.gz")).toPandas()
    assert sorted(back["timestamp_raw"])[0] == "0001-01-01T00:00:00.000Z"


def test_year_one_out_of_bounds_is_a_counted_reject(spark, tmp_path, capsys):
    conf = tmp_path / "conf"
    shutil.copytree(ROOT / "conf", conf)
    job = conf / "jobs" / "process_mining.yaml"
    text = job.read_text()
    assert "min_timestamp: null" in text
    job.write_text(text.replace("min_timestamp: null", 'min_timestamp: "1900-01-01"'))
    log = tmp_path / "erp.csv"
    log.write_text(CSV)
    code, err, report = _mine(capsys, log, tmp_path / "out", conf)
    assert code == 0, err[-3000:]
    assert report["rejects"] == {"log": {"timestamp out of range": 1}}
    assert report["outputs"]["events"] == 3
    assert report["counts"]["suspicious_timestamps"] == {"events": 0}


def test_year_one_east_of_utc_is_kept_and_reported(spark, tmp_path, capsys):
    """0001-01-01 at +01:00 is the last hour of year 0 in UTC: still no traceback."""
    log = tmp_path / "east.csv"
    log.write_text(CSV.replace("0001-01-01", "0001-01-01T00:30:00+01:00"))
    code, err, report = _mine(capsys, log, tmp_path / "out")
    assert code == 0, err[-3000:]
    assert report["counts"]["suspicious_timestamps"]["first"] == "0000-12-31T23:30:00Z"
