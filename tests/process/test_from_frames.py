"""ocel_from_frames and event_log_from_frames: source tables held as DataFrames and a mapping
without file paths in, the log out. Uses the DataFrame API only, so it runs on a classic
session and over Spark Connect (``SPARKFIELD_TEST_REMOTE``) alike.

Inline frames with explicit schemas: integer keys shared by the tables, a null row, rejected
rows; objects, events, relations, rejects and views checked against what was worked out by
hand (times in the session's time zone, UTC). The same tables as CSV files give the same log
through the event_log job."""

from __future__ import annotations

import csv
import json
from contextlib import ExitStack
from pathlib import Path

import pytest
import yaml
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.core.connect import is_connect
from sparkfield.process import (
    MappingError,
    event_log_from_frames,
    ocel_from_frames,
    run_event_log,
)
from sparkfield.process.extraction.extract import extract_from
from sparkfield.process.extraction.mapping import load_mapping
from sparkfield.process.extraction.sources import with_row_order, with_views
from sparkfield.process.jobs import compute as classic_job
from sparkfield.process.jobs import ocel as ocel_job
from sparkfield.process.jobs.params import EVENT_LOG
from sparkfield.process.ocel.build import plan_from

INT, S, D = T.IntegerType(), T.StringType(), T.DoubleType()
TABLES = {
    "customers": ([("customer_id", INT), ("name", S)], [
        (1, "Ann"), (2, "Bob"),
        (None, None),  # a null row
    ]),
    "orders": ([("order_id", INT), ("customer_id", INT), ("placed", S), ("amount", D)], [
        (1, 1, "2024-01-01 10:00:00", 10.5),
        (2, 2, "2024-01-02 10:00:00", 20.0),
        (3, 1, "not a time", 5.0),  # rejected: its placement has no usable time
    ]),
    "payments": ([("order_id", INT), ("paid", S)], [
        (1, "2024-01-01 12:00:00"),
        (2, "2024-01-03 09:00:00"),
        (9, "2024-01-04 09:00:00"),  # no such order
        (None, None),  # a null row
    ]),
}

OCEL = """
objects:
  order: {source: orders, id: order_id, attributes: [amount]}
  customer: {source: customers, id: customer_id, attributes: [name]}
activities:
  - name: Place
    source: orders
    timestamp: placed
    objects:
      - {type: order, id: order_id, qualifier: placed}
      - {type: customer, id: customer_id, qualifier: by}
  - name: Pay
    source: payments
    timestamp: paid
    objects: [{type: order, id: order_id}]
object_relations:
  - {source: orders, qualifier: of, from: {type: order, id: order_id},
     to: {type: customer, id: customer_id}}
case_object_type: order
"""

CLASSIC = """
views:
  paid: >
    SELECT p.order_id, p.paid, c.name FROM payments p
    LEFT JOIN orders o USING (order_id) LEFT JOIN customers c USING (customer_id)
activities:
  - {name: Place, source: orders, case_id: order_id, timestamp: placed,
     resource: customer_id, attributes: [amount]}
  - {name: Pay, source: paid, case_id: order_id, timestamp: paid, resource: name}
"""

MEAN_S = (2 * 3600 + 23 * 3600) / 2  # order 1 paid 2 h after placing it, order 2 23 h after


def _frames(spark):
    return {name: spark.createDataFrame(rows, T.StructType(
        [T.StructField(c, t, True) for c, t in cols]))
        for name, (cols, rows) in TABLES.items()}


def _at(col: str = "timestamp"):
    return F.date_format(col, "MM-dd HH:mm")


def _ocel_content(objects, events, e2o) -> tuple[dict, list]:
    """Objects by id, and each event as (activity, time, attributes, related objects): event
    ids hash the source row order, which differs between frames and files."""
    objs = {(r.ocel_id, r.ocel_type): r.attributes for r in objects.collect()}
    rel: dict[str, list] = {}
    for r in e2o.collect():
        rel.setdefault(r.ocel_event_id, []).append((r.ocel_object_id, r.ocel_qualifier))
    evs = sorted((r.activity, r.at, sorted((r.attributes or {}).items()),
                  sorted(rel.get(r.ocel_id, [])))
                 for r in events.select("ocel_id", "activity", "attributes",
                                        _at().alias("at")).collect())
    return objs, evs


def _classic_content(events) -> list:
    return sorted((r.case_id, r.activity, r.at, r.resource, sorted((r.attributes or {}).items()))
                  for r in events.select("case_id", "activity", "resource", "attributes",
                                         _at().alias("at")).collect())


def test_ocel_from_frames_builds_the_log_its_rejects_and_views(spark):
    with ocel_from_frames(_frames(spark), OCEL) as log:
        objects, events = _ocel_content(log.objects, log.events, log.e2o)
        o2o = {tuple(r) for r in log.o2o.collect()}
        rejects = {(r.source, r.reason): json.loads(r.record) for r in log.rejects.collect()}
        variants = [tuple(r) for r in log.variants("order").collect()]
        dfg, acts = log.dfg("order"), log.activities("customer")
        stats = log.stats
        assert log.changes.count() == 0

    assert objects == {
        ("order:1", "order"): {"source_key": "1", "amount": "10.5"},
        ("order:2", "order"): {"source_key": "2", "amount": "20.0"},
        ("order:3", "order"): {"source_key": "3", "amount": "5.0"},
        ("customer:1", "customer"): {"source_key": "1", "name": "Ann"},
        ("customer:2", "customer"): {"source_key": "2", "name": "Bob"}}
    assert events == [
        ("Pay", "01-01 12:00", [], [("order:1", "")]),
        ("Pay", "01-03 09:00", [], [("order:2", "")]),
        ("Pay", "01-04 09:00", [], []),  # its order is unknown: the relation is a reject
        ("Place", "01-01 10:00", [], [("customer:1", "by"), ("order:1", "placed")]),
        ("Place", "01-02 10:00", [], [("customer:2", "by"), ("order:2", "placed")])]
    assert o2o == {("order:1", "customer:1", "of"), ("order:2", "customer:2", "of"),
                   ("order:3", "customer:1", "of")}
    assert rejects == {
        ("object type customer", "null object id"): {"ocel_type": "customer",
                                                     "attributes": {"source_key": None}},
        ("Place", "unparseable timestamp"): {
            "activity": "Place", "timestamp_raw": "not a time",
            "objs": [{"type": "order", "id": "order:3", "qualifier": "placed", "key": "3"},
                     {"type": "customer", "id": "customer:1", "qualifier": "by",
                      "key": "1"}]},
        ("Pay", "null timestamp"): {"activity": "Pay", "objs": [
            {"type": "order", "qualifier": ""}]},
        ("e2o Pay", "unknown object"): {
            "ocel_event_id": rejects[("e2o Pay", "unknown object")]["ocel_event_id"],
            "activity": "Pay", "key": "9", "declared_type": "order", "ocel_qualifier": ""}}

    # the order type's flattened log: orders 1 and 2 placed then paid
    assert [(r.source, r.target, r.frequency, r.mean_s) for r in dfg.itertuples()] == [
        ("Place", "Pay", 2, MEAN_S)]
    assert variants == [('["Place","Pay"]', 2, 1.0, MEAN_S)]
    assert acts.set_index("activity")[["events", "cases"]].to_dict("index") == {
        "Place": {"events": 2, "cases": 2}}
    assert stats.inputs == {"object_rows": 6, "event_rows": 7, "e2o_relations": 7,
                            "o2o_relations": 3, "object_changes": 0}
    assert stats.outputs == {"events": 5, "objects": 5, "e2o": 6, "o2o": 3,
                             "object_changes": 0}
    assert stats.total_rejects == 4 and stats.counts["cases"] == 2


def test_event_log_from_frames_builds_the_events_rejects_and_views(spark):
    with event_log_from_frames(_frames(spark), yaml.safe_load(CLASSIC)) as log:
        events = _classic_content(log.events)
        rejects = {(r.source, r.reason): json.loads(r.record) for r in log.rejects.collect()}
        dfg = log.small["dfg"]
        variants = [tuple(r) for r in log.views.variants.select(
            "variant", "cases", "share").collect()]
        cases = {r.case_id: r.duration_s for r in log.views.cases.collect()}
        stats = log.stats

    assert events == [
        ("1", "Pay", "01-01 12:00", "Ann", []),
        ("1", "Place", "01-01 10:00", "1", [("amount", "10.5")]),
        ("2", "Pay", "01-03 09:00", "Bob", []),
        ("2", "Place", "01-02 10:00", "2", [("amount", "20.0")]),
        ("9", "Pay", "01-04 09:00", None, [])]
    assert rejects == {
        ("Place", "unparseable timestamp"): {
            "case_id": "3", "activity": "Place", "timestamp_raw": "not a time",
            "resource": "1", "attributes": {"amount": "5.0"}},
        ("Pay", "null case id"): {"activity": "Pay"}}
    assert [(r.source, r.target, r.frequency, r.mean_s) for r in dfg.itertuples()] == [
        ("Place", "Pay", 2, MEAN_S)]
    assert variants == [('["Place","Pay"]', 2, 2 / 3), ('["Pay"]', 1, 1 / 3)]
    assert cases == {"1": 7200.0, "2": 82800.0, "9": 0.0}
    assert stats.inputs == {"rows": 7}
    assert stats.rejects == {"Place": {"unparseable timestamp": 1},
                             "Pay": {"null case id": 1}}
    assert stats.counts["by_source"] == {"Place": {"rows": 3, "events": 2},
                                         "Pay": {"rows": 4, "events": 3}}


def test_the_results_stay_usable_after_release(spark):
    log = event_log_from_frames(_frames(spark), CLASSIC, classifier="name", dedupe=False)
    log.release()
    assert log.events.count() == 5 and log.views.dfg.count() == 1


@pytest.mark.parametrize("build,text,message", [
    (ocel_from_frames, OCEL.replace("source: payments", "source: refunds"),
     r"activity #2 \(Pay\): unknown source 'refunds' \(frames: customers, orders, payments\)"),
    (ocel_from_frames, "sources: [orders, refunds]\n" + OCEL,
     r"no frame given for source\(s\) 'refunds'"),
    (event_log_from_frames, CLASSIC.replace("case_id: order_id, timestamp: placed",
                                            "case_id: order_no, timestamp: placed"),
     r"activity 'Place': case_id expression 'order_no'"),
    # 1 would be "1.0", matching no case of the integer column of another source
    (event_log_from_frames, CLASSIC.replace("case_id: order_id, timestamp: placed",
                                            "case_id: CAST(order_id AS DOUBLE), timestamp: placed"),
     r"activity 'Place': case_id 'CAST\(order_id AS DOUBLE\)' is a double .* AS BIGINT"),
    (event_log_from_frames, OCEL, "this one is object-centric.*use ocel_from_frames"),
    (ocel_from_frames, CLASSIC, "this one is classic.*use event_log_from_frames"),
    (ocel_from_frames, "conf/event_logs/olist_ocel.yaml", r"pass pathlib.Path"),
])
def test_mapping_errors_are_one_line_naming_the_place(spark, build, text, message):
    with pytest.raises(MappingError, match=message):
        build(_frames(spark), text)


def _write_csvs(tmp_path: Path, form: str) -> Path:
    """The tables as CSV files and the same mapping with their paths: the job's input."""
    sources = {}
    for name, (cols, rows) in TABLES.items():
        with (tmp_path / f"{name}.csv").open("w", newline="") as f:
            out = csv.writer(f)
            out.writerow([c for c, _ in cols])
            out.writerows([["" if v is None else v for v in row] for row in rows])
        sources[name] = {"format": "csv", "path": f"{name}.csv"}
    path = tmp_path / "mapping.yaml"
    doc = yaml.safe_load(OCEL if form == "ocel" else CLASSIC)
    path.write_text(yaml.safe_dump({"sources": sources, **doc}, sort_keys=False))
    return path


def _job_tables(spark, repo_root: Path, path: Path, form: str, stack: ExitStack):
    """The event_log job's log of the mapping file: the job itself on classic Spark; over
    Spark Connect, where the jobs do not run (no SparkContext), its own plan and compute on
    the same files (read by Spark as the job reads CSV: every column a string)."""
    if not is_connect(spark):
        from sparkfield.core.conf import load_config

        cfg = load_config("event_log", "local", repo_root / "conf",
                          {"job": {"mapping": str(path), "output": None}})
        res = run_event_log(spark, cfg)
        return res.extras["ocel"] if form == "ocel" else res.events
    print("Spark Connect: the job needs classic Spark; compared with its plan and compute")
    mapping = load_mapping(path)
    frames = with_views(spark, {
        name: with_row_order(spark.read.options(header="true", multiLine="true", escape='"')
                             .csv(src.path))
        for name, src in mapping.sources.items()}, mapping)
    if form == "ocel":
        return ocel_job.compute(plan_from(frames, mapping), stack).tables
    classified, source, labels = classic_job.classify_extracted(
        extract_from(frames, mapping), mapping, dedupe=True)
    p = EVENT_LOG.parse({"output": None})
    return classic_job.compute(classified, source, labels, p, stack).events


@pytest.mark.parametrize("form", ["ocel", "classic"])
def test_the_frames_give_the_log_the_job_gives_from_files(spark, repo_root, tmp_path, form):
    path = _write_csvs(tmp_path, form)
    with ExitStack() as stack:
        job = _job_tables(spark, repo_root, path, form, stack)
        if form == "ocel":
            want = _ocel_content(job.objects, job.events, job.e2o)
            with ocel_from_frames(_frames(spark), OCEL) as log:
                got = _ocel_content(log.objects, log.events, log.e2o)
        else:
            want = _classic_content(job)
            with event_log_from_frames(_frames(spark), CLASSIC) as log:
                got = _classic_content(log.events)
    assert got == want
    assert len(want[1] if form == "ocel" else want) == 5
