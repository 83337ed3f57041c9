"""An optional rendering that cannot be made is a note; every other output is kept."""

import json

from sparkfield.core.conf import load_config
from sparkfield.process import run_process_mining
from sparkfield.process.analysis import process_map


def test_without_graphviz_the_map_is_a_note_and_the_outputs_are_kept(spark, repo_root,
                                                                      tmp_path, monkeypatch):
    log = tmp_path / "log.csv"
    log.write_text("case,act,ts\nc1,a,2021-01-01T00:00:00Z\nc1,b,2021-01-01T00:01:00Z\n"
                   "c2,a,2021-01-02T00:00:00Z\nc2,c,2021-01-02T00:05:00Z\n")
    monkeypatch.setattr(process_map.shutil, "which", lambda name: None)
    out = tmp_path / "out"
    cfg = load_config("process_mining", "local", repo_root / "conf", {"job": {
        "log": str(log), "output": str(out),
        "columns": {"case": "case", "activity": "act", "timestamp": "ts"}}})
    res = run_process_mining(spark, cfg)
    names = sorted(p.name for p in out.iterdir())
    assert "process_map.dot" in names and "process_map.svg" not in names
    assert {"dfg.csv", "events", "variants.csv", "run_report.json"} <= set(names)
    report = json.loads((out / "run_report.json").read_text())
    assert any("process_map.svg not written" in n and "apt-get install graphviz" in n
               for n in report["notes"])
    assert res.report.outputs["events"] == 4
