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
