"""Bad input, hostile outputs and stale locks through the jobs' own entry points (in-process,
on the test session): exit 2 with one ``error:`` line, nothing replaced, nothing lost."""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sparkfield.core.batch import LockHeld, OutputLock, process_start
from sparkfield.core.errors import InputError
from sparkfield.core.io import AtomicOutput
from sparkfield.core.report import RunReport

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / "tests" / "fixtures" / "process"  # small pm4py logs (ATTRIBUTION.md)
STATIONS = "station,longitude,latitude\nWaterfront,-123.1117,49.2856\n"


def job_main(job: str):
    spec = importlib.util.spec_from_file_location(f"job_{job}_main", ROOT / "jobs" / f"{job}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


def _run(job: str, capsys, *argv: str) -> tuple[int, str]:
    if "--conf-dir" not in argv:
        argv = ("--conf-dir", str(ROOT / "conf"), *argv)
    code = job_main(job)(list(argv))
    err = capsys.readouterr().err
    return code, err


def _error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1, err[-3000:]
    return lines[0]


# --- outputs: only an earlier output of the job is ever replaced --------------------------

@pytest.mark.parametrize("kind", ["user_dir", "file", "under_file", "proc", "cwd"])
def test_output_that_is_not_ours_is_refused_untouched(tmp_path, capsys, monkeypatch, kind):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    (tmp_path / "notes.txt").write_text("a file")
    monkeypatch.chdir(mine)
    target = {"user_dir": str(mine), "file": str(tmp_path / "notes.txt"),
              "under_file": str(tmp_path / "notes.txt" / "out"), "proc": "/proc/sparkfield",
              "cwd": "."}[kind]
    code, err = _run("coffee_shops", capsys, "--output", target)
    assert code == 2
    assert "--output" in _error_line(err)
    assert (mine / "thesis.tex").read_text() == "years of work"
    assert (tmp_path / "notes.txt").read_text() == "a file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine", "notes.txt"]


def test_atomic_output_replaces_only_an_earlier_job_output(spark, tmp_path):
    final = tmp_path / "out"
    final.mkdir()
    (final / "data.csv").write_text("a,b\n")
    with pytest.raises(InputError, match="not a Sparkfield output"):
        AtomicOutput(spark, str(final))
    assert (final / "data.csv").exists()
    (final / "run_report.json").write_text(json.dumps({"job": "event_log"}))
    with pytest.raises(InputError, match="not a coffee_shops output"):
        AtomicOutput(spark, str(final), "coffee_shops")
    with AtomicOutput(spark, str(final), "event_log") as out:
        out.write_text("run_report.json", json.dumps({"job": "event_log"}))
    assert sorted(p.name for p in final.iterdir()) == ["_SUCCESS", "run_report.json"]


# --- locks -----------------------------------------------------------------------------------

def test_empty_or_garbage_lock_is_taken_over(tmp_path):
    out = str(tmp_path / "o")
    for junk in ("", "{not json"):
        Path(out + ".lock").write_text(junk)
        with OutputLock(out, "j") as lock:
            assert lock.held
            held = json.loads(Path(out + ".lock").read_text())
            assert held["pid"] == os.getpid() and held["start"] == process_start(os.getpid())
        assert not Path(out + ".lock").exists()


def test_lock_of_a_reused_pid_is_taken_over_and_a_live_one_is_named(tmp_path):
    out = str(tmp_path / "o")
    host = socket.gethostname()
    # our own pid, alive, but recorded with another start time: an unrelated process now
    Path(out + ".lock").write_text(json.dumps({"host": host, "pid": os.getpid(),
                                               "start": "1"}))
    with OutputLock(out, "j") as lock:
        assert lock.held
        with pytest.raises(LockHeld) as info:
            OutputLock(out, "k").acquire()
    assert f"{out}.lock" in str(info.value) and "remove" in str(info.value)
    assert not list(tmp_path.iterdir())  # no temporary or stale files left


# --- run report status -----------------------------------------------------------------------

def test_status_says_when_rejects_pass_the_limit():
    rep = RunReport("x", inputs={"rows": 10}, rejects={"s": {"bad": 2}})
    rep.finish(0.1)
    assert rep.status == "too_many_rejects"
    rep.finish(0.5)
    assert rep.status == "ok"
    rep.finish(None)
    assert rep.status == "ok"


# --- coffee_shops: empty or broken inputs, huge lattice ---------------------------------------

@pytest.fixture()
def previous_output(tmp_path) -> Path:
    out = tmp_path / "out"
    out.mkdir()
    (out / "run_report.json").write_text(json.dumps({"job": "coffee_shops", "n": 1}))
    (out / "top_locations.csv").write_text("previous\n")
    return out


def _kept(out: Path) -> bool:
    return (out / "top_locations.csv").read_text() == "previous\n" and not list(
        out.parent.glob("*__staging*"))


def test_crimes_with_only_a_header_exit_2_and_keep_the_output(spark, tmp_path, capsys,
                                                              previous_output):
    crimes = tmp_path / "crimes.csv"
    crimes.write_text("TYPE,YEAR,MONTH,DAY,HOUR,MINUTE,HUNDRED_BLOCK,NEIGHBOURHOOD,X,Y\n")
    code, err = _run("coffee_shops", capsys, "--crimes", str(crimes), "--grid-step-m", "50",
                     "--output", str(previous_output))
    assert code == 2 and "no usable crime rows" in _error_line(err)
    assert _kept(previous_output)


def test_stations_with_no_rows_exit_2_without_a_false_note(spark, tmp_path, capsys,
                                                            previous_output):
    stations = tmp_path / "stations.csv"
    stations.write_text("station,longitude,latitude\n")
    code, err = _run("coffee_shops", capsys, "--stations", str(stations), "--grid-step-m",
                     "50", "--output", str(previous_output))
    assert code == 2 and "no usable station" in _error_line(err)
    assert "every station has a competitor" not in err
    assert _kept(previous_output)


def test_a_huge_lattice_is_refused_before_any_work(tmp_path, capsys):
    t0 = time.perf_counter()
    code, err = _run("coffee_shops", capsys, "--grid-step-m", "0.01", "--output",
                     str(tmp_path / "o"))
    line = _error_line(err)
    assert code == 2 and "max_lattice_points" in line and "e+" in line
    assert time.perf_counter() - t0 < 30
    assert not (tmp_path / "o").exists()


def test_truncated_crimes_gz_is_named(spark, tmp_path, capsys, previous_output):
    body = "TYPE,X,Y\n" + "Mischief,491000.5,5458000.5\n" * 50000
    data = gzip.compress(body.encode())
    crimes = tmp_path / "crimes.csv.gz"
    crimes.write_bytes(data[: len(data) // 2])
    code, err = _run("coffee_shops", capsys, "--crimes", str(crimes), "--grid-step-m", "50",
                     "--output", str(previous_output))
    line = _error_line(err)
    assert code == 2 and str(crimes) in line and "truncated" in line, line
    assert "\tat " not in err.split(line)[0]
    assert _kept(previous_output)


@pytest.mark.parametrize("doc,expect", [
    ('{"type": "FeatureCollection", "features": [', "not valid GeoJSON"),
    (json.dumps({"type": "FeatureCollection", "features": [{"type": "Feature", "properties":
        {"name": "A"}, "geometry": {"type": "Polygon", "coordinates": [[[-123.1, 49.28],
        [-123.11, 49.28], [-123.1, 49.29], [-123.1, 49.28]]]}}]}),
     "not a Point geometry (Polygon)"),
])
def test_broken_or_polygon_geojson_stations_exit_2(spark, tmp_path, capsys, doc, expect):
    stations = tmp_path / "stations.geojson"
    stations.write_text(doc)
    code, err = _run("coffee_shops", capsys, "--stations", str(stations), "--grid-step-m",
                     "50", "--output", str(tmp_path / "o"))
    assert code == 2 and expect in _error_line(err)


def test_polygon_features_become_rejects(spark):
    from sparkfield.geo.inputs import StudyArea, _geojson_stations

    doc = {"type": "FeatureCollection", "features": [
        {"type": "Feature", "properties": {"name": "P"},
         "geometry": {"type": "Polygon", "coordinates": [[[-123.1, 49.28]]]}},
        {"type": "Feature", "properties": {"name": "Waterfront"},
         "geometry": {"type": "Point", "coordinates": [-123.1117, 49.2856]}}]}
    got = _geojson_stations(json.dumps(doc), "s.geojson",
                            StudyArea(480000, 5445000, 502000, 5466000))
    assert got.points["name"].tolist() == ["Waterfront"]
    assert got.rejects["reason"].tolist() == ["not a Point geometry (Polygon)"]


# --- process_mining ---------------------------------------------------------------------------

def _mine(spark, log: Path, output: Path | None):
    from sparkfield.core.conf import load_config
    from sparkfield.process import run_process_mining

    cfg = load_config("process_mining", "local", ROOT / "conf", {"job": {
        "log": str(log), "output": str(output) if output else None}})
    return run_process_mining(spark, cfg)


def test_a_log_whose_events_lack_timestamps_is_bad_input(spark, tmp_path):
    log = tmp_path / "log.csv"
    log.write_text("case:concept:name,concept:name,time:timestamp\n1,a,\n1,b,\n2,a,\n")
    out = tmp_path / "o"
    out.mkdir()
    (out / "run_report.json").write_text(json.dumps({"job": "process_mining"}))
    with pytest.raises(InputError, match=r"no usable events .*null timestamp=3"):
        _mine(spark, log, out)
    assert sorted(p.name for p in out.iterdir()) == ["run_report.json"]
    assert not list(tmp_path.glob("*__staging*"))


def test_truncated_xes_gz_is_named(spark, tmp_path):
    data = (LOGS / "roadtraffic_1t_per_variant.xes.gz").read_bytes()
    bad = tmp_path / "roadtraffic.xes.gz"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match=f"{bad}: truncated or corrupt (gzip|compressed) file"):
        _mine(spark, bad, None)


def test_a_folder_of_non_parquet_files_as_log_is_named(spark, tmp_path):
    folder = tmp_path / "logdir"
    folder.mkdir()
    (folder / "a.txt").write_text("hello\n")
    with pytest.raises(InputError, match="not a Parquet event log"):
        _mine(spark, folder, None)


def test_an_unreachable_master_fails_fast(tmp_path, capsys):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    conf = tmp_path / "conf"
    for p in (ROOT / "conf").rglob("*"):
        if p.is_file():
            dest = conf / p.relative_to(ROOT / "conf")
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(p.read_bytes())
    (conf / "local.yaml").write_text(f"spark:\n  master: spark://127.0.0.1:{port}\n")
    t0 = time.perf_counter()
    code, err = _run("coffee_shops", capsys, "--conf-dir", str(conf), "--output",
                     str(tmp_path / "o"))
    assert code == 2 and f"spark://127.0.0.1:{port}" in _error_line(err)
    assert time.perf_counter() - t0 < 20


def test_submit_sends_the_error_line_to_stderr_without_a_java_trace(tmp_path):
    crimes = tmp_path / "crimes.csv.gz"
    data = gzip.compress(("TYPE,X,Y\n" + "Mischief,491000.5,5458000.5\n" * 50000).encode())
    crimes.write_bytes(data[: len(data) // 2])
    res = subprocess.run([str(ROOT / "submit.sh"), "coffee_shops", "--crimes", str(crimes),
                          "--grid-step-m", "50", "--output", str(tmp_path / "o")],
                         cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "SPARKFIELD_PYTHON": sys.executable})
    assert res.returncode == 2, res.stdout[-2000:] + res.stderr[-2000:]
    assert "error: " not in res.stdout
    line = _error_line(res.stderr)
    assert str(crimes) in line
    assert "\tat " not in res.stderr.split(line)[0], res.stderr[-3000:]


def test_mistyped_dates_are_kept_reported_and_views_equal_pm4py(spark, tmp_path, capsys):
    from collections import Counter

    from sparkfield.core.conf import load_config
    from sparkfield.process import run_process_mining

    from .process import pm4py_oracle

    text = (LOGS / "running-example.xes").read_text()
    # two cases' first events typed as 1948 (order within each case unchanged)
    for day in ("2010-12-30T14:32:00", "2011-01-06T09:02:00"):
        assert text.count(day) == 1
        text = text.replace(day, "1948" + day[4:])
    log = tmp_path / "typos.xes"
    log.write_text(text)
    cfg = load_config("process_mining", "local", ROOT / "conf",
                      {"job": {"log": str(log), "output": str(tmp_path / "o")}})
    res = run_process_mining(spark, cfg)
    assert res.rejects == 0 and res.report.outputs["events"] == 42
    odd = res.report.counts["suspicious_timestamps"]
    assert odd["events"] == 2 and odd["cases"] == 2 and odd["first"].startswith("1948-")
    assert len(odd["examples"]) == 2
    saved = json.loads((tmp_path / "o" / "run_report.json").read_text())
    assert saved["counts"]["suspicious_timestamps"]["events"] == 2
    assert any("1948" in n for n in saved["notes"])
    want = pm4py_oracle.figures(pm4py_oracle.load(log))
    assert {(r.source, r.target): int(r.frequency) for r in res.views["dfg"].itertuples()} \
        == want["dfg"]
    assert dict(zip(res.views["start_activities"]["activity"],
                    res.views["start_activities"]["cases"].astype(int), strict=True)) \
        == want["start"]
    views = res.extras["views"]
    assert Counter({tuple(json.loads(r["variant"])): int(r["cases"])
                    for r in views.variants.collect()}) == want["variants"]
    durations = sorted(r["duration_s"] for r in views.cases.select("duration_s").collect())
    assert durations == pytest.approx(want["durations"], abs=1e-3)
    # bounds stay an option: the same log with min_timestamp rejects the two events
    cfg = load_config("process_mining", "local", ROOT / "conf", {"job": {
        "log": str(log), "output": None, "min_timestamp": "1970-01-01"}})
    assert run_process_mining(spark, cfg).rejects == 2


def _mapping(tmp_path, fmt: str | None = None, source: dict | None = None):
    from sparkfield.process.extraction.mapping import parse_mapping

    csv = tmp_path / "orders.csv"
    csv.write_text("order_id,ts\n1,2020-01-01\n")
    act = {"name": "x", "source": "o", "case_id": "order_id", "timestamp": "ts"}
    if fmt:
        act["timestamp_format"] = fmt
    return parse_mapping({"sources": {"o": source or {"format": "csv", "path": str(csv)}},
                          "activities": [act]})


def test_an_invalid_timestamp_format_is_named(spark, tmp_path):
    from sparkfield.process.extraction.extract import extract
    from sparkfield.process.extraction.mapping import MappingError

    with pytest.raises(MappingError, match="invalid timestamp_format 'YYYY-ww'"):
        extract(spark, _mapping(tmp_path, "YYYY-ww"))


def test_jdbc_without_a_driver_or_a_server_is_named(spark, tmp_path, monkeypatch):
    from sparkfield.process.extraction.extract import extract

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    nodriver = {"format": "jdbc", "url": "jdbc:mysql://127.0.0.1:3306/shop", "table": "t"}
    with pytest.raises(InputError, match="JDBC driver com.mysql.cj.jdbc.Driver not found"):
        extract(spark, _mapping(tmp_path, source=nodriver))
    spark.sql("ADD JAR /usr/share/java/postgresql.jar")
    noserver = {"format": "jdbc", "url": f"jdbc:postgresql://127.0.0.1:{port}/shop",
                "table": "t"}
    with pytest.raises(InputError, match="cannot connect"):
        extract(spark, _mapping(tmp_path, source=noserver))
