"""Every pm4py reference log: our views equal pm4py's. Two small logs are copied into
tests/fixtures/process and always run; the others come from the shared data set."""

import hashlib
import json
from collections import Counter

import numpy as np
import pytest

from sparkfield.core.conf import load_config
from sparkfield.process import run_process_mining

from . import pm4py_oracle

SHARED_LOGS = "process_mining/event_logs/pm4py"
FIXTURE_LOGS = ["roadtraffic_1t_per_variant.xes.gz", "running-example.xes"]
SLOW_LOGS = {"bpic2012.xes.gz", "bpic2012_1t_per_variant.xes.gz", "receipt.csv"}
OTHER_LOGS = [
    "bpic2012.xes.gz", "bpic2012_1t_per_variant.xes.gz", "bpic2013_closed.xes.gz",
    "bpic2020_permit_log_1t_per_variant.xes.gz", "hospital_billing_1t_per_variant.xes.gz",
    "receipt.csv", "receipt.xes.gz", "roadtraffic100traces.csv", "roadtraffic100traces.xes",
    "running-example.csv", "sepsis_1t_per_variant.xes.gz",
]
CASES = [pytest.param(n, id=n) for n in FIXTURE_LOGS] + [
    pytest.param(n, id=n, marks=[pytest.mark.slow] if n in SLOW_LOGS else [])
    for n in OTHER_LOGS]


@pytest.fixture()
def log_path(request, fixtures_dir):
    name = request.param
    if name in FIXTURE_LOGS:
        return fixtures_dir / "process" / name
    return request.getfixturevalue("shared_data") / SHARED_LOGS / name


def test_every_reference_log_is_covered(shared_data, fixtures_dir):
    folder = shared_data / SHARED_LOGS
    names = sorted(p.name for p in folder.iterdir() if p.name.endswith((".xes", ".xes.gz",
                                                                         ".csv")))
    assert names == sorted(FIXTURE_LOGS + OTHER_LOGS)
    for name in FIXTURE_LOGS:  # the fixtures are byte copies
        digest = [hashlib.sha256(p.read_bytes()).hexdigest()
                  for p in (folder / name, fixtures_dir / "process" / name)]
        assert digest[0] == digest[1], name


@pytest.mark.parametrize("log_path", CASES, indirect=True)
def test_views_equal_pm4py(spark, repo_root, log_path):
    path = log_path
    cfg = load_config("process_mining", "local", repo_root / "conf",
                      {"job": {"log": str(path), "output": None}})
    res = run_process_mining(spark, cfg)
    assert res.rejects == 0, res.report.rejects
    want = pm4py_oracle.figures(pm4py_oracle.load(path))
    dfg = res.views["dfg"]
    assert {(r.source, r.target): int(r.frequency) for r in dfg.itertuples()} == want["dfg"]
    assert dict(zip(res.views["start_activities"]["activity"],
                    res.views["start_activities"]["cases"].astype(int), strict=True)) \
        == want["start"]
    assert dict(zip(res.views["end_activities"]["activity"],
                    res.views["end_activities"]["cases"].astype(int), strict=True)) \
        == want["end"]
    views = res.extras["views"]
    variants = Counter({tuple(json.loads(r["variant"])): int(r["cases"])
                        for r in views.variants.collect()})
    assert variants == want["variants"]
    durations = sorted(r["duration_s"] for r in views.cases.select("duration_s").collect())
    np.testing.assert_allclose(durations, want["durations"], rtol=0, atol=1e-3)
