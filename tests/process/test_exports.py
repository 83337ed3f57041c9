"""Which formats process_mining re-writes the event log in: by default the ones the input is
not in, so a large XES log is not written out again as XES unless asked."""

from __future__ import annotations

import gzip
import json

import pandas as pd
import pytest

from sparkfield.core.errors import ConfigError
from sparkfield.process.jobs.params import PROCESS_MINING, export_formats
from tests.conftest import ROOT, job_module

CSV = ("case:concept:name,concept:name,time:timestamp\n"
       "1,create,2020-01-01\n1,ship,2020-01-02\n2,create,2020-01-01\n")


@pytest.mark.parametrize("exports,fmt,want", [
    ("auto", "xes", ("csv",)), ("auto", "csv", ("xes",)), ("auto", "parquet", ("csv", "xes")),
    ("auto", None, ("csv", "xes")), ("both", "xes", ("csv", "xes")), ("none", "csv", ()),
    ("xes", "xes", ("xes",)), ("csv", "parquet", ("csv",)),
])
def test_export_formats(exports, fmt, want):
    assert export_formats(exports, fmt) == want


def test_an_unknown_export_is_refused_with_the_choices():
    with pytest.raises(ConfigError, match="exports"):
        PROCESS_MINING.validate({**PROCESS_MINING.defaults(), "exports": "parquet"})


def test_a_csv_log_is_exported_as_xes_only_unless_asked(spark, tmp_path, capsys):
    log = tmp_path / "erp.csv"
    log.write_text(CSV)
    base = ["--conf-dir", str(ROOT / "conf"), "--log", str(log), "--no-model",
            "--no-conformance", "--no-statistics"]
    out = tmp_path / "auto"
    assert job_module("process_mining").main([*base, "--output", str(out)]) == 0, \
        capsys.readouterr().err
    assert not (out / "event_log.csv.gz").exists()
    xes = gzip.decompress((out / "event_log.xes.gz").read_bytes()).decode()
    assert xes.count("<event>") == 3
    steps = [s["step"] for s in json.loads((out / "run_report.json").read_text())["steps"]]
    assert "write_xes" in steps and "write_csv_log" not in steps
    out = tmp_path / "none"
    assert job_module("process_mining").main([*base, "--output", str(out), "--exports",
                                              "none"]) == 0
    assert not list(out.glob("event_log.*"))
    dfg = pd.read_csv(out / "dfg.csv")
    assert dfg.to_dict("records") == [{"source": "create", "target": "ship", "frequency": 1,
                                       "mean_s": 86400.0, "median_s": 86400.0}]


def test_the_csv_export_is_the_same_file_whatever_the_partitions(spark, tmp_path):
    """Events alike in case, time, source order, row order and activity (rows of a joined
    view) follow their attributes, so the file does not depend on how the log is laid out."""
    from pyspark.sql import functions as F

    from sparkfield.process.eventlog.schema import EVENT_SCHEMA
    from sparkfield.process.eventlog.xes import write_csv_gz

    when = pd.Timestamp("2024-01-01 10:00:00").to_pydatetime()
    rows = [("c1", "ship", when, None, None, {"item": str(i)}, 0, 0) for i in range(12)]
    rows += [("c1", "ship", when, None, None, None, 0, 0),
             ("c2", "pay", when, None, None, None, 1, 0)]
    events = spark.createDataFrame(rows, EVENT_SCHEMA)
    files = []
    for n, desc in ((1, False), (4, True), (3, False)):
        laid = events.repartition(n).orderBy(F.col("attributes.item").desc_nulls_first()) \
            if desc else events.repartition(n)
        target = tmp_path / f"log{n}.csv.gz"
        write_csv_gz(spark, laid, str(target))
        files.append(gzip.decompress(target.read_bytes()).decode())
    assert files[0] == files[1] == files[2]
    items = [line.split(",", 5)[5] for line in files[0].splitlines()[1:] if "ship" in line]
    assert items[0] == "" and items[1:] == sorted(items[1:]) and len(items) == 13


def test_the_csv_export_keeps_white_space_around_values(spark, tmp_path):
    """Spark's CSV writer trims every value by default: the copy keeps ids, names and
    attribute values as the log has them."""
    from sparkfield.process.eventlog.schema import EVENT_SCHEMA
    from sparkfield.process.eventlog.xes import write_csv_gz

    when = pd.Timestamp("2024-01-01 10:00:00").to_pydatetime()
    rows = [(" c1", " pay ", when, "ann ", "\tcomplete", {"note": " x "}, 0, 0),
            ("c2 ", "ship", when, None, None, None, 0, 1)]
    target = tmp_path / "log.csv.gz"
    write_csv_gz(spark, spark.createDataFrame(rows, EVENT_SCHEMA), str(target))
    back = pd.read_csv(target, dtype=str, keep_default_na=False)
    assert back["case_id"].tolist() == [" c1", "c2 "]
    assert back["activity"].tolist() == [" pay ", "ship"]
    assert back["resource"].tolist() == ["ann ", ""]
    assert back["lifecycle"].tolist() == ["\tcomplete", ""]
    assert json.loads(back["attributes"][0]) == {"note": " x "}


def _laid_in_order(events):
    """Events as compute caches them: each case whole in one partition, in event order."""
    from sparkfield.process.eventlog.schema import CASE, ORDER

    return events.repartition(3, CASE).sortWithinPartitions(CASE, *ORDER)


def test_events_in_order_alike_in_all_of_the_order_are_still_sorted(spark, tmp_path):
    """In order, but tied (rows of a joined view): the copy sorts them by their attributes."""
    from sparkfield.process.eventlog.schema import EVENT_SCHEMA
    from sparkfield.process.eventlog.xes import write_csv_gz

    when = pd.Timestamp("2024-01-01 10:00:00").to_pydatetime()
    rows = [("c1", "ship", when, None, None, {"item": str(i)}, 0, 0) for i in range(8, -1, -1)]
    laid = _laid_in_order(spark.createDataFrame(rows, EVENT_SCHEMA))
    target = tmp_path / "log.csv.gz"
    write_csv_gz(spark, laid, str(target), in_order=True)
    items = [json.loads(line.split(",", 5)[5].strip('"').replace('""', '"'))["item"]
             for line in gzip.decompress(target.read_bytes()).decode().splitlines()[1:]]
    assert items == [str(i) for i in range(9)]


def test_a_log_files_events_in_order_are_written_as_they_come(spark, tmp_path):
    """Every row_order distinct (one log file's): ``ties=False`` writes the cached order with
    no sort, and the file is the one the sorting write gives."""
    from sparkfield.process.eventlog.schema import EVENT_SCHEMA
    from sparkfield.process.eventlog.xes import _csv_rows, write_csv_gz

    when = pd.Timestamp("2024-01-01 10:00:00").to_pydatetime()
    later = pd.Timestamp("2024-01-02 08:30:00.250").to_pydatetime()
    rows = [(f"c{i % 5}", "ship" if i % 2 else "pay", later if i % 3 else when, "ann" if i % 4
             else None, None, {"n": str(i)} if i % 2 else None, 0, 100 - i) for i in range(40)]
    laid = _laid_in_order(spark.createDataFrame(rows, EVENT_SCHEMA)).cache()

    def sorts(df) -> int:
        return df._jdf.queryExecution().executedPlan().toString().count("Sort [")

    assert sorts(_csv_rows(laid, in_order=True, ties=False)) == sorts(laid)  # none of its own
    assert sorts(_csv_rows(laid, in_order=True, ties=True)) == sorts(laid) + 1
    files = []
    for ties in (True, False):
        target = tmp_path / f"log_{ties}.csv.gz"
        write_csv_gz(spark, laid, str(target), in_order=True, ties=ties)
        files.append(gzip.decompress(target.read_bytes()).decode())
    laid.unpersist()
    assert files[0] == files[1] and len(files[0].splitlines()) == 41
