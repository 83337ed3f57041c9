"""Strict ISO-8601 times read in the Python workers: every value read there is the instant
Spark's own parse gives (the oracle), every other value is left to Spark, and an XES log's
rows are the same whichever way each time was read."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.process.eventlog.events import (
    LOCAL_PROBLEM,
    RAW_TS,
    local_time_problem,
    parse_timestamp,
)
from sparkfield.process.eventlog.iso_instants import iso_instants
from sparkfield.process.eventlog.read import read_log
from sparkfield.process.eventlog.schema import TIMESTAMP
from sparkfield.process.eventlog.xes_split import INSTANT, read_xes

EDGES = {  # value -> read in the worker
    "2011-10-01T00:38:44.546+02:00": True, "2011-10-01T00:38:44Z": True,
    "2011-10-01T00:38:44.5-05:30": True, "2011-10-01T00:38:44.123456+14:00": True,
    "2012-02-29T23:59:59.999999-14:00": True, "1600-02-29T00:00:00Z": True,
    "0001-01-01T00:00:00Z": True, "9999-12-31T23:59:59.999999Z": True,
    "1969-12-31T23:59:59.1Z": True,
    "2011-02-29T00:00:00Z": False, "1900-02-29T00:00:00Z": False,  # no such day
    "2011-04-31T00:00:00Z": False, "2011-13-01T00:00:00Z": False,
    "2011-10-01T24:00:00Z": False, "2011-10-01T23:60:00Z": False,
    "2011-10-01T23:59:60Z": False,  # a leap second
    "2011-10-01T00:38:44.1234567Z": False, "2011-10-01T00:38:44.Z": False,
    "2011-10-01T00:38:44+14:01": False, "2011-10-01T00:38:44+05:60": False,
    "2011-10-01T00:38:44+0200": False, "2011-10-01T00:38:44z": False,
    "2011-10-01 00:38:44Z": False, "2011-10-01T00:38:44": False,
    " 2011-10-01T00:38:44Z": False, "2011-10-01T00:38:44Z ": False,
    "0000-01-01T00:00:00Z": False, "２011-10-01T00:38:44Z": False, "": False,
}


def _fuzz(n: int) -> list[str]:
    rnd = random.Random(7)

    def pick(*xs: str) -> str:
        return rnd.choice(xs)

    return [f"{pick('0001', '1969', '1970', '1900', '2000', '2011', '2100', '9999')}-"
            f"{pick('01', '02', '04', '12', '13', '00')}-"
            f"{pick('01', '28', '29', '30', '31', '32', '00', f'{rnd.randint(1, 31):02d}')}"
            f"{pick('T', 'T', 'T', ' ')}{pick('00', '23', '24', f'{rnd.randint(0, 23):02d}')}:"
            f"{pick('00', '59', '60')}:{pick('00', '59', '60', f'{rnd.randint(0, 59):02d}')}"
            f"{pick('', '.5', '.546', '.123456', '.1234567')}"
            f"{pick('Z', '+00:00', '-00:00', '+02:00', '-09:30', '+14:00', '+14:30', '', 'Z')}"
            for _ in range(n)]


def test_strict_times_are_the_instants_sparks_parse_gives(spark):
    values = [*EDGES, None, *_fuzz(20_000)]
    got = iso_instants(pa.array(values, pa.string())).cast(pa.int64()).to_pylist()
    frame = spark.createDataFrame(list(enumerate(values)), "i long, s string")
    want = dict(frame.select("i", F.unix_micros(
        parse_timestamp(F.col("s"), T.StringType(), "UTC", None))).collect())
    read = [i for i, v in enumerate(got) if v is not None]
    assert len(read) > 1_000  # the fuzz reaches the worker's path, not only Spark's
    assert [(values[i], got[i]) for i in read if got[i] != want[i]] == []
    assert {v: got[i] is not None for i, v in enumerate(values[:len(EDGES)])} == EDGES
    assert got[len(EDGES)] is None  # a null time


def test_a_sliced_or_empty_array_reads_its_own_values():
    arr = pa.array(["x", "2011-10-01T00:38:44Z", "1970-01-01T00:00:01.5+01:00"])
    assert iso_instants(arr.slice(1)).cast(pa.int64()).to_pylist() == \
        [1317429524000000, -3598500000]
    assert len(iso_instants(pa.array([], pa.string()))) == 0


XES = """<?xml version="1.0" encoding="UTF-8"?>
<log xes.version="1.0">
<trace><string key="concept:name" value="c1"/>
<event><string key="concept:name" value="a"/><date key="time:timestamp" value="{0}"/></event>
<event><string key="concept:name" value="b"/><date key="time:timestamp" value="{1}"/></event>
</trace>
<trace><string key="concept:name" value="c2"/>
<event><string key="concept:name" value="a"/><date key="time:timestamp" value="{2}"/></event>
<event><string key="concept:name" value="b"/><date key="time:timestamp" value="{3}"/></event>
<event><string key="concept:name" value="c"/><date key="time:timestamp" value="{4}"/></event>
<event><string key="concept:name" value="d"/><date key="time:timestamp" value="{5}"/></event>
</trace>
</log>
"""


@pytest.mark.parametrize("timezone", ["UTC", "Europe/Berlin"])
def test_a_logs_times_are_sparks_whichever_side_reads_them(spark, tmp_path, timezone):
    times = ["2024-03-31T01:15:00.25+01:00", "2024-03-31T02:15:00",  # skipped in Berlin
             "2024-10-27T02:15:00", "2024-10-27T02:15:00Z",  # repeated in Berlin; an instant
             "2024-02-30T00:00:00Z", "2024-07-01 12:00:00+02:00"]  # no such day; Spark's
    path = tmp_path / "mixed.xes"
    path.write_text(XES.format(*times))
    raw = read_xes(spark, str(path), instants=True)
    assert {r[RAW_TS]: r[INSTANT] is not None for r in raw.collect()} == dict(
        zip(times, [True, False, False, True, False, False], strict=True))
    rows = read_log(spark, str(path), None, timezone)  # an XES log: no columns to name
    oracle = rows.select(
        RAW_TS, TIMESTAMP, LOCAL_PROBLEM,
        parse_timestamp(F.col(RAW_TS), T.StringType(), timezone, None).alias("want"),
        local_time_problem(F.col(RAW_TS), T.StringType(), timezone, None).alias("problem"))
    got = oracle.collect()
    assert len(got) == len(times)
    assert [r[RAW_TS] for r in got if not (r[TIMESTAMP] == r["want"] or
                                           r[TIMESTAMP] is r["want"] is None)] == []
    assert [r[LOCAL_PROBLEM] for r in got] == [r["problem"] for r in got]
    if timezone != "UTC":
        assert sorted(p for p in (r[LOCAL_PROBLEM] for r in got) if p) == \
            ["ambiguous local time", "nonexistent local time"]
