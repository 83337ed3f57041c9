"""PNML read as written: labels keep their spaces (as pm4py reads them), so the job's own
model.pnml replays its log; a model whose labels miss the log's activities gets a note; pages
nested thousands deep are read, and through the job a bad deep model is one error line;
hostile XML (external entities, entity expansion) stays refused."""

from __future__ import annotations

import json
import warnings

import pandas as pd
import pytest
from pyspark.sql import types as T

from sparkfield.core.conf import load_config
from sparkfield.process import run_process_mining
from sparkfield.process.analysis import petri
from tests.conftest import ROOT, job_module

CASE, ACT, TS = "case:concept:name", "concept:name", "time:timestamp"
SCHEMA = T.StructType([T.StructField(CASE, T.StringType()), T.StructField(ACT, T.StringType()),
                       T.StructField(TS, T.StringType())])
ROWS = [("c1", "check ", "2024-01-01T10:00:00Z"), ("c1", "pay", "2024-01-01T11:00:00Z"),
        ("c2", "check ", "2024-01-02T10:00:00Z"), ("c2", "pay", "2024-01-02T11:00:00Z")]


def _log(spark, tmp_path) -> str:
    path = str(tmp_path / "log.parquet")
    spark.createDataFrame(ROWS, SCHEMA).coalesce(1).write.parquet(path)
    return path


def _mine(spark, log: str, out, **job):
    cfg = load_config("process_mining", "local", ROOT / "conf", {"job": {
        "log": log, "output": str(out), "render_map": False, "statistics": False, **job}})
    return run_process_mining(spark, cfg)


def _pnml(body: str, pages: int = 1) -> str:
    opened = "".join(f'<page id="pg{i}">' for i in range(pages))
    return (f'<?xml version="1.0"?><pnml><net id="n" type="{petri.PNML_TYPE}">{opened}'
            f'{body}{"</page>" * pages}</net></pnml>')


NET = ('<place id="i"><initialMarking><text>1</text></initialMarking></place>'
       '<place id="o"/><transition id="t1"><name><text>check </text></name></transition>'
       '<transition id="t2"><name><text>  pay</text></name></transition>'
       '<place id="m"/><arc id="a1" source="i" target="t1"/><arc id="a2" source="t1" '
       'target="m"/><arc id="a3" source="m" target="t2"/><arc id="a4" source="t2" target="o"/>')


def test_labels_are_kept_as_written_as_pm4py_reads_them(tmp_path):
    import pm4py

    path = tmp_path / "spaces.pnml"
    path.write_text(_pnml(NET))
    ours = petri.read_pnml(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net, _, _ = pm4py.read_pnml(str(path))
    assert ours.labels == {t.label for t in net.transitions if t.label} == {"check ", "  pay"}


def test_the_jobs_own_model_fed_back_fits_its_log(spark, tmp_path):
    log = _log(spark, tmp_path)
    _mine(spark, log, tmp_path / "first")
    model = tmp_path / "first" / "model" / "model.pnml"
    assert "check " in petri.read_pnml(model).labels
    res = _mine(spark, log, tmp_path / "again", conformance_model=str(model))
    rep = json.loads((tmp_path / "again" / "run_report.json").read_text())
    assert rep["counts"]["conformance"]["model"] == "conformance_model"
    assert rep["counts"]["conformance"]["log_fitness"] == 1.0
    assert not any("label" in n for n in res.report.notes), res.report.notes
    cases = pd.read_csv(tmp_path / "again" / "conformance" / "cases.csv")
    assert cases["is_fit"].all()


def _model_notes(spark, tmp_path, net: str):
    """The run of the log against the model ``net`` and its notes about the model."""
    model = tmp_path / "model.pnml"
    model.write_text(_pnml(net))
    res = _mine(spark, _log(spark, tmp_path), tmp_path / "out", conformance_model=str(model))
    return res, [n for n in res.report.notes if "conformance model" in n]


def test_a_model_that_labels_none_of_the_activities_gets_a_note(spark, tmp_path):
    res, notes = _model_notes(spark, tmp_path,
                              NET.replace("check ", "approve").replace("  pay", "ship"))
    assert len(notes) == 1 and "none of the log's 2 activities" in notes[0], res.report.notes
    rep = json.loads((tmp_path / "out" / "run_report.json").read_text())
    assert notes[0] in rep["notes"]


def test_labels_that_differ_only_in_spaces_are_named_in_the_note(spark, tmp_path):
    res, notes = _model_notes(spark, tmp_path,
                              NET.replace("check ", "check").replace("  pay", "pay"))
    assert len(notes) == 1 and "1 of the log's 2 activities" in notes[0], res.report.notes
    assert "'check '" in notes[0] and "spaces or case" in notes[0]


def test_pages_nested_thousands_deep_are_read(tmp_path):
    flat, deep = tmp_path / "flat.pnml", tmp_path / "deep.pnml"
    flat.write_text(_pnml(NET))
    deep.write_text(_pnml(NET, pages=2000))
    assert petri.read_pnml(deep) == petri.read_pnml(flat)


def test_a_deeply_nested_bad_model_is_one_error_line(spark, tmp_path, capsys):
    model = tmp_path / "deep.pnml"
    model.write_text(_pnml(NET.replace("<text>1</text>", "<text>0</text>"), pages=2000))
    code = job_module("process_mining").main([
        "--log", _log(spark, tmp_path), "--output", str(tmp_path / "out"),
        "--conformance-model", str(model)])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error:")]
    assert code == 2 and len(err) == 1 and "initial marking" in err[0], err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("doc", [
    '<?xml version="1.0"?><!DOCTYPE pnml [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
    '<pnml><net id="n"><page id="p"><transition id="t"><name><text>&x;</text></name>'
    '</transition></page></net></pnml>',
    '<?xml version="1.0"?><!DOCTYPE pnml [<!ENTITY a "aaaaaaaaaa">'
    + "".join(f'<!ENTITY a{i} "{("&a;" if i == 1 else f"&a{i - 1};") * 10}">'
              for i in range(1, 10))
    + ']><pnml><net id="n"><name><text>&a9;</text></name></net></pnml>',
], ids=["external_entity", "entity_expansion"])
def test_hostile_xml_is_refused(tmp_path, doc):
    path = tmp_path / "hostile.pnml"
    path.write_text(doc)
    with pytest.raises(petri.PnmlError, match="not well-formed XML"):
        petri.read_pnml(path)
