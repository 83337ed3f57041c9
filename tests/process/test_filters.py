"""The log filters (sparkfield.process.filter_*) against pm4py's filters of the same name on the
reference logs, then on small frames for what the logs do not show (ties, nulls, time zones,
bad arguments)."""

from __future__ import annotations

import warnings
from collections import Counter
from datetime import UTC, datetime

import pandas as pd
import pytest
from pyspark.sql import functions as F

import sparkfield.process as sp

from .event_frames import (
    ACT,
    CASE,
    KEYS,
    QUERY_FAILED,
    REPEATED,
    ROWS,
    SCHEMA,
    SMALL,
    TS,
    reference_log,
    small_frame,
    spark_log,
)

MODES = ["events", "traces_contained", "traces_intersecting", "traces_starting_in",
         "traces_starting_in_exclude", "traces_completing_in", "traces_completing_in_exclude"]


def _both(retain_args: tuple, **kwargs) -> list[tuple[tuple, dict]]:
    return [(retain_args, {**kwargs, "retain": r}) for r in (True, False)]


def _specs(
    window: tuple[str, str], variants_k: list[int], coverage: list[float],
    performance: tuple[float, float], size: tuple[int, int], start: list[str], end: list[str],
    attribute: tuple[str, list[str]] | None, df_pairs: list, ef_pairs: list,
    rework: tuple[str, int],
) -> list[tuple[str, tuple, dict]]:
    """(filter name, positional args, keyword args): the same call for pm4py and sparkfield."""
    specs = [("filter_time_range", window, {"mode": m}) for m in MODES]
    specs += [("filter_variants_top_k", (k,), {}) for k in variants_k]
    specs += [("filter_variants_by_coverage_percentage", (p,), {}) for p in coverage]
    specs += [("filter_case_performance", performance, {}), ("filter_case_size", size, {})]
    specs += [("filter_start_activities", a, k) for a, k in _both((start,))]
    specs += [("filter_end_activities", a, k) for a, k in _both((end,))]
    if attribute:
        for level in ("event", "case"):
            specs += [("filter_event_attribute_values", a, k)
                      for a, k in _both(attribute, level=level)]
    specs += [("filter_directly_follows_relation", a, k) for a, k in _both((df_pairs,))]
    specs += [("filter_eventually_follows_relation", a, k) for a, k in _both((ef_pairs,))]
    specs += [("filter_activities_rework", rework, {})]
    return specs


RUNNING = _specs(
    window=("2010-12-30 14:00:00", "2011-01-08 00:00:00"), variants_k=[1, 2, 4],
    coverage=[0.2, 0.15], performance=(600_000.0, 1_000_000.0), size=(6, 10),
    start=["register request"], end=["reject request"],
    attribute=("org:resource", ["Pete", "Sue"]),
    df_pairs=[("check ticket", "decide"), ("examine thoroughly", "check ticket")],
    ef_pairs=[("check ticket", "examine casually"), ("reinitiate request", "reject request")],
    rework=("check ticket", 2),
)
ROAD = _specs(
    window=("2005-01-01 00:00:00", "2008-01-01 00:00:00"), variants_k=[1, 5, 40],
    coverage=[0.01, 0.05], performance=(0.0, 40_000_000.0), size=(4, 9),
    start=["Create Fine"], end=["Payment", "Send for Credit Collection"], attribute=None,
    df_pairs=[("Payment", "Payment"), ("Add penalty", "Send Appeal to Prefecture")],
    ef_pairs=[("Payment", "Add penalty"), ("Appeal to Judge", "Payment")],
    rework=("Payment", 3),
)
LOGS = {"running-example.xes": RUNNING, REPEATED: RUNNING,
        "roadtraffic_1t_per_variant.xes.gz": ROAD, "roadtraffic100traces.xes": ROAD}


@pytest.fixture(scope="module", params=list(LOGS))
def log(request, spark, fixtures_dir):
    pdf = reference_log(request, fixtures_dir, request.param)
    df = spark_log(spark, pdf).cache()
    yield request.param, pdf, df
    df.unpersist()  # later tests check that jobs leave nothing cached


def _pm4py(name: str, pdf: pd.DataFrame, args: tuple, kwargs: dict) -> pd.DataFrame:
    import pm4py

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return getattr(pm4py, name)(pdf, *args, **kwargs)


def _want(frame: pd.DataFrame) -> Counter:
    micros = (frame[TS] - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(microseconds=1)
    return Counter(zip(frame[CASE].astype(str), frame[ACT], micros.astype(int), strict=True))


def _got(df) -> Counter:
    rows = df.select(CASE, ACT, F.unix_micros(TS).alias("t")).collect()
    return Counter((r[CASE], r[ACT], r["t"]) for r in rows)


def test_filters_equal_pm4py(log):
    name, pdf, df = log
    informative = 0
    for filter_name, args, kwargs in LOGS[name]:
        want = _want(_pm4py(filter_name, pdf, args, kwargs))
        got = _got(getattr(sp, filter_name)(df, *args, **kwargs, **KEYS))
        assert got == want, (filter_name, args, kwargs)
        informative += 0 < sum(want.values()) < len(pdf)
    # most calls keep some events and drop others, so a filter that keeps or drops
    # everything cannot pass by accident
    assert informative >= len(LOGS[name]) * 2 // 3, informative


def test_kept_rows_keep_every_column(log):
    _, pdf, df = log
    out = sp.filter_case_size(df, 1, None, **KEYS)
    assert out.columns == df.columns
    assert out.count() == len(pdf)
    assert out.exceptAll(df).count() == 0


# -- small frames ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def small(spark):
    return small_frame(spark)


def _rows(df) -> Counter:
    return Counter(tuple(r) for r in df.collect())


def _cases(df) -> set[str]:
    return {r["case"] for r in df.select("case").distinct().collect()}


def test_equal_timestamps_follow_row_order_or_the_order_column(small, spark):
    assert _cases(sp.filter_directly_follows_relation(small, [("a", "b")], **SMALL)) == {"c1"}
    assert _cases(sp.filter_start_activities(small, ["a"], **SMALL)) == {"c1", "c3"}
    flipped = small.withColumn("n", F.when(F.col("step") == "a", 2).otherwise(1))
    assert _cases(sp.filter_directly_follows_relation(flipped, [("a", "b")], order_col="n",
                                                      **SMALL)) == set()
    assert _cases(sp.filter_directly_follows_relation(flipped, [("b", "a")], order_col="n",
                                                      **SMALL)) == {"c1", "c2"}
    assert _cases(sp.filter_start_activities(flipped, ["a"], order_col="n", **SMALL)) == {"c3"}


def test_case_filters_keep_whole_cases_and_their_rows(small):
    out = sp.filter_case_size(small, 2, 3, **SMALL)
    assert out.columns == ["case", "step", "at", "who"]
    assert _rows(out) == Counter(r for r in ROWS if r[0] != "c3")
    assert _cases(sp.filter_case_size(small, 1, 1, **SMALL)) == {"c3"}
    assert _cases(sp.filter_case_size(small, 3, None, **SMALL)) == {"c1", "c2"}
    assert _cases(sp.filter_case_performance(small, 0, 36_000, **SMALL)) == {"c1", "c3"}
    assert _cases(sp.filter_case_performance(small, 36_000.5, 86_400, **SMALL)) == {"c2"}
    assert _cases(sp.filter_end_activities(small, ["a"], retain=False, **SMALL)) == {"c1"}
    assert _cases(sp.filter_activities_rework(small, "a", **SMALL)) == {"c2"}
    assert _cases(sp.filter_activities_rework(small, "a", 1, **SMALL)) == {"c1", "c2", "c3"}


def test_a_performance_bound_equal_to_a_cases_exact_duration_keeps_it(spark):
    """1072732.48 s from the first event to the last: the bounds compare with that span, not
    with the difference of two epoch seconds rounded apart (1072732.480000019)."""
    rows = [("c", "a", "2011-09-30 22:38:44.546", None),
            ("c", "b", "2011-10-13 08:37:37.026", None),
            ("d", "a", "2011-09-30 22:38:44.546", None)]
    log = spark.createDataFrame(rows, SCHEMA)
    assert _cases(sp.filter_case_performance(log, 1072732.48, 1072732.48, **SMALL)) == {"c"}
    assert _cases(sp.filter_case_performance(log, 0, 1072732.47, **SMALL)) == {"d"}


def test_eventually_follows_needs_the_order_and_two_occurrences_of_a_pair_of_one(small):
    assert _cases(sp.filter_eventually_follows_relation(small, [("b", "a")], **SMALL)) \
        == {"c2"}
    assert _cases(sp.filter_eventually_follows_relation(small, [("a", "c")], **SMALL)) \
        == {"c1"}
    assert _cases(sp.filter_eventually_follows_relation(small, [("a", "a")], **SMALL)) \
        == {"c2"}
    assert _cases(sp.filter_eventually_follows_relation(
        small, [("a", "a"), ("a", "c")], retain=False, **SMALL)) == {"c3"}
    assert _cases(sp.filter_eventually_follows_relation(small, [], **SMALL)) == set()
    assert _cases(sp.filter_directly_follows_relation(small, [], retain=False, **SMALL)) \
        == {"c1", "c2", "c3"}


def test_attribute_values_by_event_and_by_case_with_a_missing_value(small):
    kept = sp.filter_event_attribute_values(small, "who", ["ann"], level="event", **SMALL)
    assert _rows(kept) == Counter(r for r in ROWS if r[3] == "ann")
    dropped = sp.filter_event_attribute_values(small, "who", ["ann"], level="event",
                                               retain=False, **SMALL)
    assert _rows(dropped) == Counter(r for r in ROWS if r[3] != "ann")  # the null row stays
    assert _cases(sp.filter_event_attribute_values(small, "who", ["bob"], **SMALL)) \
        == {"c1", "c2"}
    assert _cases(sp.filter_event_attribute_values(small, "who", ["bob"], retain=False,
                                                   **SMALL)) == {"c3"}
    assert _cases(sp.filter_event_attribute_values(small, "who", [], **SMALL)) == set()


def test_time_range_bounds_are_included_and_read_in_the_time_zone(small):
    events = sp.filter_time_range(small, "2021-01-01 10:00:00", "2021-01-02T01:00:00",
                                  **SMALL)
    assert [r["step"] for r in events.orderBy("at").collect()] == ["c", "b", "a"]
    # an offset is kept: 01:00+01:00 is midnight UTC, c2's first event
    offset = sp.filter_time_range(small, "2021-01-02T01:00:00+01:00",
                                  datetime(2021, 1, 2, 0, 30, tzinfo=UTC), **SMALL)
    assert _rows(offset) == Counter([ROWS[3]])
    # naive bounds are wall-clock times in the time zone the events are read in
    rome = sp.filter_time_range(small, "2021-01-02 01:00:00", "2021-01-02 01:30:00",
                                timezone="Europe/Rome", **SMALL)
    assert _rows(rome) == Counter([ROWS[4]])
    contained = sp.filter_time_range(small, "2021-01-02", "2021-01-05",
                                     mode="traces_contained", **SMALL)
    assert _cases(contained) == {"c2", "c3"}
    # intersecting is strict at the ends, as in pm4py: c3 touches the end only
    touching = sp.filter_time_range(small, "2021-01-03", "2021-01-05",
                                    mode="traces_intersecting", **SMALL)
    assert _cases(touching) == set()
    assert _cases(sp.filter_time_range(small, "2021-01-03", "2021-01-05T00:00:01Z",
                                       mode="traces_intersecting", **SMALL)) == {"c3"}


def test_variant_ranking_and_coverage(spark):
    rows = [(f"k{i}", a, f"2021-01-01 00:00:0{j}") for i, seq in enumerate(
        ["ab", "ab", "ab", "ba", "ba", "ac", "ac", "b"]) for j, a in enumerate(seq)]
    df = spark.createDataFrame(rows, "case string, step string, at string")
    top = sp.filter_variants_top_k(df, 2, **SMALL)
    assert _cases(top) == {"k0", "k1", "k2", "k3", "k4"}  # (b, a) ranks above (a, c)
    assert _cases(sp.filter_variants_top_k(df, 0, **SMALL)) == set()
    assert len(_cases(sp.filter_variants_top_k(df, 10, **SMALL))) == 8
    assert _cases(sp.filter_variants_by_coverage_percentage(df, 0.375, **SMALL)) \
        == {"k0", "k1", "k2"}
    assert len(_cases(sp.filter_variants_by_coverage_percentage(df, 0.25, **SMALL))) == 7


def test_filters_chain_and_feed_the_views(small):
    out = small.transform(lambda d: sp.filter_case_size(d, 2, 3, **SMALL)).transform(
        lambda d: sp.filter_start_activities(d, ["b"], retain=False, **SMALL))
    dfg = sp.discover_dfg(out, **SMALL).collect()
    assert {(r["source"], r["target"]): r["frequency"] for r in dfg} == {("a", "b"): 1,
                                                                         ("b", "c"): 1}


@pytest.mark.parametrize("call", [
    lambda d: sp.filter_case_size(d, 1, 2, **SMALL),
    lambda d: sp.filter_variants_top_k(d, 1, **SMALL),
    lambda d: sp.filter_time_range(d, "2021-01-01", "2021-02-01", **SMALL),
])
def test_a_null_row_is_named_not_dropped(spark, call):
    df = spark.createDataFrame(ROWS + [(None, "a", "2021-01-01", None)], SCHEMA)
    with pytest.raises(QUERY_FAILED, match="a row with a null or unparseable 'case'"):
        call(df).collect()
    bad_time = spark.createDataFrame(ROWS + [("c1", "a", "soon", None)], SCHEMA)
    with pytest.raises(QUERY_FAILED, match="a row with a null or unparseable 'at'"):
        call(bad_time).collect()


@pytest.mark.parametrize(("call", "message"), [
    (lambda d: sp.filter_time_range(d, "2021-01-01", "2021-02-01", mode="cases", **SMALL),
     "mode must be one of"),
    (lambda d: sp.filter_time_range(d, "first of May", "2021-02-01", **SMALL),
     "start is not an ISO date"),
    (lambda d: sp.filter_event_attribute_values(d, "who", ["x"], level="trace", **SMALL),
     "level must be"),
    (lambda d: sp.filter_event_attribute_values(d, "whom", ["x"], **SMALL),
     "no column 'whom'"),
    (lambda d: sp.filter_start_activities(d, "a", **SMALL), "must be a list"),
    (lambda d: sp.filter_event_attribute_values(d, "who", "ann", **SMALL), "must be a list"),
    (lambda d: sp.filter_directly_follows_relation(d, [("a", "b", "c")], **SMALL),
     "pairs must hold"),
    (lambda d: sp.filter_variants_top_k(d, -1, **SMALL), "k must be"),
    (lambda d: sp.filter_variants_by_coverage_percentage(d, 40, **SMALL),
     "min_coverage_percentage must be"),
    (lambda d: sp.filter_activities_rework(d, "a", 0, **SMALL), "min_occurrences must be"),
    (lambda d: sp.filter_case_size(d, 1, 2, case_col="id", activity_col="step",
                                   timestamp_col="at"), "no column 'id'"),
])
def test_bad_arguments_are_named(small, call, message):
    with pytest.raises(ValueError, match=message):
        call(small)
