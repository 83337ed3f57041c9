"""The log statistics (sparkfield.process.analysis.statistics) against pm4py where pm4py has the
same statistic, against plain pandas for the counts over time, then on small frames for what the
logs do not show (a null resource, ties, time zones, bad arguments), and the figures."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F

import sparkfield.process as sp

from . import pm4py_oracle
from .event_frames import (
    ACT,
    CASE,
    KEYS,
    QUERY_FAILED,
    RES,
    ROWS,
    SCHEMA,
    SMALL,
    TS,
    reference_log,
    small_frame,
    spark_log,
)


@pytest.fixture(scope="module", params=["running-example.xes",
                                        "roadtraffic_1t_per_variant.xes.gz"])
def log(request, spark, fixtures_dir):
    pdf = reference_log(request, fixtures_dir, request.param)
    return request.param, pdf, spark_log(spark, pdf)


@pytest.fixture(scope="module", params=["running-example.xes", "roadtraffic100traces.xes"])
def resource_log(request, spark, fixtures_dir):
    """Logs with org:resource; the road-traffic one has many events without a resource."""
    pdf = reference_log(request, fixtures_dir, request.param)
    return request.param, pdf, spark_log(spark, pdf)


def _pm4py(name: str, *args, **kwargs):
    import pm4py

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return getattr(pm4py, name)(*args, **kwargs)


def _as_dict(frame: pd.DataFrame, key: str | list[str], value: str) -> dict:
    keys = zip(*(frame[k] for k in key), strict=True) if isinstance(key, list) else frame[key]
    return dict(zip(keys, frame[value].astype(int), strict=True))


# -- against pm4py ----------------------------------------------------------------------------

def test_activity_frequencies_equal_pm4py(log):
    _, pdf, df = log
    got = sp.activity_frequencies(df, **KEYS).toPandas()
    events = _pm4py("get_event_attribute_values", pdf, ACT, case_id_key=CASE)
    cases = _pm4py("get_event_attribute_values", pdf, ACT, count_once_per_case=True,
                   case_id_key=CASE)
    assert _as_dict(got, "activity", "events") == {k: int(v) for k, v in events.items()}
    assert _as_dict(got, "activity", "cases") == {k: int(v) for k, v in cases.items()}
    assert list(got["events"]) == sorted(got["events"], reverse=True)
    np.testing.assert_allclose(got["event_share"], got["events"] / len(pdf))
    np.testing.assert_allclose(got["case_share"], got["cases"] / pdf[CASE].nunique())
    assert got["event_share"].sum() == pytest.approx(1.0)


def test_resource_frequencies_equal_pm4py_missing_resources_left_out(resource_log):
    _, pdf, df = resource_log
    got = sp.resource_frequencies(df, **KEYS).toPandas()
    events = _pm4py("get_event_attribute_values", pdf, RES, case_id_key=CASE)
    cases = _pm4py("get_event_attribute_values", pdf, RES, count_once_per_case=True,
                   case_id_key=CASE)
    assert _as_dict(got, "resource", "events") == {k: int(v) for k, v in events.items()}
    assert _as_dict(got, "resource", "cases") == {k: int(v) for k, v in cases.items()}
    assert got["resource"].notna().all()
    named = pdf[RES].notna().sum()
    assert got["event_share"].sum() == pytest.approx(named / len(pdf))
    np.testing.assert_allclose(got["case_share"], got["cases"] / pdf[CASE].nunique())


def test_resource_activity_matrix_equals_pandas(resource_log):
    _, pdf, df = resource_log
    got = sp.resource_activity_matrix(df, **KEYS).toPandas()
    want = pdf.dropna(subset=[RES]).groupby([RES, ACT]).size()
    assert _as_dict(got, ["resource", "activity"], "events") \
        == {k: int(v) for k, v in want.items()}
    assert got["events"].sum() == pdf[RES].notna().sum()


MISSING = "(no resource)"


def _pm4py_handovers(pdf: pd.DataFrame) -> dict[tuple[str, str], int]:
    """pm4py's handover network (beta=0) as counts of pairs.

    pm4py cannot sort a missing resource among names, so a missing one becomes the label
    ``MISSING``. pm4py takes the frame's row order, so it gets the events in time order within
    a case (a stable sort, as the library orders equal times)."""
    frame = pdf.sort_values([CASE, TS], kind="stable").copy()
    frame[RES] = frame[RES].astype(object).where(frame[RES].notna(), MISSING)
    network = _pm4py("discover_handover_of_work_network", frame, beta=0, resource_key=RES,
                     timestamp_key=TS, case_id_key=CASE)
    assert network.is_directed
    pairs = len(frame) - frame[CASE].nunique()  # pm4py divides by every direct succession
    counts = {pair: round(value * pairs) for pair, value in network.connections.items()}
    assert all(abs(counts[p] - v * pairs) < 1e-6 for p, v in network.connections.items())
    return {p: n for p, n in counts.items() if n}


def _handover_counts(df, **kwargs) -> dict[tuple[str, str], int]:
    got = sp.handover_of_work(df, **KEYS, **kwargs).toPandas()
    assert got["share"].sum() == pytest.approx(1.0) or got.empty
    np.testing.assert_allclose(got["share"], got["handovers"] / max(got["handovers"].sum(), 1))
    return _as_dict(got, ["source_resource", "target_resource"], "handovers")


def test_handover_of_work_equals_pm4py(resource_log):
    _, pdf, df = resource_log
    want = _pm4py_handovers(pdf)
    assert any(a == b for a, b in want)  # self-handovers, counted as pm4py counts them
    assert any(a != b for a, b in want)
    # with the missing resource given a name, every direct succession is a pair, as in pm4py
    labelled = df.withColumn(RES, F.coalesce(F.col(f"`{RES}`"), F.lit(MISSING)))
    assert _handover_counts(labelled) == want
    # as given, a pair with a missing resource on either side is left out
    named = {p: n for p, n in want.items() if MISSING not in p}
    assert _handover_counts(df) == named
    assert _handover_counts(labelled, include_self=False) \
        == {p: n for p, n in want.items() if p[0] != p[1]}


def test_running_example_handover_shares_are_pm4py_values(spark, fixtures_dir):
    pdf = pm4py_oracle.load(fixtures_dir / "process" / "running-example.xes")
    network = _pm4py("discover_handover_of_work_network", pdf, beta=0)
    got = sp.handover_of_work(spark_log(spark, pdf), **KEYS).toPandas()
    shares = dict(zip(zip(got["source_resource"], got["target_resource"], strict=True),
                      got["share"], strict=True))
    assert shares.keys() == network.connections.keys()
    for pair, value in network.connections.items():
        assert shares[pair] == pytest.approx(value)


def test_case_durations_equal_pm4py(log):
    name, pdf, df = log
    bins = 7
    dist = sp.case_duration_distribution(df, bins=bins, **KEYS)
    cases = dist.cases.toPandas()
    want = sorted(float(d) for d in _pm4py("get_all_case_durations", pdf, case_id_key=CASE))
    np.testing.assert_allclose(sorted(cases["duration_s"]), want, rtol=0, atol=1e-3)
    for row in cases.head(5).itertuples():
        one = _pm4py("get_case_duration", pdf, row.case_id, case_id_key=CASE)
        assert row.duration_s == pytest.approx(float(one), abs=1e-3), (name, row.case_id)
    summary = dist.summary.toPandas().iloc[0]
    assert int(summary["cases"]) == len(want)
    for column, value in (("min_s", min(want)), ("median_s", float(np.median(want))),
                          ("mean_s", float(np.mean(want))), ("max_s", max(want))):
        assert summary[column] == pytest.approx(value, abs=1e-3), column
    histogram = dist.histogram.toPandas()
    counts, edges = np.histogram(want, bins=bins)
    assert list(histogram["bin"]) == list(range(bins))
    assert list(histogram["cases"]) == list(counts)
    np.testing.assert_allclose(histogram["bin_start_s"], edges[:-1], atol=1e-3)
    np.testing.assert_allclose(histogram["bin_end_s"], edges[1:], atol=1e-3)
    assert 0 < max(counts) < len(want)  # a spread, so a wrong bin shows


# -- over time, against pandas ----------------------------------------------------------------

PANDAS_FREQ = {"hour": "h", "day": "D", "week": "W-SUN", "month": "M"}


def _pandas_periods(ts: pd.Series, freq: str, tz: str) -> tuple[pd.Series, pd.PeriodIndex]:
    """Each timestamp's wall-clock period in ``tz``, and every period from first to last."""
    local = ts.dt.tz_convert(tz).dt.tz_localize(None).dt.to_period(PANDAS_FREQ[freq])
    return local, pd.period_range(local.min(), local.max(), freq=PANDAS_FREQ[freq])


def _micros(periods: pd.PeriodIndex, tz: str) -> list[int]:
    starts = periods.start_time.tz_localize(tz).tz_convert("UTC")
    return [int(t.value // 1000) for t in starts]


def _pandas_over_time(pdf: pd.DataFrame, freq: str, tz: str) -> tuple[list, list, list]:
    """period starts (UTC microseconds), events, active cases, computed by hand: a case is
    active in a period when its first event is before the period ends and its last is at or
    after it starts."""
    local, periods = _pandas_periods(pdf[TS], freq, tz)
    events = local.value_counts().reindex(periods, fill_value=0)
    bounds = pdf.groupby(CASE)[TS].agg(["min", "max"])
    start = np.array(_micros(periods, tz))
    end = np.array(_micros(periods + 1, tz))
    first = ((bounds["min"] - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(microseconds=1))
    last = ((bounds["max"] - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(microseconds=1))
    active = ((first.to_numpy()[None, :] < end[:, None])
              & (last.to_numpy()[None, :] >= start[:, None])).sum(axis=1)
    return list(start), [int(n) for n in events], [int(n) for n in active]


def _over_time(df, freq: str, tz: str, **keys) -> tuple[list, list, list]:
    events = sp.events_over_time(df, freq, timezone=tz, **keys)
    active = sp.active_cases_over_time(df, freq, timezone=tz, **keys)
    ev = events.select(F.unix_micros("period_start").alias("t"), "events").collect()
    ac = active.select(F.unix_micros("period_start").alias("t"), "cases").collect()
    assert [r["t"] for r in ev] == [r["t"] for r in ac]
    return [r["t"] for r in ev], [r["events"] for r in ev], [r["cases"] for r in ac]


@pytest.mark.parametrize(("freq", "tz"), [("day", "UTC"), ("week", "UTC"), ("month", "UTC"),
                                          ("day", "Europe/Rome"), ("week", "Asia/Kolkata"),
                                          ("month", "America/New_York")])
def test_events_and_active_cases_over_time_equal_pandas(log, freq, tz):
    _, pdf, df = log
    got = _over_time(df, freq, tz, **KEYS)
    want = _pandas_over_time(pdf, freq, tz)
    assert got[0] == want[0]
    assert got[1] == want[1]
    assert got[2] == want[2]
    assert sum(got[1]) == len(pdf)
    assert 0 in got[1] or freq != "day"  # quiet days are listed with zero events
    # the same active cases from a per-case table of first and last event times
    table = sp.case_duration_distribution(df, **KEYS).cases
    from_table = sp.active_cases_from_cases(table, freq, timezone=tz).select(
        F.unix_micros("period_start").alias("t"), "cases").collect()
    assert ([r["t"] for r in from_table], [r["cases"] for r in from_table]) == \
        (want[0], want[2])


def test_active_cases_from_cases_reads_the_table_once(log):
    """One pass over the per-case table: the spine's bounds come with the periods' deltas,
    not from a scan of their own (the jobs' table has a million rows at bpic2012 x80)."""
    _, pdf, df = log
    table = sp.case_duration_distribution(df, **KEYS).cases.cache()
    try:
        table.count()
        active = sp.active_cases_from_cases(table, "day")
        plan = active._jdf.queryExecution().executedPlan().toString()
        assert plan.count("InMemoryTableScan") == 1, plan
        want = _pandas_over_time(pdf, "day", "UTC")
        got = active.select(F.unix_micros("period_start").alias("t"), "cases").collect()
        assert ([r["t"] for r in got], [r["cases"] for r in got]) == (want[0], want[2])
    finally:
        table.unpersist()


def test_hours_over_time_equal_pandas(spark, fixtures_dir):
    pdf = pm4py_oracle.load(fixtures_dir / "process" / "running-example.xes")
    pdf[CASE] = pdf[CASE].astype(str)
    got = _over_time(spark_log(spark, pdf), "hour", "UTC", **KEYS)
    assert got == _pandas_over_time(pdf, "hour", "UTC")
    assert max(got[2]) == pdf[CASE].nunique()  # all six cases overlap at some hour


def test_periods_do_not_depend_on_the_session_time_zone(spark, log):
    _, _, df = log
    before = _over_time(df, "day", "Europe/Rome", **KEYS)
    old = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "Pacific/Auckland")
    try:
        after = _over_time(df, "day", "Europe/Rome", **KEYS)
    finally:
        spark.conf.set("spark.sql.session.timeZone", old)
    assert after == before


# -- small frames -----------------------------------------------------------------------------

DAY_US = 86_400_000_000
JAN1_US = 1_609_459_200_000_000  # 2021-01-01T00:00:00Z


@pytest.fixture(scope="module")
def small(spark):
    return small_frame(spark)


def _handovers(df, **kwargs) -> dict:
    out = sp.handover_of_work(df, resource_col="who", **SMALL, **kwargs).collect()
    return {(r["source_resource"], r["target_resource"]): r["handovers"] for r in out}


def test_a_null_resource_is_left_out_of_the_counts_not_the_totals(small):
    rows = sp.resource_frequencies(small, resource_col="who", **SMALL).collect()
    assert [(r["resource"], r["events"], r["cases"]) for r in rows] \
        == [("ann", 3, 2), ("bob", 2, 2), ("cy", 1, 1)]
    assert [r["event_share"] for r in rows] == pytest.approx([3 / 7, 2 / 7, 1 / 7])
    assert [r["case_share"] for r in rows] == pytest.approx([2 / 3, 2 / 3, 1 / 3])
    matrix = sp.resource_activity_matrix(small, resource_col="who", **SMALL).collect()
    assert [tuple(r) for r in matrix] == [("ann", "a", 3), ("bob", "b", 1), ("bob", "c", 1),
                                          ("cy", "a", 1)]


def test_handover_skips_a_null_resource_and_counts_self_handovers(small):
    # c1: ann -> (none) -> bob gives no pair; c2: bob -> ann -> ann
    assert _handovers(small) == {("bob", "ann"): 1, ("ann", "ann"): 1}
    assert _handovers(small, include_self=False) == {("bob", "ann"): 1}
    shares = sp.handover_of_work(small, resource_col="who", **SMALL).collect()
    assert [r["share"] for r in shares] == pytest.approx([0.5, 0.5])


def test_handover_follows_the_order_column_on_equal_times(small):
    flipped = small.withColumn("n", F.when(F.col("step") == "a", 2).otherwise(1))
    # c1 now reads (none) -> ann -> bob; c2: bob (b, n=1) is still first by time
    assert _handovers(flipped, order_col="n") == {("ann", "bob"): 1, ("bob", "ann"): 1,
                                              ("ann", "ann"): 1}


def test_small_frame_over_time_with_quiet_days(small):
    days = _over_time(small, "day", "UTC", **SMALL)
    assert days == ([JAN1_US + i * DAY_US for i in range(5)], [3, 2, 1, 0, 1],
                    [1, 1, 1, 0, 1])
    # 2021-01-01 was a Friday: its week started on Monday 2020-12-28
    weeks = _over_time(small, "week", "UTC", **SMALL)
    assert weeks == ([JAN1_US - 4 * DAY_US, JAN1_US + 3 * DAY_US], [6, 1], [2, 1])
    assert _over_time(small, "month", "UTC", **SMALL) == ([JAN1_US], [7], [3])
    hours = _over_time(small.where("case = 'c1'"), "hour", "UTC", **SMALL)
    assert hours[1] == [2] + [0] * 9 + [1] and hours[2] == [1] * 11


def test_naive_times_and_periods_are_in_the_time_zone(small):
    # naive strings are New York wall-clock times; its days start at 05:00 UTC in January
    got = _over_time(small, "day", "America/New_York", **SMALL)
    five = 5 * 3_600_000_000
    assert got[0] == [JAN1_US + five + i * DAY_US for i in range(5)]
    assert got[1] == [3, 2, 1, 0, 1]


def test_small_frame_durations_histogram_and_summary(small):
    dist = sp.case_duration_distribution(small, bins=4, **SMALL)
    durations = {r["case_id"]: r["duration_s"] for r in dist.cases.collect()}
    assert durations == {"c1": 36_000.0, "c2": 86_400.0, "c3": 0.0}
    assert tuple(dist.summary.first()) == (3, 0.0, 36_000.0, 40_800.0, 86_400.0)
    hist = [tuple(r) for r in dist.histogram.collect()]
    assert hist == [(0, 0.0, 21_600.0, 1), (1, 21_600.0, 43_200.0, 1),
                    (2, 43_200.0, 64_800.0, 0), (3, 64_800.0, 86_400.0, 1)]
    same = sp.case_duration_histogram(dist.cases.where("case_id != 'c2'")
                                      .withColumn("duration_s", F.lit(5.0)), bins=3)
    assert [r["cases"] for r in same.collect()] == [2, 0, 0]
    assert sp.case_duration_histogram(dist.cases.where("false"), bins=3).count() == 0


def test_small_frame_activity_frequencies(small):
    rows = sp.activity_frequencies(small, **SMALL).collect()
    assert [(r["activity"], r["events"], r["cases"]) for r in rows] \
        == [("a", 4, 3), ("b", 2, 2), ("c", 1, 1)]
    assert [r["case_share"] for r in rows] == pytest.approx([1.0, 2 / 3, 1 / 3])


@pytest.mark.parametrize(("call", "message"), [
    (lambda d: sp.events_over_time(d, "year", **SMALL), "freq must be one of"),
    (lambda d: sp.active_cases_over_time(d, "minute", **SMALL), "freq must be one of"),
    (lambda d: sp.case_duration_distribution(d, bins=0, **SMALL), "bins must be"),
    (lambda d: sp.resource_frequencies(d, resource_col="whom", **SMALL), "no column 'whom'"),
    (lambda d: sp.handover_of_work(d, **SMALL), "no column 'org:resource'"),
    (lambda d: sp.activity_frequencies(d, case_col="id", activity_col="step",
                                       timestamp_col="at"), "no column 'id'"),
])
def test_bad_arguments_are_named(small, call, message):
    with pytest.raises(ValueError, match=message):
        call(small)


@pytest.mark.parametrize("call", [
    lambda d: sp.activity_frequencies(d, **SMALL),
    lambda d: sp.handover_of_work(d, resource_col="who", **SMALL),
    lambda d: sp.events_over_time(d, "day", **SMALL),
])
def test_a_null_case_is_named_not_dropped(spark, call):
    df = spark.createDataFrame(ROWS + [(None, "a", "2021-01-01", "ann")], SCHEMA)
    with pytest.raises(QUERY_FAILED, match="a row with a null or unparseable 'case'"):
        call(df).collect()


# -- figures ----------------------------------------------------------------------------------

def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    data = buf.getvalue()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 2_000
    return data


def _labelled(ax) -> None:
    assert ax.get_xlabel() and ax.get_ylabel()


def test_figures_render_with_labelled_axes(resource_log):
    _, _, df = resource_log
    events = sp.events_over_time(df, "month", **KEYS).toPandas()
    active = sp.active_cases_over_time(df, "month", **KEYS).toPandas()
    fig = sp.over_time_figure(events, active, freq="month")
    _png(fig)
    top, bottom = fig.axes
    assert top.get_ylabel() == "events per month" and bottom.get_ylabel()
    _labelled(bottom)
    assert list(top.lines[0].get_ydata()) == list(events["events"])

    hist = sp.case_duration_distribution(df, bins=10, **KEYS).histogram.toPandas()
    fig = sp.case_duration_figure(hist)
    _png(fig)
    _labelled(fig.axes[0])
    assert fig.axes[0].get_xlabel() == "case duration (days)"
    assert [p.get_height() for p in fig.axes[0].patches] == list(hist["cases"])

    acts = sp.activity_frequencies(df, **KEYS).toPandas()
    fig = sp.activities_figure(acts, top=3)
    _png(fig)
    _labelled(fig.axes[0])
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels[::-1] == list(acts["activity"][:3])

    res = sp.resource_frequencies(df, **KEYS).toPandas()
    fig = sp.resources_figure(res, top=4)
    _png(fig)
    _labelled(fig.axes[0])
    assert len(fig.axes[0].patches) == min(4, len(res))


def _top_names(pdf: pd.DataFrame, column: str, n: int) -> list[str]:
    """The ``n`` most frequent values, ties by name."""
    counts = pdf[column].value_counts()
    return sorted(counts.index, key=lambda v: (-counts[v], v))[:n]


def test_heat_map_keeps_the_top_resources_and_activities(resource_log):
    _, pdf, df = resource_log
    matrix = sp.resource_activity_matrix(df, **KEYS).toPandas()
    fig = sp.resource_activity_figure(matrix, top_resources=4, top_activities=3)
    _png(fig)
    ax = fig.axes[0]
    _labelled(ax)
    rows = [t.get_text() for t in ax.get_yticklabels()]
    cols = [t.get_text() for t in ax.get_xticklabels()]
    named = pdf.dropna(subset=[RES])  # the matrix counts the events with a resource
    assert rows == _top_names(named, RES, 4)
    assert cols == _top_names(named, ACT, 3)
    grid = ax.images[0].get_array()
    want = pd.crosstab(pdf[RES], pdf[ACT]).reindex(index=rows, columns=cols, fill_value=0)
    np.testing.assert_array_equal(np.asarray(grid), want.to_numpy())
    assert fig.axes[1].get_ylabel() == "events"  # the colour bar


def test_figures_render_empty_frames():
    empty_time = pd.DataFrame({"period_start": pd.Series([], dtype="datetime64[ns]"),
                               "events": [], "cases": []})
    _png(sp.over_time_figure(empty_time, empty_time))
    _png(sp.case_duration_figure(pd.DataFrame(columns=["bin", "bin_start_s", "bin_end_s",
                                                       "cases"])))
    _png(sp.activities_figure(pd.DataFrame(columns=["activity", "events"])))
    _png(sp.resource_activity_figure(pd.DataFrame(columns=["resource", "activity",
                                                           "events"])))
