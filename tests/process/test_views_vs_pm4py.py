"""Every reference log in ../shared: our views equal pm4py's."""

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from sparkfield.core.conf import load_config
from sparkfield.process import run_process_mining

from . import pm4py_oracle

LOGS = Path(__file__).resolve().parents[3] / "shared/data/process_mining/event_logs/pm4py"
NAMES = sorted(p.name for p in LOGS.iterdir() if p.name.endswith((".xes", ".xes.gz", ".csv")))


def test_every_reference_log_is_covered():
    assert len(NAMES) == 13, NAMES


@pytest.mark.parametrize("name", NAMES)
def test_views_equal_pm4py(spark, repo_root, name):
    path = LOGS / name
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
