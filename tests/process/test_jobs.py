"""The event_log and process_mining jobs end to end on real data."""

import gzip
import json

import pandas as pd
import pytest

from sparkfield.core.conf import load_config
from sparkfield.process import run_event_log, run_process_mining
from sparkfield.process.eventlog.xes import XesError

from . import pm4py_oracle

OUTPUTS = ["_SUCCESS", "activities.csv", "cases.csv", "conformance", "dfg.csv",
           "end_activities.csv", "event_log.csv.gz", "event_log.xes.gz", "events", "model",
           "process_map.dot", "process_map.svg", "rejects", "run_report.json",
           "start_activities.csv", "statistics", "variants.csv"]


@pytest.fixture(scope="module")
def olist(spark, repo_root, shared_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("olist") / "out"
    cfg = load_config("event_log", "local", repo_root / "conf", {"job": {
        "mapping": str(repo_root / "conf/event_logs/olist_orders.yaml"), "output": str(out)}})
    with pytest.MonkeyPatch.context() as mp:  # the mapping finds the data through this
        mp.setenv("SPARKFIELD_DATA", str(shared_data))
        return run_event_log(spark, cfg), out


@pytest.mark.slow
def test_olist_extraction_outputs(olist):
    res, out = olist
    assert sorted(p.name for p in out.iterdir()) == OUTPUTS
    rep = json.loads((out / "run_report.json").read_text())
    assert rep["inputs"]["rows"] == rep["outputs"]["events"] + rep["total_rejects"]
    assert rep["counts"]["cases"] == 4000
    placed = rep["counts"]["by_source"]["Order placed"]
    # one order placed in the hour Sao Paulo's clocks showed twice (2018-02-17 23:43:05)
    assert placed == {"rows": 4000, "events": 3999}
    assert rep["rejects"]["Order placed"] == {"ambiguous local time": 1}
    dfg = pd.read_csv(out / "dfg.csv")
    assert list(dfg.columns) == ["source", "target", "frequency", "mean_s", "median_s"]
    cases = pd.read_csv(out / "cases.csv")
    assert len(cases) == 4000 and cases["events"].sum() == rep["outputs"]["events"]
    variants = pd.read_csv(out / "variants.csv")
    assert variants["cases"].sum() == 4000 and abs(variants["share"].sum() - 1) < 1e-9
    svg = (out / "process_map.svg").read_text()
    assert svg.lstrip().startswith(("<?xml", "<svg")) and "Order placed" in svg
    over_time = pd.read_csv(out / "statistics" / "events_over_time.csv")
    assert over_time["events"].sum() == rep["outputs"]["events"]
    acts = pd.read_csv(out / "statistics" / "activities.csv")
    assert acts["events"].sum() == rep["outputs"]["events"]


@pytest.mark.slow
def test_exports_load_in_pm4py_with_the_same_views(olist, tmp_path):
    res, out = olist
    dfg = pd.read_csv(out / "dfg.csv")
    ours = {(r.source, r.target): int(r.frequency) for r in dfg.itertuples()}
    xes_fig = pm4py_oracle.figures(pm4py_oracle.load(out / "event_log.xes.gz"))
    assert xes_fig["dfg"] == ours
    csv = pd.read_csv(out / "event_log.csv.gz")
    assert len(csv) == res.report.outputs["events"]
    csv = csv.rename(columns={"case_id": "case:concept:name", "activity": "concept:name",
                              "timestamp": "time:timestamp"})
    path = tmp_path / "log.csv"
    csv.to_csv(path, index=False)
    assert pm4py_oracle.figures(pm4py_oracle.load(path))["dfg"] == ours


@pytest.mark.slow
def test_classifier_with_lifecycle_matches_pm4py(spark, repo_root, shared_data):
    path = shared_data / "process_mining/event_logs/pm4py/bpic2013_closed.xes.gz"
    cfg = load_config("process_mining", "local", repo_root / "conf", {"job": {
        "log": str(path), "output": None, "classifier": "name+lifecycle"}})
    res = run_process_mining(spark, cfg)
    log = pm4py_oracle.load(path)
    log["concept:name"] = log["concept:name"] + "+" + log["lifecycle:transition"]
    want = pm4py_oracle.figures(log)
    assert {(r.source, r.target): int(r.frequency) for r in res.views["dfg"].itertuples()} \
        == want["dfg"]
    assert any("+" in a for a in res.views["activities"]["activity"])


def test_malformed_xes_names_the_line(spark, repo_root, tmp_path):
    bad = tmp_path / "bad.xes"
    bad.write_text('<?xml version="1.0"?>\n<log>\n<trace>\n<string key="concept:name" '
                   'value="1"/>\n<event>\n<string key="concept:name" value="a">\n</event>\n'
                   "</trace>\n</log>\n")
    cfg = load_config("process_mining", "local", repo_root / "conf",
                      {"job": {"log": str(bad), "output": None}})
    with pytest.raises(XesError, match="line 7"):
        run_process_mining(spark, cfg)
    gz = tmp_path / "cut.xes.gz"
    gz.write_bytes(gzip.compress(b"<log><trace><event></trace></log>"))
    cfg = load_config("process_mining", "local", repo_root / "conf",
                      {"job": {"log": str(gz), "output": None}})
    with pytest.raises(XesError, match="line 1"):
        run_process_mining(spark, cfg)


def test_csv_log_with_custom_columns_and_ties_in_file_order(spark, repo_root, tmp_path):
    p = tmp_path / "log.csv"
    p.write_text("case,act,ts\nc1,b,2021-01-01T00:00:00Z\nc1,a,2021-01-01T00:00:00Z\n"
                 "c1,c,2021-01-01T00:00:01Z\nc2,a,2021-01-01T00:00:00Z\nc2,,2021-01-02\n"
                 "c2,b,not a time\n")
    cfg = load_config("process_mining", "local", repo_root / "conf", {"job": {
        "log": str(p), "output": None,
        "columns": {"case": "case", "activity": "act", "timestamp": "ts"}}})
    res = run_process_mining(spark, cfg)
    dfg = {(r.source, r.target): int(r.frequency) for r in res.views["dfg"].itertuples()}
    assert dfg == {("b", "a"): 1, ("a", "c"): 1}
    assert res.report.rejects == {"log": {"null activity": 1, "unparseable timestamp": 1}}
    clean = tmp_path / "clean.csv"
    clean.write_text("case:concept:name,concept:name,time:timestamp\n"
                     "c1,b,2021-01-01T00:00:00Z\nc1,a,2021-01-01T00:00:00Z\n"
                     "c1,c,2021-01-01T00:00:01Z\n")
    assert pm4py_oracle.figures(pm4py_oracle.load(clean))["dfg"] == {("b", "a"): 1,
                                                                      ("a", "c"): 1}
