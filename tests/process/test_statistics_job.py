"""process_mining writes the statistics of its (filtered) log: CSV tables equal to pm4py's
statistics of the same log, and their charts; ``--no-statistics`` writes none."""

from __future__ import annotations

import io
import json
import warnings

import pandas as pd

from sparkfield.core.conf import load_config
from sparkfield.process import run_process_mining
from tests.conftest import ROOT
from tests.process import pm4py_oracle
from tests.process.event_frames import SHARED


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


def _job_tables(spark, log, tmp_path):
    """The job's collected views and statistics tables, and the same tables made by the
    DataFrame functions (one pass each over the job's events)."""
    from sparkfield.process.analysis import statistics as st
    from sparkfield.process.eventlog.events import EVENT_ORDER, with_event_order
    from sparkfield.process.eventlog.schema import RESOURCE

    res = _run(spark, log, tmp_path / "out", model=False, conformance=False)
    views = res.extras["views"]
    ordered = with_event_order(res.events)
    keys = {"order_col": EVENT_ORDER, "checked": True}
    want = {
        "dfg": views.dfg.toPandas(), "activities": views.activities.toPandas(),
        "start_activities": views.start_activities.toPandas(),
        "end_activities": views.end_activities.toPandas(),
        "statistics/activities": st.activity_frequencies(ordered, **keys).toPandas(),
        "statistics/resources": st.resource_frequencies(ordered, resource_col=RESOURCE,
                                                        **keys).toPandas(),
        "statistics/resource_activity": st.resource_activity_matrix(
            ordered, resource_col=RESOURCE, **keys).toPandas(),
        "statistics/handover_of_work": st.handover_of_work(ordered, resource_col=RESOURCE,
                                                           **keys).toPandas(),
    }
    got = {name: pd.read_csv(tmp_path / "out" / f"{name}.csv") for name in want}
    return got, want, res


def test_the_one_pass_tables_equal_the_dataframe_functions(spark, shared_data, tmp_path):
    """The job collects its views and resource statistics from one aggregation over the
    per-case sequences: the same rows, in the same order, as the functions that each make
    one table, on a log where many events have no resource."""
    log = shared_data / SHARED / "roadtraffic100traces.xes"
    got, want, res = _job_tables(spark, log, tmp_path)
    for name, frame in want.items():
        expected = pd.read_csv(io.StringIO(frame.to_csv(index=False)))
        pd.testing.assert_frame_equal(got[name], expected, obj=name)
    assert not got["statistics/resource_activity"].empty
    assert got["statistics/resources"]["events"].sum() < res.report.outputs["events"]


def test_equal_times_and_null_resources_in_the_one_pass_tables(spark, tmp_path):
    """Ties on the timestamp keep the file's order (handover and arcs follow it), a null
    resource breaks a handover without being bridged, and counts once per case."""
    log = tmp_path / "ties.csv"
    log.write_text("case:concept:name,concept:name,time:timestamp,org:resource\n"
                   "1,a,2020-01-01T00:00:00Z,ann\n1,b,2020-01-01T00:00:00Z,bob\n"
                   "1,c,2020-01-01T00:00:00Z,\n1,a,2020-01-02T00:00:00Z,ann\n"
                   "1,b,2020-01-03T00:00:00Z,ann\n"
                   "2,b,2020-01-01T00:00:00Z,bob\n2,a,2020-01-01T00:00:00Z,ann\n"
                   "3,c,2020-01-05T00:00:00Z,\n")
    got, want, _ = _job_tables(spark, log, tmp_path)
    for name, frame in want.items():
        expected = pd.read_csv(io.StringIO(frame.to_csv(index=False)))
        pd.testing.assert_frame_equal(got[name], expected, obj=name)
    hand = got["statistics/handover_of_work"]
    pairs = dict(zip(zip(hand["source_resource"], hand["target_resource"], strict=True),
                     hand["handovers"], strict=True))
    assert pairs == {("ann", "bob"): 1, ("ann", "ann"): 1, ("bob", "ann"): 1}
    acts = got["statistics/activities"].set_index("activity")
    assert acts.loc["a", "events"] == 3 and acts.loc["a", "cases"] == 2
    res = got["statistics/resources"].set_index("resource")
    assert res.loc["ann", "cases"] == 2 and res.loc["ann", "events"] == 4
    dfg = got["dfg"]
    assert list(zip(dfg["source"], dfg["target"], strict=True))[:1] == [("a", "b")]
