"""The public facade (sparkfield.process.discover_dfg and friends) on plain DataFrames with the
log's own column names, against pm4py on the reference logs in tests/fixtures/process."""

import json
from collections import Counter

import numpy as np
import pandas as pd
import pytest

import sparkfield.process as sp
from sparkfield.core.errors import ColumnError

from . import pm4py_oracle
from .event_frames import QUERY_FAILED

KEYS = {"case_col": "case:concept:name", "activity_col": "concept:name",
        "timestamp_col": "time:timestamp"}


@pytest.fixture(scope="module", params=["running-example.xes",
                                        "roadtraffic_1t_per_variant.xes.gz"])
def log(request, spark, fixtures_dir):
    pdf = pm4py_oracle.load(fixtures_dir / "process" / request.param)
    cols = list(KEYS.values())
    df = spark.createDataFrame(pdf[cols].astype({"case:concept:name": str}))
    return df, pm4py_oracle.figures(pdf), pdf


def _pairs(frame: pd.DataFrame, key: str, value: str) -> dict:
    return dict(zip(frame[key], frame[value].astype(int), strict=True))


def test_facade_views_equal_pm4py(log):
    df, want, pdf = log
    dfg = sp.discover_dfg(df, **KEYS).toPandas()
    assert {(r.source, r.target): int(r.frequency) for r in dfg.itertuples()} == want["dfg"]
    assert _pairs(sp.start_activities(df, **KEYS).toPandas(), "activity", "cases") \
        == want["start"]
    assert _pairs(sp.end_activities(df, **KEYS).toPandas(), "activity", "cases") == want["end"]
    var = sp.variants(df, **KEYS).toPandas()
    assert Counter({tuple(json.loads(v)): int(n) for v, n in zip(
        var["variant"], var["cases"], strict=True)}) == want["variants"]
    assert abs(var["share"].sum() - 1) < 1e-9
    durations = sorted(sp.case_durations(df, **KEYS).toPandas()["duration_s"])
    np.testing.assert_allclose(durations, want["durations"], rtol=0, atol=1e-3)
    acts = sp.activities(df, **KEYS).toPandas()
    assert _pairs(acts, "activity", "events") == pdf["concept:name"].value_counts().to_dict()


def test_all_views_equal_the_single_views(log):
    df, want, _ = log
    views = sp.all_views(df, **KEYS)
    assert {(r["source"], r["target"]): r["frequency"] for r in views.dfg.collect()} \
        == want["dfg"]
    assert views.cases.count() == len(want["durations"])


def test_string_timestamps_and_equal_times_in_row_order(spark):
    df = spark.createDataFrame(
        [("c1", "b", "2021-01-01 00:00:00"), ("c1", "a", "2021-01-01 00:00:00"),
         ("c1", "c", "2021-01-01T00:00:01Z"), ("c2", "a", "2021-01-02")],
        "case string, step string, at string")
    dfg = sp.discover_dfg(df, case_col="case", activity_col="step",
                          timestamp_col="at").collect()
    assert {(r["source"], r["target"]): r["frequency"] for r in dfg} == {("b", "a"): 1,
                                                                         ("a", "c"): 1}
    # an explicit order column breaks the tie the other way
    ordered = spark.createDataFrame(
        [("c1", "b", "2021-01-01 00:00:00", 2), ("c1", "a", "2021-01-01 00:00:00", 1)],
        "case string, step string, at string, n int")
    dfg = sp.discover_dfg(ordered, case_col="case", activity_col="step", timestamp_col="at",
                          order_col="n").collect()
    assert [(r["source"], r["target"]) for r in dfg] == [("a", "b")]


@pytest.mark.parametrize(("row", "message"), [
    ((None, "b", "2021-01-01"), "a row with a null or unparseable 'case'"),
    (("c1", None, "2021-01-02"), "a row with a null or unparseable 'step' \\(case c1\\)"),
    (("c2", "b", "not a time"), "a row with a null or unparseable 'at' \\(case c2\\)"),
])
def test_a_missing_value_fails_the_query_naming_the_column(spark, row, message):
    df = spark.createDataFrame([("c1", "a", "2021-01-01"), row],
                               "case string, step string, at string")
    dfg = sp.discover_dfg(df, case_col="case", activity_col="step", timestamp_col="at")
    with pytest.raises(QUERY_FAILED, match=message):  # lazy: the check is in the query
        dfg.collect()
    acts = sp.activities(df, case_col="case", activity_col="step", timestamp_col="at")
    with pytest.raises(QUERY_FAILED, match=message):  # a view without timestamps too
        acts.collect()
    with pytest.raises(ColumnError, match="no column 'when'"):
        sp.discover_dfg(df, case_col="case", activity_col="step", timestamp_col="when")


def test_checked_events_skip_the_null_check_but_not_the_column_check(spark):
    from sparkfield.process.analysis.discover import event_frame
    from sparkfield.process.analysis.statistics import activity_frequencies

    df = spark.createDataFrame(
        [("c1", "a", "2021-01-01"), ("c1", "b", "2021-01-02"), ("c2", "a", "2021-01-03"),
         ("c2", None, "2021-01-04")],
        "case string, step string, at string")
    keys = {"case_col": "case", "activity_col": "step", "timestamp_col": "at"}
    with pytest.raises(QUERY_FAILED, match="a row with a null or unparseable 'step'"):
        event_frame(df, **keys).count()
    assert event_frame(df, **keys, checked=True).count() == 4  # the caller vouched for it
    with pytest.raises(ColumnError, match="no column 'when'"):
        event_frame(df, case_col="case", activity_col="step", timestamp_col="when",
                    checked=True)
    good = df.where("step IS NOT NULL")
    plain = activity_frequencies(good, **keys).toPandas()
    assert plain.equals(activity_frequencies(good, **keys, checked=True).toPandas())
    assert plain.to_dict("records") == [
        {"activity": "a", "events": 2, "cases": 2, "event_share": 2 / 3, "case_share": 1.0},
        {"activity": "b", "events": 1, "cases": 1, "event_share": 1 / 3, "case_share": 0.5}]
