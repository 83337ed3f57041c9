"""process_mining checks the log against a model: every case replayed (token-based) against
the discovered model or a PNML the user gives, per case and for the log equal to pm4py's
token-based replay; a bad model file is one error line."""

from __future__ import annotations

import json
import shutil
import warnings

import pandas as pd
import yaml

from sparkfield.core.conf import load_config
from sparkfield.process import run_process_mining
from tests.conftest import ROOT, job_module
from tests.process import pm4py_oracle


def _mine(spark, log, out, **job):
    cfg = load_config("process_mining", "local", ROOT / "conf", {"job": {
        "log": str(log), "output": str(out), **job}})
    return run_process_mining(spark, cfg)


def test_the_discovered_model_fits_every_case(spark, fixtures_dir, tmp_path):
    out = tmp_path / "out"
    _mine(spark, fixtures_dir / "process" / "running-example.xes", out)
    cases = pd.read_csv(out / "conformance" / "cases.csv")
    assert len(cases) == 6 and cases["fitness"].eq(1.0).all() and cases["is_fit"].all()
    assert pd.read_csv(out / "conformance" / "non_fitting_variants.csv").empty
    rep = json.loads((out / "run_report.json").read_text())
    assert rep["counts"]["conformance"]["log_fitness"] == 1.0
    assert rep["counts"]["conformance"]["model"] == "discovered"


def test_a_given_model_gives_pm4pys_replay_per_case(spark, fixtures_dir, tmp_path):
    import pm4py

    path = fixtures_dir / "process" / "running-example.xes"
    log = pm4py_oracle.load(path)
    model = tmp_path / "top1.pnml"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net, im, fm = pm4py.discover_petri_net_inductive(pm4py.filter_variants_top_k(log, 1))
        pm4py.write_pnml(net, im, fm, str(model))
        traces = pm4py.convert_to_event_log(log)  # the order pm4py's results come in
        want = pm4py.conformance_diagnostics_token_based_replay(traces, net, im, fm)
        fitness = pm4py.fitness_token_based_replay(traces, net, im, fm)
    ids = [str(t.attributes["concept:name"]) for t in traces]
    out = tmp_path / "out"
    _mine(spark, path, out, conformance_model=str(model))
    got = pd.read_csv(out / "conformance" / "cases.csv", dtype={"case_id": str})
    wanted = {c: (round(r["trace_fitness"], 9), r["missing_tokens"], r["remaining_tokens"],
                  r["produced_tokens"], r["consumed_tokens"]) for c, r in zip(ids, want,
                                                                              strict=True)}
    ours = {r.case_id: (round(r.fitness, 9), r.missing, r.remaining, r.produced, r.consumed)
            for r in got.itertuples()}
    assert ours == wanted
    assert not got["is_fit"].all()
    rep = json.loads((out / "run_report.json").read_text())["counts"]["conformance"]
    assert rep["model"] == "conformance_model"
    assert abs(rep["log_fitness"] - fitness["log_fitness"]) < 1e-6
    assert abs(rep["perc_fit_traces"] - fitness["perc_fit_traces"]) < 1e-6
    bad = pd.read_csv(out / "conformance" / "non_fitting_variants.csv")
    assert bad["cases"].sum() == sum(not r["trace_is_fit"] for r in want)


def test_a_broken_model_file_is_one_error_line(spark, fixtures_dir, tmp_path, capsys):
    conf = tmp_path / "conf"
    shutil.copytree(ROOT / "conf", conf)
    model = tmp_path / "broken.pnml"
    model.write_text("<pnml><net id='n'><place id='p'>")
    job_file = conf / "jobs" / "process_mining.yaml"
    job = yaml.safe_load(job_file.read_text())
    job["conformance_model"] = str(model)
    job_file.write_text(yaml.safe_dump(job))
    code = job_module("process_mining").main([
        "--conf-dir", str(conf), "--log", str(fixtures_dir / "process" / "running-example.xes"),
        "--output", str(tmp_path / "out")])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error:")]
    assert code == 2 and len(err) == 1 and "broken.pnml" in err[0] and "XML" in err[0], err
    assert not (tmp_path / "out").exists()
