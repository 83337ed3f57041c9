"""process_mining writes the statistics of its (filtered) log: CSV tables equal to pm4py's
statistics of the same log, and their charts; ``--no-statistics`` writes none."""

from __future__ import annotations

import json
import warnings

import pandas as pd

from sparkfield.core.conf import load_config
from sparkfield.process import run_process_mining
from tests.conftest import ROOT
from tests.process import pm4py_oracle


def _run(spark, log, out, **job):
    cfg = load_config("process_mining", "local", ROOT / "conf", {"job": {
        "log": str(log), "output": str(out), **job}})
    return run_process_mining(spark, cfg)


def test_the_statistics_of_the_log_are_written_and_equal_pm4pys(spark, fixtures_dir,
                                                                tmp_path):
    import pm4py

    log = fixtures_dir / "process" / "running-example.xes"
    out = tmp_path / "out"
    _run(spark, log, out, statistics_period="week")
    folder = out / "statistics"
    want = pm4py_oracle.load(log)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        acts = pm4py.get_event_attribute_values(want, "concept:name")
        res = pm4py.get_event_attribute_values(want, "org:resource")
        durations = sorted(pm4py.get_all_case_durations(want))

    got = pd.read_csv(folder / "activities.csv")
    assert dict(zip(got["activity"], got["events"], strict=True)) == acts
    got = pd.read_csv(folder / "resources.csv")
    assert dict(zip(got["resource"], got["events"], strict=True)) == res
    over_time = pd.read_csv(folder / "events_over_time.csv")
    assert over_time["events"].sum() == 42 and len(over_time) >= 2  # weeks
    summary = pd.read_csv(folder / "case_duration_summary.csv").iloc[0]
    assert summary["cases"] == 6 and summary["max_s"] == durations[-1]
    hist = pd.read_csv(folder / "case_duration_histogram.csv")
    assert hist["cases"].sum() == 6 and len(hist) == 20
    handover = pd.read_csv(folder / "handover_of_work.csv")
    assert handover["handovers"].sum() == 42 - 6  # every direct succession of a case
    for name in ("over_time", "case_durations", "activities", "resources",
                 "resource_activity"):
        assert (folder / f"{name}.png").read_bytes()[:4] == b"\x89PNG", name
    rep = json.loads((out / "run_report.json").read_text())
    assert {"statistics", "write_statistics"} <= {s["step"] for s in rep["steps"]}


def test_statistics_follow_the_filters_and_can_be_turned_off(spark, fixtures_dir, tmp_path):
    log = fixtures_dir / "process" / "running-example.xes"
    _run(spark, log, tmp_path / "a", filters=[{"name": "filter_variants_top_k", "k": 1}])
    acts = pd.read_csv(tmp_path / "a" / "statistics" / "activities.csv")
    rep = json.loads((tmp_path / "a" / "run_report.json").read_text())
    assert acts["events"].sum() == rep["outputs"]["events"] < 42
    _run(spark, log, tmp_path / "b", statistics=False)
    assert not (tmp_path / "b" / "statistics").exists()


def test_implausible_dates_and_too_many_periods_are_left_out_with_a_note(spark, tmp_path):
    log = tmp_path / "log.csv"
    log.write_text("case:concept:name,concept:name,time:timestamp\n"
                   "1,create,0001-01-01T00:00:00Z\n1,ship,2020-01-02T00:00:00Z\n"
                   "2,create,1971-01-01T00:00:00Z\n2,ship,2020-01-03T00:00:00Z\n")
    res = _run(spark, log, tmp_path / "day")
    over = pd.read_csv(tmp_path / "day" / "statistics" / "events_over_time.csv")
    assert over["events"].sum() == 3  # the year-one event is not spread over 2,000 years
    assert any("1 event(s) dated outside" in n for n in res.report.notes)
    res = _run(spark, log, tmp_path / "hour", statistics_period="hour")
    assert pd.read_csv(tmp_path / "hour" / "statistics" / "events_over_time.csv").empty
    assert any("choose a longer statistics_period" in n for n in res.report.notes)
    assert (tmp_path / "hour" / "statistics" / "over_time.png").exists()
