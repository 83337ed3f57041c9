"""The logs the filter and statistics tests share: the reference logs as pandas frames (read by
pm4py) and as Spark frames, and a small frame of events for what the logs do not show (ties, a
null resource, time zones)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException

from . import pm4py_oracle

CASE, ACT, TS, RES = "case:concept:name", "concept:name", "time:timestamp", "org:resource"
KEYS = {"case_col": CASE, "activity_col": ACT, "timestamp_col": TS}
# a query that fails on the executors: Spark's own error, or the gateway's when several of the
# query's stages fail at once
QUERY_FAILED = (PySparkException, Py4JJavaError)
SHARED = "process_mining/event_logs/pm4py"  # the reference logs in the shared data sets
BUNDLED = ("running-example.xes", "roadtraffic_1t_per_variant.xes.gz")  # tests/fixtures
# the cases of the running example repeated (3 three times, 1 twice), so variants have
# different frequencies and equal ones to rank
REPEATED = "running-example-repeated"
REPEATS = {"3": 3, "1": 2}


def reference_log(request, fixtures_dir: Path, name: str) -> pd.DataFrame:
    """A reference log as pm4py reads it, case ids as strings: a bundled one, the repeated
    running example, or one of the shared data sets (``request`` asks for ``shared_data``,
    which skips the test without them)."""
    if name == REPEATED:
        pdf = _repeated(pm4py_oracle.load(fixtures_dir / "process" / BUNDLED[0]))
    elif name in BUNDLED:
        pdf = pm4py_oracle.load(fixtures_dir / "process" / name)
    else:
        pdf = pm4py_oracle.load(request.getfixturevalue("shared_data") / SHARED / name)
    pdf[CASE] = pdf[CASE].astype(str)
    return pdf


def _repeated(pdf: pd.DataFrame) -> pd.DataFrame:
    copies = [pdf.assign(**{CASE: pdf[CASE].astype(str) + f"-{i}"})
              .loc[pdf[CASE].astype(str) == c] for c, n in REPEATS.items()
              for i in range(1, n)]
    out = pd.concat([pdf, *copies], ignore_index=True)
    out.attrs = pdf.attrs
    return out


def spark_log(spark, pdf: pd.DataFrame):
    """The log as Spark sees it: case, activity, timestamp (and resource when the log has
    one), case ids as strings, a missing resource as null. Local rows: nothing to cache."""
    cols = [CASE, ACT, TS] + ([RES] if RES in pdf.columns else [])
    frame = pdf[cols].copy()
    frame[CASE] = frame[CASE].astype(str)
    if RES in frame.columns:
        frame[RES] = frame[RES].astype(object).where(frame[RES].notna(), None)
    return spark.createDataFrame(frame)


# -- a small frame ----------------------------------------------------------------------------

SCHEMA = "case string, step string, at string, who string"
ROWS = [
    ("c1", "a", "2021-01-01 00:00:00", "ann"), ("c1", "b", "2021-01-01 00:00:00", None),
    ("c1", "c", "2021-01-01 10:00:00", "bob"),
    ("c2", "b", "2021-01-02 00:00:00", "bob"), ("c2", "a", "2021-01-02 01:00:00", "ann"),
    ("c2", "a", "2021-01-03 00:00:00", "ann"),
    ("c3", "a", "2021-01-05 00:00:00", "cy"),
]
SMALL = {"case_col": "case", "activity_col": "step", "timestamp_col": "at"}


def small_frame(spark):
    """:data:`ROWS`: three cases, two events of c1 at the same time (a, then b by row
    order), c1's b without a resource."""
    return spark.createDataFrame(ROWS, SCHEMA)


# -- the same calls on any session ------------------------------------------------------------

# eight cases of one to two events: variants (a, b) x3, (b, a) x2, (a, c) x2, (b)
VARIANT_ROWS = [(f"k{i}", a, f"2021-01-01 00:00:0{j}") for i, seq in enumerate(
    ["ab", "ab", "ab", "ba", "ba", "ac", "ac", "b"]) for j, a in enumerate(seq)]
ORDERS = [(1, "2024-01-01 10:00:00", "2024-01-01 12:00:00"),
          (2, "2024-01-02 10:00:00", None), (3, "2024-01-03 09:00:00", "2024-01-03 09:00:00")]
ORDERS_MAPPING = {
    "timezone": "Europe/Paris",
    "activities": [
        {"name": "Placed", "source": "orders", "case_id": "order_id", "timestamp": "placed"},
        {"name": "Paid", "source": "orders", "case_id": "order_id", "timestamp": "paid",
         "where": "paid IS NOT NULL"}],
    "filters": [{"name": "filter_case_size", "min_size": 2},
                {"name": "filter_time_range", "start": "2024-01-01 11:00:00",
                 "end": "2024-01-03", "mode": "traces_intersecting"}],
}


def plain(df) -> list[list]:
    """The rows of ``df`` as sorted lists of plain values: timestamps as UTC microseconds (as
    collected, a classic and a Connect session give them in different Python types), floats
    rounded to 9 digits."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    cols = [F.unix_micros(f"`{f.name}`").alias(f.name)
            if isinstance(f.dataType, T.TimestampType) else F.col(f"`{f.name}`")
            for f in df.schema.fields]
    rows = [[round(v, 9) if isinstance(v, float) else v for v in r]
            for r in df.select(*cols).collect()]
    return sorted(rows, key=repr)


def library_results(spark) -> dict[str, object]:
    """Representative filters, every statistic and an extraction with a mapping's filters on
    the small frames, as plain values: what a classic session and a Spark Connect one must
    both give (tests/test_connect.py)."""
    import sparkfield.process as sp

    df = small_frame(spark)
    variants = spark.createDataFrame(VARIANT_ROWS, "case string, step string, at string")
    rome = {"timezone": "Europe/Rome", **SMALL}
    frames = {
        "time_range_events": sp.filter_time_range(df, "2021-01-01 10:00:00",
                                                  "2021-01-02T01:00:00", **SMALL),
        "time_range_contained_rome": sp.filter_time_range(
            df, "2021-01-02 01:00:00", "2021-01-05 01:00:00", mode="traces_contained", **rome),
        "variants_top_k": sp.filter_variants_top_k(variants, 2, **SMALL),
        "variants_coverage": sp.filter_variants_by_coverage_percentage(variants, 0.25,
                                                                       **SMALL),
        "case_size": sp.filter_case_size(df, 2, 3, **SMALL),
        "case_performance": sp.filter_case_performance(df, 0, 36_000, **SMALL),
        "start_activities": sp.filter_start_activities(df, ["a"], **SMALL),
        "end_activities": sp.filter_end_activities(df, ["a"], retain=False, **SMALL),
        "directly_follows": sp.filter_directly_follows_relation(df, [("a", "b")], **SMALL),
        "attribute_values": sp.filter_event_attribute_values(df, "who", ["bob"], **SMALL),
        "activity_frequencies": sp.activity_frequencies(df, **SMALL),
        "resource_frequencies": sp.resource_frequencies(df, resource_col="who", **SMALL),
        "resource_activity_matrix": sp.resource_activity_matrix(df, resource_col="who", **SMALL),
        "handover_of_work": sp.handover_of_work(df, resource_col="who", **SMALL),
        "events_over_time": sp.events_over_time(df, "day", **rome),
        "active_cases_over_time": sp.active_cases_over_time(df, "week", **SMALL),
    }
    dist = sp.case_duration_distribution(df, bins=4, **SMALL)
    frames.update(case_durations=dist.cases, case_duration_summary=dist.summary,
                  case_duration_histogram=dist.histogram)
    out: dict[str, object] = {name: plain(frame) for name, frame in frames.items()}
    orders = spark.createDataFrame(ORDERS, "order_id int, placed string, paid string")
    with sp.event_log_from_frames({"orders": orders}, ORDERS_MAPPING) as log:
        out["mapping_filters_events"] = plain(log.events.select("case_id", "activity",
                                                                "timestamp"))
        out["mapping_filters_report"] = log.stats.counts["filters"]
    return out
