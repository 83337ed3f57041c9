"""process_mining writes the model it discovers (IMd on the log's DFG): the process tree pm4py's
IMd gives, a PNML pm4py reads and replays the log on with fitness 1, and its drawing."""

from __future__ import annotations

import json
import warnings

from sparkfield.core.conf import load_config
from sparkfield.process import ProcessTree, read_pnml, run_process_mining
from tests.conftest import ROOT
from tests.process import pm4py_oracle


def _pm4py_tree(log) -> ProcessTree:
    import pm4py

    from tests.process.test_inductive import pm4py_imd

    dfg, starts, ends = pm4py.discover_dfg(log)
    return pm4py_imd(dict(dfg), dict(starts), dict(ends))


def test_the_discovered_model_is_written_and_fits_the_log(spark, fixtures_dir, tmp_path):
    import pm4py

    path = fixtures_dir / "process" / "running-example.xes"
    out = tmp_path / "out"
    cfg = load_config("process_mining", "local", ROOT / "conf", {"job": {
        "log": str(path), "output": str(out)}})
    res = run_process_mining(spark, cfg)
    log = pm4py_oracle.load(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = _pm4py_tree(log)
        net, im, fm = pm4py.read_pnml(str(out / "model" / "model.pnml"))
        fitness = pm4py.fitness_token_based_replay(log, net, im, fm)
    tree = res.extras["model"].tree
    assert tree.normalised() == want.normalised()  # the order of X and + children aside
    assert (out / "model" / "process_tree.txt").read_text().strip() == tree.to_string()
    ours = read_pnml(out / "model" / "model.pnml")
    assert {t.label for t in ours.transitions if t.label} == set(log["concept:name"])
    assert fitness["log_fitness"] == 1.0 and fitness["perc_fit_traces"] == 100.0
    svg = (out / "model" / "model.svg").read_text()
    assert svg.lstrip().startswith(("<?xml", "<svg")) and "register request" in svg
    rep = json.loads((out / "run_report.json").read_text())
    assert rep["counts"]["model"]["activities"] == 8


def test_the_model_can_be_left_out(spark, fixtures_dir, tmp_path):
    out = tmp_path / "out"
    cfg = load_config("process_mining", "local", ROOT / "conf", {"job": {
        "log": str(fixtures_dir / "process" / "running-example.xes"), "output": str(out),
        "model": False}})
    run_process_mining(spark, cfg)
    assert not (out / "model").exists()
