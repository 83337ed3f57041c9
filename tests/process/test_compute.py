"""The process-mining pure step on a handful of inline events: no files, no run report, no
output, every count checked against a count made by hand."""

from contextlib import ExitStack
from datetime import datetime

from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.process.eventlog.events import classify
from sparkfield.process.jobs.compute import compute
from sparkfield.process.jobs.params import PROCESS_MINING

RAW = T.StructType([
    T.StructField("case_id", T.StringType(), True),
    T.StructField("activity", T.StringType(), True),
    T.StructField("timestamp", T.TimestampType(), True),
    T.StructField("resource", T.StringType(), True),
    T.StructField("lifecycle", T.StringType(), True),
    T.StructField("attributes", T.MapType(T.StringType(), T.StringType()), True),
    T.StructField("src_order", T.IntegerType(), True),
    T.StructField("row_order", T.LongType(), True),
    T.StructField("timestamp_raw", T.StringType(), True),
])


def _row(i: int, case: str | None, activity: str, when: datetime | None) -> tuple:
    return (case, activity, when, None, None, None, 0, i,
            when.isoformat() if when else None)


def test_compute_counts_events_cases_and_rejects_without_a_report(spark):
    d = datetime
    rows = [
        _row(0, "c1", "A", d(2020, 1, 1, 9)), _row(1, "c1", "B", d(2020, 1, 1, 10)),
        _row(2, "c1", "C", d(2020, 1, 1, 11)),
        _row(3, "c2", "A", d(2020, 1, 2, 9)), _row(4, "c2", "C", d(2020, 1, 2, 12)),
        _row(5, "c3", "A", d(1960, 1, 1, 9)), _row(6, "c3", "B", d(2020, 1, 3, 9)),
        _row(7, None, "A", d(2020, 1, 4, 9)),  # no case id
        _row(8, "c2", "B", None),  # no timestamp
        _row(9, "c1", "A", d(2020, 1, 1, 9)),  # an exact repeat of row 0
    ]
    classified = classify(spark.createDataFrame(rows, RAW), None, None, dedupe=True)
    p = PROCESS_MINING.parse({"output": None, "suspect_after": "2030-01-01"})

    with ExitStack() as stack:
        c = compute(classified, F.lit("log"), {0: "log"}, p, stack, "inline")
        n_events = c.events.count()
        rejects = sorted(r["reason"] for r in c.rejects.collect())

    s = c.stats
    assert s.inputs == {"rows": 10}
    assert s.counts["by_source"] == {"log": {"rows": 10, "events": 7}}
    assert s.rejects == {"log": {"null case id": 1, "null timestamp": 1, "duplicate event": 1}}
    assert rejects == ["duplicate event", "null case id", "null timestamp"]
    assert n_events == s.outputs["events"] == 7
    assert s.counts["cases"] == 3
    assert s.counts["variants"] == 3  # ABC, AC, AB
    assert s.counts["suspicious_timestamps"]["events"] == 1  # c3's A in 1960
    # the 1960 event is reported, and left out of the over-time statistics
    assert len(s.notes) == 2 and s.notes[0].startswith("1 event(s) in 1 case(s) dated outside")
    assert s.notes[1] == ("statistics over time: 1 event(s) dated outside 1970-01-01 .. "
                          "2030-01-01 left out")
    dfg = {(r.source, r.target): r.frequency for r in c.small["dfg"].itertuples()}
    assert dfg == {("A", "B"): 2, ("B", "C"): 1, ("A", "C"): 1}
    assert c.small["activities"].set_index("activity")["events"].to_dict() == {
        "A": 3, "B": 2, "C": 2}
    assert [(x["name"], x["rows"]) for x in s.cached] == [
        ("classified_rows", 10), ("case_sequences", 3), ("cases", 3), ("variants", 3)]


def test_a_log_without_rejects_gives_an_empty_rejects_table_read_from_no_row(spark):
    d = datetime
    rows = [_row(0, "c1", "A", d(2020, 1, 1, 9)), _row(1, "c1", "B", d(2020, 1, 1, 10))]
    classified = classify(spark.createDataFrame(rows, RAW), None, None, dedupe=True)
    p = PROCESS_MINING.parse({"output": None, "suspect_after": "2030-01-01"})
    with ExitStack() as stack:
        c = compute(classified, F.lit("log"), {0: "log"}, p, stack, "inline")
        with_rejects = compute(classify(spark.createDataFrame(
            [*rows, _row(2, None, "A", d(2020, 1, 1, 11))], RAW), None, None), F.lit("log"),
            {0: "log"}, p, stack, "inline").rejects
        assert c.rejects.collect() == []
        assert c.rejects.schema == with_rejects.schema
        # counted once already: writing the table scans none of the cached rows
        plan = c.rejects._jdf.queryExecution().executedPlan().toString()
        assert "InMemoryTableScan" not in plan and "LocalTableScan" in plan
        assert "InMemoryTableScan" in with_rejects._jdf.queryExecution().executedPlan().toString()
