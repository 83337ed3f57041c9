"""The ``filters`` of process_mining (and event_log): applied in order before every view and
export, equal to pm4py's filters of the same names applied in the same order, listed in the
run report, and refused before Spark starts when a filter or argument is unknown."""

from __future__ import annotations

import json
import re
import shutil
import warnings
from collections import Counter

import pandas as pd
import pytest
import yaml

from sparkfield.core.conf import load_config
from sparkfield.core.errors import ConfigError
from sparkfield.process import run_process_mining
from sparkfield.process.log_filters import plan_filters
from tests.conftest import ROOT, job_module
from tests.process import pm4py_oracle

FILTERS = [
    {"name": "filter_case_size", "min_size": 5},
    {"name": "filter_start_activities", "activities": ["register request"]},
    {"name": "filter_variants_top_k", "k": 2},
]


def _pm4py_filtered(path) -> pd.DataFrame:
    import pm4py

    log = pm4py_oracle.load(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        log = pm4py.filter_case_size(log, 5, 10 ** 9)
        log = pm4py.filter_start_activities(log, ["register request"])
        return pm4py.filter_variants_top_k(log, 2)


def test_the_jobs_log_and_views_are_those_of_the_filtered_log(spark, fixtures_dir, tmp_path):
    path = fixtures_dir / "process" / "running-example.xes"
    out = tmp_path / "out"
    cfg = load_config("process_mining", "local", ROOT / "conf", {"job": {
        "log": str(path), "output": str(out), "filters": FILTERS}})
    res = run_process_mining(spark, cfg)
    want = _pm4py_filtered(path)
    got = pd.read_parquet(out / "events")
    assert Counter(zip(got["case_id"], got["activity"], strict=True)) == Counter(
        zip(want["case:concept:name"].astype(str), want["concept:name"], strict=True))
    assert 0 < len(got) < 42  # the running example has 42 events in 6 cases

    import pm4py

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dfg, _, _ = pm4py.discover_dfg(want)
    arcs = {(r.source, r.target): r.frequency for r in res.views["dfg"].itertuples()}
    assert arcs == dict(dfg)

    rep = json.loads((out / "run_report.json").read_text())
    table = rep["counts"]["filters"]
    assert [f["filter"] for f in table] == [f["name"] for f in FILTERS]
    assert table[0]["cases_kept"] + table[0]["cases_removed"] == 6
    for before, after in zip(table, table[1:], strict=False):
        assert after["cases_kept"] + after["cases_removed"] == before["cases_kept"]
        assert after["events_kept"] + after["events_removed"] == before["events_kept"]
    assert table[-1]["events_kept"] == len(want) == rep["outputs"]["events"]
    assert table[-1]["cases_kept"] == want["case:concept:name"].nunique() == rep["counts"]["cases"]
    assert {s["step"] for s in rep["steps"]} >= {f"filter {f['name']}" for f in FILTERS}


@pytest.mark.parametrize("entry,message", [
    ({"name": "filter_varients_top_k", "k": 2}, "did you mean 'filter_variants_top_k'"),
    ({"name": "filter_case_size", "minimum": 2}, "filters[0] (filter_case_size): unknown "
                                                "argument 'minimum'; it takes min_size, "
                                                "max_size"),
    ({"name": "filter_case_size"}, "missing a required argument: 'min_size'"),
    ({"name": "filter_case_size", "min_size": 2, "case": "x"}, "case are the job's columns"),
    ({"k": 2}, "filters[0]: unknown filter None"),
])
def test_bad_filters_are_named(entry, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        plan_filters([entry])


def test_a_bad_filter_is_refused_before_spark_starts_and_an_empty_result_is_bad_input(
        spark, fixtures_dir, tmp_path, capsys):
    conf = tmp_path / "conf"
    shutil.copytree(ROOT / "conf", conf)
    job_file = conf / "jobs" / "process_mining.yaml"
    job = yaml.safe_load(job_file.read_text())
    log = str(fixtures_dir / "process" / "running-example.xes")

    job["filters"] = [{"name": "filter_case_size", "min_sise": 2}]
    job_file.write_text(yaml.safe_dump(job))
    code = job_module("process_mining").main(["--conf-dir", str(conf), "--log", log,
                                              "--output", str(tmp_path / "a")])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error:")]
    assert code == 2 and len(err) == 1 and "did you mean 'min_size'" in err[0], err

    job["filters"] = [{"name": "filter_case_size", "min_size": 1000}]
    job_file.write_text(yaml.safe_dump(job))
    code = job_module("process_mining").main(["--conf-dir", str(conf), "--log", log,
                                              "--output", str(tmp_path / "b")])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error:")]
    assert code == 2 and err == [
        "error: the filters left no event (filter_case_size removed the last 42): loosen them"]
    assert not (tmp_path / "b").exists()
