"""The ``filters`` of process_mining and event_log: applied in order before every view and
export, equal to pm4py's filters of the same names applied in the same order, listed in the
run report, and refused before Spark starts when a filter or argument is unknown. The
``--filter-*`` flags append to the conf's list in the order given (a bad value names the
flag); a classic mapping's own ``filters`` run first."""

from __future__ import annotations

import json
import re
import shutil
import warnings
from collections import Counter

import pandas as pd
import pytest
import yaml

from sparkfield.core import cli
from sparkfield.core.conf import load_config
from sparkfield.core.errors import ConfigError
from sparkfield.process import run_process_mining
from sparkfield.process.analysis.filter_plan import plan_filters
from sparkfield.process.extraction.mapping import MappingError, parse_mapping
from tests.conftest import ROOT, job_module
from tests.process import pm4py_oracle
from tests.process.test_extract import _mapping

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
    ({"name": "filter_case_size", "min_size": 2, "case_col": "x"},
     "case_col are the job's columns"),
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


# -- the --filter-* flags -------------------------------------------------------------------

# a tiny log: each flag below removes one case, in the order given (c0 goes to the conf's own
# filter); c1 and c2 are left
TINY = [
    ("c0", "a", "2021-01-06T00:00:00Z"),
    ("c1", "a", "2021-01-01T00:00:00Z"), ("c1", "b", "2021-01-01T01:00:00Z"),
    ("c1", "c", "2021-01-01T02:00:00Z"),
    ("c2", "a", "2021-01-02T00:00:00Z"), ("c2", "b", "2021-01-02T00:30:00Z"),
    ("c2", "c", "2021-01-02T05:00:00Z"),
    ("c3", "a", "2021-01-03T00:00:00Z"), ("c3", "c", "2021-01-03T01:00:00Z"),
    ("c4", "b", "2021-01-04T00:00:00Z"), ("c4", "c", "2021-01-04T00:10:00Z"),
    ("c5", "a", "2021-01-10T00:00:00Z"), ("c5", "b", "2021-01-10T01:00:00Z"),
    ("c5", "c", "2021-01-12T00:00:00Z"),
    ("c6", "a", "2021-02-01T00:00:00Z"), ("c6", "b", "2021-02-01T01:00:00Z"),
    ("c6", "c", "2021-02-01T02:00:00Z"),
    ("c7", "a", "2021-01-05T00:00:00Z"), ("c7", "b", "2021-01-05T01:00:00Z"),
    ("c7", "d", "2021-01-05T02:00:00Z"),
    ("c8", "a", "2021-01-07T00:00:00Z"), ("c8", "b", "2021-01-07T01:00:00Z"),
    ("c8", "b", "2021-01-07T02:00:00Z"), ("c8", "c", "2021-01-07T03:00:00Z"),
]
CONF_FILTERS = [{"name": "filter_case_size", "min_size": 2}]
FLAGS = [
    "--filter-time-range", "2021-01-01", "2021-01-31T23:59:59", "traces_contained",  # c6
    "--filter-start-activities", "a",  # c4
    "--filter-end-activities", "c,x",  # c7
    "--filter-case-performance", "0", "1d",  # c5
    "--filter-case-size", "3",  # c3
    "--filter-variants-coverage", "50%",  # c8: abbc holds 1 of 3 cases
    "--filter-variants-top-k", "1",  # keeps c1 and c2 (abc)
]
FLAG_ENTRIES = [
    {"name": "filter_time_range", "start": "2021-01-01", "end": "2021-01-31T23:59:59",
     "mode": "traces_contained"},
    {"name": "filter_start_activities", "activities": ["a"]},
    {"name": "filter_end_activities", "activities": ["c", "x"]},
    {"name": "filter_case_performance", "min_performance": 0.0, "max_performance": 86_400.0},
    {"name": "filter_case_size", "min_size": 3, "max_size": None},
    {"name": "filter_variants_by_coverage_percentage", "min_coverage_percentage": 0.5},
    {"name": "filter_variants_top_k", "k": 1},
]


def _conf_with_filters(tmp_path, job: str, filters: list) -> str:
    conf = tmp_path / "conf"
    if not conf.exists():
        shutil.copytree(ROOT / "conf", conf)
    job_file = conf / "jobs" / f"{job}.yaml"
    section = yaml.safe_load(job_file.read_text())
    section["filters"] = filters
    job_file.write_text(yaml.safe_dump(section))
    return str(conf)


@pytest.mark.parametrize("job", ["process_mining", "event_log"])
def test_filter_flags_append_to_the_conf_filters_in_the_order_given(job, tmp_path):
    conf = _conf_with_filters(tmp_path, job, CONF_FILTERS)
    args = job_module(job).parser().parse_args(["--conf-dir", conf, *FLAGS])
    cfg = cli.job_config(job, args)
    assert cfg.job["filters"] == CONF_FILTERS + FLAG_ENTRIES
    assert [c.label for c in plan_filters(cfg.job["filters"])][-2:] == [
        "filters[6] (filter_variants_by_coverage_percentage)",
        "filters[7] (filter_variants_top_k)"]
    # a flag given twice appends twice; without flags the conf's list stays as it is
    args = job_module(job).parser().parse_args([
        "--conf-dir", conf, "--filter-case-size", "2", "5", "--filter-case-size", "1"])
    assert cli.job_config(job, args).job["filters"] == CONF_FILTERS + [
        {"name": "filter_case_size", "min_size": 2, "max_size": 5},
        {"name": "filter_case_size", "min_size": 1, "max_size": None}]
    args = job_module(job).parser().parse_args(["--conf-dir", conf])
    assert cli.job_config(job, args).job["filters"] == CONF_FILTERS


@pytest.mark.parametrize("argv,message", [
    (["--filter-variants-top-k", "0"], "argument --filter-variants-top-k: K must be >= 1"),
    (["--filter-variants-top-k", "ten"], "--filter-variants-top-k: K must be a whole number"),
    (["--filter-variants-coverage", "150%"], "argument --filter-variants-coverage: expected a "
                                             "fraction of the cases from 0 to 1"),
    (["--filter-time-range", "2021-01-01"], "argument --filter-time-range: expected 2 or 3 "
                                            "values (START END [MODE]), got 1"),
    (["--filter-time-range", "2021-02-01", "2021-01-01"], "--filter-time-range: START "
                                                          "2021-02-01 is after END"),
    (["--filter-time-range", "1st May", "2021-01-01"], "--filter-time-range: START must be "
                                                       "an ISO date"),
    (["--filter-time-range", "2021-01-01", "2021-02-01", "trace_contained"],
     "did you mean 'traces_contained'?"),
    (["--filter-case-performance", "1h"], "--filter-case-performance: expected 2 arguments"),
    (["--filter-case-performance", "2h", "1h"], "--filter-case-performance: MAX (3600 s) is "
                                                "below MIN (7200 s)"),
    (["--filter-case-performance", "0", "3 days"], "MAX must be seconds or a duration"),
    (["--filter-case-size", "5", "2"], "argument --filter-case-size: MAX (2) is below MIN (5)"),
    (["--filter-start-activities", " , "], "argument --filter-start-activities: expected "
                                           "activity names"),
])
def test_a_bad_filter_flag_exits_2_naming_the_flag(argv, message, capsys):
    for job in ("process_mining", "event_log"):
        with pytest.raises(SystemExit) as exc:
            job_module(job).main(argv)
        err = capsys.readouterr().err
        assert exc.value.code == 2 and message in err, err


def test_filter_flags_narrow_a_tiny_log_and_the_report_lists_each(spark, tmp_path, capsys):
    log = tmp_path / "tiny.csv"
    pd.DataFrame(TINY, columns=["case:concept:name", "concept:name", "time:timestamp"]) \
        .to_csv(log, index=False)
    conf = _conf_with_filters(tmp_path, "process_mining", CONF_FILTERS)
    out = tmp_path / "out"
    code = job_module("process_mining").main([
        "--conf-dir", conf, "--log", str(log), "--output", str(out), "--no-model",
        "--no-conformance", "--no-statistics", *FLAGS])
    assert code == 0, capsys.readouterr().err
    assert "6 events in 2 cases, 1 variants" in capsys.readouterr().out
    rep = json.loads((out / "run_report.json").read_text())
    table = rep["counts"]["filters"]
    assert [{"name": f["filter"], **f["args"]} for f in table] == CONF_FILTERS + FLAG_ENTRIES
    assert [(f["cases_kept"], f["cases_removed"]) for f in table] == [
        (8, 1), (7, 1), (6, 1), (5, 1), (4, 1), (3, 1), (2, 1), (2, 0)]
    assert [f["events_kept"] for f in table] == [23, 20, 18, 15, 12, 10, 6, 6]
    assert {f["source"] for f in table} == {"job"}
    notes = [n for n in rep["notes"] if n.startswith("filters[")]
    assert notes == [
        "filters[0] (filter_case_size): kept 8 of 9 cases, 23 of 24 events",
        "filters[1] (filter_time_range): kept 7 of 8 cases, 20 of 23 events",
        "filters[2] (filter_start_activities): kept 6 of 7 cases, 18 of 20 events",
        "filters[3] (filter_end_activities): kept 5 of 6 cases, 15 of 18 events",
        "filters[4] (filter_case_performance): kept 4 of 5 cases, 12 of 15 events",
        "filters[5] (filter_case_size): kept 3 of 4 cases, 10 of 12 events",
        "filters[6] (filter_variants_by_coverage_percentage): kept 2 of 3 cases, 6 of 10 "
        "events",
        "filters[7] (filter_variants_top_k): kept 2 of 2 cases, 6 of 6 events"]
    events = pd.read_parquet(out / "events")
    assert sorted(set(events["case_id"])) == ["c1", "c2"] and len(events) == 6
    variants = pd.read_csv(out / "variants.csv")
    assert variants["cases"].tolist() == [2]


# -- filters in an event_log mapping --------------------------------------------------------

# the mapping of test_extract (orders placed and paid, Europe/Paris); its good events: o1 and
# o2 placed and paid, o3, o5 and o6 only paid, o7 only placed (06:00Z on 7 January)
MAPPING_FILTERS = [
    # naive bounds in the mapping's time zone: 10:00 in Paris is o1's placement (09:00Z)
    {"name": "filter_time_range", "start": "2020-01-01 10:00:00", "end": "2020-01-06 23:00:00"},
]


def test_a_mappings_filters_run_first_then_the_jobs(spark, tmp_path, capsys):
    doc = _mapping(tmp_path, filters=MAPPING_FILTERS)
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(doc))
    out = tmp_path / "out"
    code = job_module("event_log").main([
        "--conf-dir", str(ROOT / "conf"), "--mapping", str(path), "--output", str(out),
        "--no-model", "--no-conformance", "--filter-case-size", "2"])
    assert code == 0, capsys.readouterr().err
    rep = json.loads((out / "run_report.json").read_text())
    table = rep["counts"]["filters"]
    assert [(f["source"], f["filter"]) for f in table] == [
        ("mapping", "filter_time_range"), ("job", "filter_case_size")]
    assert [n for n in rep["notes"] if "filters[" in n] == [
        "mapping filters[0] (filter_time_range): kept 5 of 6 cases, 7 of 8 events",
        "filters[0] (filter_case_size): kept 2 of 5 cases, 4 of 7 events"]
    events = pd.read_parquet(out / "events")
    assert Counter(zip(events["case_id"], events["activity"], strict=True)) == Counter(
        {("o1", "Placed"): 1, ("o1", "Paid"): 1, ("o2", "Placed"): 1, ("o2", "Paid"): 1})
    assert rep["outputs"]["events"] == 4 and rep["counts"]["cases"] == 2
    assert pd.read_csv(out / "event_log.csv.gz")["case_id"].nunique() == 2
    dfg = pd.read_csv(out / "dfg.csv")
    assert list(zip(dfg["source"], dfg["target"], dfg["frequency"], strict=True)) == [
        ("Placed", "Paid", 2)]
    # the rejects and input rows are the extraction's, before any filter
    assert rep["inputs"]["rows"] == 16 and rep["total_rejects"] == 8
    # the statistics are the filtered log's, their days those of the mapping's time zone
    days = pd.read_csv(out / "statistics" / "events_over_time.csv")
    assert list(pd.to_datetime(days["period_start"])) == [
        pd.Timestamp("2019-12-31 23:00"), pd.Timestamp("2020-01-01 23:00")]
    assert list(days["events"]) == [2, 2]


@pytest.mark.parametrize("filters,message", [
    ([{"name": "filter_case_sise", "min_size": 2}],
     "m.yaml: filters[0]: unknown filter 'filter_case_sise' (did you mean 'filter_case_size'?)"),
    ([{"name": "filter_variants_top_k", "k": 1}, {"name": "filter_case_size", "min_sise": 2}],
     "m.yaml: filters[1] (filter_case_size): unknown argument 'min_sise' (did you mean "
     "'min_size'?)"),
    ([{"name": "filter_case_size", "min_size": 2, "timezone": "UTC"}],
     "timezone are the job's columns"),
    ([["filter_case_size", 2]], "m.yaml: filters[0]: expected {name: <filter>"),
    ({"name": "filter_case_size"}, "m.yaml: 'filters' must list filters"),
])
def test_a_mappings_filters_are_checked_before_spark_starts(tmp_path, filters, message,
                                                           capsys):
    doc = _mapping(tmp_path, filters=filters)
    with pytest.raises(MappingError) as err:
        parse_mapping(doc, origin=str(tmp_path / "m.yaml"))
    assert message in str(err.value)
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(doc))
    code = job_module("event_log").main(["--conf-dir", str(ROOT / "conf"), "--mapping",
                                         str(path), "--output", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and message in err, err
    assert not (tmp_path / "out").exists()


def test_a_misspelt_filters_key_and_filters_on_an_object_centric_log_are_errors(tmp_path,
                                                                               capsys):
    doc = _mapping(tmp_path)
    doc["filter"] = MAPPING_FILTERS
    with pytest.raises(MappingError, match=r"unknown key 'filter' \(did you mean 'filters'\?\)"):
        parse_mapping(doc)
    code = job_module("event_log").main([
        "--conf-dir", str(ROOT / "conf"), "--mapping",
        str(ROOT / "conf" / "event_logs" / "olist_ocel.yaml"), "--filter-variants-top-k", "3",
        "--output", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "this mapping is object-centric" in err, err


# -- chained variant filters --------------------------------------------------------------

def _canonical_tiny(spark):
    from pyspark.sql import types as T

    schema = T.StructType([T.StructField("case_id", T.StringType()),
                           T.StructField("activity", T.StringType()),
                           T.StructField("timestamp", T.TimestampType()),
                           T.StructField("src_order", T.IntegerType()),
                           T.StructField("row_order", T.LongType())])
    rows = [(c, a, pd.Timestamp(t).to_pydatetime(), 0, i) for i, (c, a, t) in enumerate(TINY)]
    return spark.createDataFrame(rows, schema)


@pytest.mark.classic  # plan_size reads the JVM's plan
@pytest.mark.parametrize("checkpoint_dir", [True, False], ids=["reliable", "local"])
def test_chained_variant_filters_leave_a_plan_that_does_not_multiply(spark, checkpoint_dir):
    """Each variant filter reads its input three times: without a cut, three of them in a row
    leave a plan with 27 copies of the log's. Cut after each (a reliable checkpoint where the
    session has a directory, else a local one), the result's plan stays a few nodes, and the
    rows, read after the run's stack closed, are those of the filters applied one at a time."""
    from contextlib import ExitStack

    from sparkfield.core.practices import plan_size
    from sparkfield.core.report import Stats
    from sparkfield.process.analysis import filters
    from sparkfield.process.analysis.filter_plan import apply_filters

    entries = [{"name": "filter_variants_by_coverage_percentage",
                "min_coverage_percentage": 0.05},
               {"name": "filter_variants_top_k", "k": 4},
               {"name": "filter_variants_top_k", "k": 3}]
    events = _canonical_tiny(spark)
    want = events
    for e in entries:
        args = {k: v for k, v in e.items() if k != "name"}
        want = getattr(filters, e["name"])(want, **args, order_col="row_order")
    jsc = spark.sparkContext._jsc.sc()
    saved = jsc.getCheckpointDir()
    set_dir = getattr(jsc, "checkpointDir_$eq")  # the context's directory, None included
    if not checkpoint_dir:
        set_dir(spark.sparkContext._jvm.scala.Option.empty())
    try:
        with ExitStack() as stack:
            got = apply_filters(events, plan_filters(entries), Stats(), stack)
            assert plan_size(got) < 20 < plan_size(want)
        # the caches are released with the stack, the checkpoint under them is not: a frame
        # a run hands back stays readable
        assert sorted(got.collect()) == sorted(want.collect())
    finally:
        set_dir(saved)
