"""A CSV event log is read as spreadsheets and pm4py read it: a quoted field keeps its line
breaks; a row with the wrong number of fields is a counted reject, never an event."""

import pandas as pd

from sparkfield.core.conf import load_config
from sparkfield.process import run_process_mining

LOG = ('case,act,ts,note\n'
       'c1,a,2021-01-01T00:00:00Z,"first line\nsecond line"\n'
       'c1,b,2021-01-01T00:01:00Z,"said ""ok"""\n'
       'c2,a,2021-01-02T00:00:00Z,plain\n'
       'c2,b,2021-01-02T00:05:00Z,too,many,fields\n')


def _run(spark, repo_root, tmp_path, **job):
    log = tmp_path / "log.csv"
    log.write_text(LOG)
    cfg = load_config("process_mining", "local", repo_root / "conf", {"job": {
        "log": str(log), "output": None, "render_map": False,
        "columns": {"case": "case", "activity": "act", "timestamp": "ts"}, **job}})
    return run_process_mining(spark, cfg)


def test_quoted_line_breaks_stay_in_their_field(spark, repo_root, tmp_path):
    res = _run(spark, repo_root, tmp_path)
    ev = res.events.toPandas().sort_values(["case_id", "timestamp"])
    assert list(ev["activity"]) == ["a", "b", "a"]
    assert [a.get("note") for a in ev["attributes"]] == [
        "first line\nsecond line", 'said "ok"', "plain"]
    assert sum(res.report.rejects[k].get("malformed row", 0) for k in res.report.rejects) == 1
    # pandas, the oracle, reads the same three good rows and the same values
    oracle = pd.read_csv(tmp_path / "log.csv", on_bad_lines="skip")
    assert list(oracle["note"]) == ["first line\nsecond line", 'said "ok"', "plain"]


def test_read_line_by_line_the_rest_of_a_split_row_is_a_reject_not_an_event(spark, repo_root,
                                                                           tmp_path):
    res = _run(spark, repo_root, tmp_path, csv_multiline=False)
    ev = res.events.toPandas().sort_values(["case_id", "timestamp"])
    assert list(zip(ev["case_id"], ev["activity"], strict=True)) == [
        ("c1", "a"), ("c1", "b"), ("c2", "a")]
    assert ev["attributes"].iloc[0]["note"] == "first line"  # why it is for files without
    assert sum(res.report.rejects[k].get("malformed row", 0) for k in res.report.rejects) == 2


def test_a_log_that_is_not_utf8_has_its_rows_rejected_not_its_cases_merged(spark, repo_root,
                                                                           tmp_path):
    log = tmp_path / "latin1.csv"
    log.write_bytes("case,act,ts\ncaf\u00e9,a,2021-01-01T00:00:00Z\n"
                    "caf\u00e8,b,2021-01-01T00:01:00Z\nok,a,2021-01-02T00:00:00Z\n"
                    .encode("latin-1"))
    cfg = load_config("process_mining", "local", repo_root / "conf", {"job": {
        "log": str(log), "output": None, "render_map": False,
        "columns": {"case": "case", "activity": "act", "timestamp": "ts"}}})
    res = run_process_mining(spark, cfg)
    assert [r["case_id"] for r in res.events.select("case_id").collect()] == ["ok"]
    assert sum(res.report.rejects[k].get("malformed row", 0) for k in res.report.rejects) == 2
    cfg = load_config("process_mining", "local", repo_root / "conf", {"job": {
        **cfg.job, "csv_encoding": "iso-8859-1"}})
    res = run_process_mining(spark, cfg)
    assert sorted(r["case_id"] for r in res.events.select("case_id").collect()) == [
        "caf\u00e8", "caf\u00e9", "ok"]
