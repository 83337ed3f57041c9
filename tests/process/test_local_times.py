"""Wall-clock times (no offset) in a zone with daylight saving: a time the zone skips in spring
names no instant and a time it repeats in autumn names two, so neither is moved to a guess.
pandas (tz_localize with nonexistent/ambiguous='raise', on zoneinfo) decides which are bad:
logs and mappings reject them with a reason, the building blocks and the filters' arguments
refuse them with a clear error."""

from __future__ import annotations

import json
from datetime import datetime
from zoneinfo import ZoneInfo

import pandas as pd
import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.core.conf import load_config
from sparkfield.core.errors import ConfigError
from sparkfield.process import discover_dfg, event_log_from_frames, run_process_mining
from sparkfield.process.analysis.filters import filter_time_range
from sparkfield.process.eventlog.events import parse_timestamp, with_time_columns
from tests.conftest import ROOT
from tests.process.event_frames import QUERY_FAILED

NY = "America/New_York"
# around the spring gap (02:00-03:00 skipped) and the autumn repeat (01:00-02:00 twice) of 2024
WALL = {
    NY: ["2024-03-10 01:59:59", "2024-03-10 02:00:00", "2024-03-10 02:30:00",
         "2024-03-10 02:59:59.5", "2024-03-10 03:00:00", "2024-11-03 00:59:59",
         "2024-11-03 01:00:00", "2024-11-03 01:30:00", "2024-11-03 01:59:59",
         "2024-11-03 02:00:00", "2024-07-01 12:00:00"],
    # half an hour forward in October, back in April
    "Australia/Lord_Howe": ["2024-10-06 01:59:00", "2024-10-06 02:00:00", "2024-10-06 02:29:00",
                            "2024-10-06 02:30:00", "2024-04-07 01:29:00",
                            "2024-04-07 01:30:00", "2024-04-07 01:59:00", "2024-04-07 02:00:00"],
    "Europe/Berlin": ["2024-03-31 02:15:00", "2024-10-27 02:15:00", "2024-10-27 03:00:00"],
    "UTC": ["2024-03-10 02:30:00"],
}
BAD = {"NonExistentTimeError": "nonexistent local time", "AmbiguousTimeError":
       "ambiguous local time"}


def _oracle(text: str, zone: str) -> tuple[str | None, pd.Timestamp | None]:
    """pandas: (the reason the time is refused, or None; its instant in UTC when it has one)."""
    try:
        local = pd.Timestamp(text).tz_localize(ZoneInfo(zone), nonexistent="raise",
                                               ambiguous="raise")
    except Exception as exc:  # pytz's NonExistentTimeError / AmbiguousTimeError
        return BAD[type(exc).__name__], None
    return None, local.tz_convert("UTC").tz_localize(None)


@pytest.mark.parametrize("zone", list(WALL))
def test_wall_clock_times_become_the_instants_pandas_gives_or_none(spark, zone):
    from sparkfield.process.eventlog.events import local_time_problem

    schema = T.StructType([T.StructField("t", T.StringType()),
                           T.StructField("ntz", T.TimestampNTZType())])
    rows = [(t, datetime.fromisoformat(t)) for t in WALL[zone]]
    df = spark.createDataFrame(rows, schema)
    got = df.select(
        "t", "ntz", *[f(F.col(c), df.schema[c].dataType, zone, None).alias(f"{c}_{f.__name__}")
               for c in ("t", "ntz") for f in (parse_timestamp, local_time_problem)],
        parse_timestamp(F.to_timestamp("t"), T.TimestampType(), zone, None).alias("tz"),
    )
    for c in ("t", "ntz"):  # the same two computed in steps, as the object-centric log does
        got = with_time_columns(got, F.col(c), df.schema[c].dataType, zone, None,
                                f"{c}_staged_parse_timestamp", f"{c}_staged_local_time_problem")
    assert not [c for c in got.columns if c.startswith("__")]
    got = got.toPandas().set_index("t")
    for text in WALL[zone]:
        reason, instant = _oracle(text, zone)
        row = got.loc[text]
        for c in ("t", "ntz", "t_staged", "ntz_staged"):
            assert row[f"{c}_local_time_problem"] == reason or (
                reason is None and row[f"{c}_local_time_problem"] is None), (zone, text, c)
            value = row[f"{c}_parse_timestamp"]
            assert (pd.isna(value) if instant is None else value == instant), (zone, text, c)
        assert not pd.isna(row["tz"])  # a timestamp is an instant already: never refused


def _mine(spark, tmp_path, rows: list[tuple[str, str, str]], **job):
    log = tmp_path / "log.csv"
    log.write_text("case,act,ts\n" + "".join(f"{c},{a},{t}\n" for c, a, t in rows))
    cfg = load_config("process_mining", "local", ROOT / "conf", {"job": {
        "log": str(log), "output": str(tmp_path / "out"), "render_map": False,
        "statistics": False, "model": False, "conformance": False, "exports": "none",
        "timezone": NY, "columns": {"case": "case", "activity": "act", "timestamp": "ts"},
        **job}})
    return run_process_mining(spark, cfg)


# c1: b is in the spring gap (today moved past c); c2: b is in the autumn's repeated hour
LOG = [("c1", "a", "2024-03-10 01:59:00"), ("c1", "b", "2024-03-10 02:10:00"),
       ("c1", "c", "2024-03-10 03:05:00"),
       ("c2", "a", "2024-11-03 00:30:00"), ("c2", "b", "2024-11-03 01:30:00"),
       ("c2", "c", "2024-11-03 02:30:00"),
       ("c3", "a", "2024-03-10T02:30:00-05:00"), ("c3", "c", "2024-03-10T04:00:00-04:00")]


def test_a_log_rejects_times_the_zone_skips_or_repeats_with_a_reason(spark, tmp_path):
    res = _mine(spark, tmp_path, LOG)
    want: dict[str, int] = {}
    for _, _, t in LOG:
        reason = None if t[-6] in "+-" else _oracle(t, NY)[0]
        if reason:
            want[reason] = want.get(reason, 0) + 1
    assert want == {"nonexistent local time": 1, "ambiguous local time": 1}
    assert res.report.rejects == {"log": want}
    rep = json.loads((tmp_path / "out" / "run_report.json").read_text())
    assert rep["rejects"] == {"log": want}
    rejects = pd.read_parquet(tmp_path / "out" / "rejects")
    assert sorted(rejects["reason"]) == sorted(want)
    assert {json.loads(r)["timestamp_raw"] for r in rejects["record"]} == {
        "2024-03-10 02:10:00", "2024-11-03 01:30:00"}
    dfg = {(r.source, r.target): r.frequency for r in res.views["dfg"].itertuples()}
    assert dfg == {("a", "c"): 3}  # no arc the data does not hold (c -> b, b -> c)


def test_a_mapping_rejects_them_too(spark):
    schema = T.StructType([T.StructField("order_id", T.IntegerType()),
                           T.StructField("placed", T.TimestampNTZType()),
                           T.StructField("paid", T.StringType())])
    orders = spark.createDataFrame([
        (1, datetime(2024, 3, 10, 1, 0), "2024-03-10 02:45:00"),
        (2, datetime(2024, 11, 3, 1, 15), "2024-11-03 03:00:00"),
        (3, datetime(2024, 7, 1, 9, 0), "2024-07-01 10:00:00")], schema)
    mapping = {"timezone": NY, "activities": [
        {"name": "Place", "source": "orders", "case_id": "order_id", "timestamp": "placed"},
        {"name": "Pay", "source": "orders", "case_id": "order_id", "timestamp": "paid"}]}
    with event_log_from_frames({"orders": orders}, mapping) as log:
        rejects = sorted((r.source, r.reason) for r in log.rejects.collect())
        events = sorted((r.case_id, r.activity) for r in log.events.collect())
    assert rejects == [("Pay", "nonexistent local time"), ("Place", "ambiguous local time")]
    assert events == [("1", "Place"), ("2", "Pay"), ("3", "Pay"), ("3", "Place")]


def _events(spark):
    schema = T.StructType([T.StructField("case", T.StringType()),
                           T.StructField("act", T.StringType()),
                           T.StructField("at", T.StringType())])
    return spark.createDataFrame([(c, a, t) for c, a, t in LOG if c == "c3"], schema)


@pytest.mark.parametrize("start,message", [
    ("2024-03-10T02:30:00", "does not exist in America/New_York"),
    (datetime(2024, 11, 3, 1, 30), "is ambiguous in America/New_York"),
])
def test_a_filter_bound_the_zone_skips_or_repeats_is_refused(spark, start, message):
    df = _events(spark)
    with pytest.raises(ValueError, match=f"start .*{message}"):
        filter_time_range(df, start, "2024-03-11", case_col="case", activity_col="act",
                          timestamp_col="at", timezone=NY)
    # with its offset the same time is one instant
    kept = filter_time_range(df, "2024-03-10T02:30:00-05:00", "2024-03-11", case_col="case",
                             activity_col="act", timestamp_col="at", timezone=NY)
    assert kept.count() == 2


def test_a_job_filter_bound_in_the_gap_is_a_config_error(spark, tmp_path):
    with pytest.raises(ConfigError, match="filter_time_range.*does not exist"):
        _mine(spark, tmp_path, LOG, filters=[
            {"name": "filter_time_range", "start": "2024-03-10 02:30", "end": "2024-03-11"}])


def test_the_views_of_a_frame_refuse_them(spark):
    schema = T.StructType([T.StructField("case", T.StringType()),
                           T.StructField("act", T.StringType()),
                           T.StructField("at", T.StringType())])
    df = spark.createDataFrame([(c, a, t) for c, a, t in LOG if c == "c1"], schema)
    dfg = discover_dfg(df, case_col="case", activity_col="act", timestamp_col="at", timezone=NY)
    with pytest.raises(QUERY_FAILED, match="'at'.*America/New_York"):
        dfg.collect()



OCEL_ZONED = """
timezone: America/New_York
objects:
  order:
    source: orders
    id: order_id
    changes: [{source: orders, id: order_id, timestamp: reviewed, attributes: [score]}]
activities:
  - {name: Place, source: orders, timestamp: placed, objects: [{type: order, id: order_id}]}
case_object_type: order
"""


def test_an_object_centric_mapping_rejects_them_with_the_same_reasons(spark):
    from sparkfield.process import ocel_from_frames

    schema = T.StructType([T.StructField("order_id", T.IntegerType()),
                           T.StructField("placed", T.StringType()),
                           T.StructField("reviewed", T.StringType()),
                           T.StructField("score", T.IntegerType())])
    orders = spark.createDataFrame([
        (1, "2024-03-10 02:30:00", "2024-11-03 01:30:00", 5),
        (2, "2024-11-03 01:10:00", "2024-03-10 02:59:00", 4),
        (3, "2024-07-01 09:00:00", "2024-07-02 09:00:00", 3)], schema)
    with ocel_from_frames({"orders": orders}, OCEL_ZONED) as log:
        rejects = sorted((r.source, r.reason, json.loads(r.record).get("timestamp_raw")
                          or json.loads(r.record).get("time_raw"))
                         for r in log.rejects.collect())
        placed = [r.timestamp for r in log.events.collect()]
        changed = [r.ocel_time for r in log.changes.collect()]
    want = sorted(("Place" if col == "placed" else "object type 'order': change #1",
                   _oracle(t, NY)[0], t)
                  for col, t in [("placed", "2024-03-10 02:30:00"),
                                 ("placed", "2024-11-03 01:10:00"),
                                 ("reviewed", "2024-11-03 01:30:00"),
                                 ("reviewed", "2024-03-10 02:59:00")])
    assert rejects == want
    assert {r[1] for r in rejects} == {"nonexistent local time", "ambiguous local time"}
    assert len(placed) == 1 and len(changed) == 1  # order 3's, at the instants pandas gives
    assert placed[0] == _oracle("2024-07-01 09:00:00", NY)[1].to_pydatetime()
    assert changed[0] == _oracle("2024-07-02 09:00:00", NY)[1].to_pydatetime()


# texts with a zone of their own, as Spark's cast reads them, and the instant each names
ZONED = {"2024-01-15T10:00:00+01": "2024-01-15 09:00:00",
         "2024-01-15T10:00:00+0130": "2024-01-15 08:30:00",
         "2024-01-15 10:00:00 UTC": "2024-01-15 10:00:00",
         "2024-01-15T10:00:00Z": "2024-01-15 10:00:00",
         "2024-01-15T10:00:00 Europe/Paris": "2024-01-15 09:00:00",
         "2024-07-15T10:00:00America/New_York": "2024-07-15 14:00:00",
         "2024-01-15T10:00:00 CET": "2024-01-15 09:00:00",
         "2024-01-15T10:00:00UTC+1": "2024-01-15 09:00:00",
         "2024-01-15T10:00:00.5-0500": "2024-01-15 15:00:00.5"}


def test_a_time_with_its_own_zone_keeps_it_and_a_naive_one_takes_the_logs(spark):
    """Only a naive time is read in the log's zone: a zone of the text's own (an hour-only
    offset, a zone name) is not read again as wall-clock time in Europe/Berlin."""
    naive = ["2024-01-15 10:00:00", "2024-07-15T10:00:00.123", "2024-01-15T10:00", "2024-01-15"]
    texts = [*ZONED, *naive]
    df = spark.createDataFrame([(t,) for t in texts], "t string")
    got = [r[0] for r in df.select(parse_timestamp(
        F.col("t"), T.StringType(), "Europe/Berlin", None)).collect()]
    want = [*(pd.Timestamp(v) for v in ZONED.values()),
            *(_oracle(t.replace("T", " "), "Europe/Berlin")[1] for t in naive)]
    assert [pd.Timestamp(g) for g in got] == want


@pytest.mark.parametrize("fmt, text, want", [
    # the text ends like an offset (-2024); the pattern has no zone: a date in the log's zone
    ("dd-MM-yyyy", "15-01-2024", "2024-01-14 23:00:00"),
    ("MM-dd-yyyy HH:mm", "07-15-2024 10:00", "2024-07-15 08:00:00"),
    ("dd-MM-yyyy HH:mmXXX", "15-01-2024 10:00+02:00", "2024-01-15 08:00:00"),
])
def test_a_formats_pattern_says_whether_its_times_carry_a_zone(spark, fmt, text, want):
    df = spark.createDataFrame([(text,)], "t string")
    got = df.select(parse_timestamp(F.col("t"), T.StringType(), "Europe/Berlin", fmt)).first()[0]
    assert pd.Timestamp(got) == pd.Timestamp(want)
