"""ocel.sqlite from parts: the executors place the rows of each table into small SQLite
databases and the driver appends them in partition order. The file's tables are checked row
for row (in table order) against the cached log's frames sorted here, with many parts per
table and with none (the driver placing a small table itself). ocel.json is the same file byte
for byte whether Spark or the driver sorts its lines."""

from __future__ import annotations

import json
import sqlite3
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta

import pytest
import yaml
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.process.extraction.sources import with_row_order
from sparkfield.process.jobs.ocel import compute
from sparkfield.process.ocel.build import plan_from
from sparkfield.process.ocel.mapping import parse_ocel_mapping
from sparkfield.process.ocel.write import (
    Placement,
    append_sqlite_parts,
    table_names,
    write_json,
    write_sqlite,
)

MAPPING = """
sources:
  orders: {format: csv, path: orders.csv}
  payments: {format: csv, path: payments.csv}
  customers: {format: csv, path: customers.csv}
  moves: {format: csv, path: moves.csv}
objects:
  order: {source: orders, id: order_id, attributes: [channel]}
  customer:
    source: customers
    id: customer_id
    attributes: [name]
    changes: [{source: moves, id: customer_id, timestamp: at, attributes: [city, name]}]
activities:
  - name: Place Order
    source: orders
    timestamp: placed
    attributes: [channel, note]
    objects:
      - {type: order, id: order_id, qualifier: placed}
      - {type: customer, id: customer, qualifier: by}
  - name: Pay
    source: payments
    timestamp: paid
    attributes: [method]
    objects: [{type: order, id: order_id}, {type: customer, id: payer}]
object_relations:
  - source: orders
    qualifier: of
    from: {type: order, id: order_id}
    to: {type: customer, id: customer}
"""


def _strings(*names: str) -> T.StructType:
    return T.StructType([T.StructField(n, T.StringType(), True) for n in names])


def _frames(spark):
    tables = {
        "orders": (_strings("order_id", "customer", "placed", "channel", "note"), [
            ("o5", "c2", "2024-01-01 10:00:00", "web", None),  # a null attribute
            ("o1", "c1", "2024-01-01 10:00:00", "shop", "gift"),  # the same time as o5
            ("o3", "c1", "2024-01-03 10:00:00", None, None),
            ("o2", "c3", "2024-01-02 10:00:00", "web", "rush"),
            ("o4", "c2", "2024-01-01 10:00:00", "web", "x"),
        ]),
        "payments": (_strings("order_id", "payer", "paid", "method"), [
            ("o1", "c1", "2024-01-04 12:00:00", "card"),
            ("o2", "c3", "2024-01-04 12:00:00", None),
            ("o5", "c2", "2024-01-05 09:00:00", "cash"),
            ("o3", "c1", "2024-01-04 12:00:00", "card"),
        ]),
        "customers": (_strings("customer_id", "name"), [
            ("c2", "Bob"), ("c1", "Ann"), ("c3", None)]),
        "moves": (_strings("customer_id", "at", "city", "name"), [
            ("c1", "2024-02-01 00:00:00", "Lyon", "Ann B"),
            ("c3", "2024-02-02 00:00:00", "Paris", None),
        ]),
    }
    return {name: with_row_order(spark.createDataFrame(rows, schema))
            for name, (schema, rows) in tables.items()}


def _sql_time(micros: int) -> str:
    return (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=micros)).strftime(
        "%Y-%m-%d %H:%M:%S.%f+00:00")


def _expected(c) -> dict[str, list[tuple]]:
    """Every table's rows in table order, from the cached frames: the event-type tables in
    event order (time, mapping order, source row, activity, id), the object-type tables with
    the objects (by type, then id) then the changes (by object, time, field, value), the
    others sorted."""
    t, types = c.tables, c.types
    etab, otab = table_names(sorted(types.events)), table_names(sorted(types.objects))
    want: dict[str, list[tuple]] = {f"event_{etab[a]}": [] for a in types.events}
    want.update({f"object_{otab[o]}": [] for o in types.objects})
    events = sorted(t.events.select(
        F.unix_micros("timestamp").alias("us"), "src_order", "row_order", "activity", "ocel_id",
        "attributes").collect(), key=lambda e: tuple(e)[:5])
    for e in events:
        attrs = e.attributes or {}
        want[f"event_{etab[e.activity]}"].append(
            (e.ocel_id, _sql_time(e.us), *(attrs.get(a) for a in types.events[e.activity])))
    want["event"] = sorted((e.ocel_id, e.activity) for e in events)
    want["event_object"] = sorted(tuple(r) for r in t.e2o.select(
        "ocel_event_id", "ocel_object_id", "ocel_qualifier").collect())
    want["object_object"] = sorted(tuple(r) for r in t.o2o.select(
        "ocel_source_id", "ocel_target_id", "ocel_qualifier").collect())
    objects = sorted(t.objects.collect(), key=lambda o: (o.type_index, o.ocel_id))
    want["object"] = [(o.ocel_id, o.ocel_type) for o in objects]
    for o in objects:
        attrs = o.attributes or {}
        want[f"object_{otab[o.ocel_type]}"].append(
            (o.ocel_id, "1970-01-01 00:00:00.000000+00:00", None,
             *(attrs.get(a) for a in types.objects[o.ocel_type])))
    changes = sorted(t.changes.select(
        "ocel_id", F.unix_micros("ocel_time").alias("us"), "ocel_changed_field", "value",
        "ocel_type").collect(), key=lambda ch: tuple(ch)[:4])
    for ch in changes:
        want[f"object_{otab[ch.ocel_type]}"].append(
            (ch.ocel_id, _sql_time(ch.us), ch.ocel_changed_field,
             *(ch.value if a == ch.ocel_changed_field else None
               for a in types.objects[ch.ocel_type])))
    return want


def _tables(path) -> dict[str, list[tuple]]:
    with sqlite3.connect(path) as db:
        names = [r[0] for r in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '%map_type'")]
        return {n: db.execute(f'SELECT * FROM "{n}" ORDER BY rowid').fetchall() for n in names}


def test_parts_hold_every_row_in_order_with_many_parts_or_none(spark, tmp_path):
    mapping = parse_ocel_mapping(yaml.safe_load(MAPPING))
    with ExitStack() as stack:
        c = compute(plan_from(_frames(spark), mapping), stack, input_name="inline")
        want = _expected(c)
        write_sqlite(spark, c.tables, c.types, str(tmp_path / "parts.sqlite"), c.rows, per=2)
        write_sqlite(spark, c.tables, c.types, str(tmp_path / "whole.sqlite"), c.rows)
        write_sqlite(spark, c.tables, c.types, str(tmp_path / "uncounted.sqlite"), None, per=2)

    # equal times (o5, o1, o4) in source-row order, not by id; nulls stay null
    assert want["event_PlaceOrder"][:3] != sorted(want["event_PlaceOrder"][:3])
    assert any(None in r for r in want["event_Pay"])
    assert len(want["event_object"]) == 18 and len(want["object_Customer"]) == 6
    for name in ("parts", "whole", "uncounted"):
        assert _tables(tmp_path / f"{name}.sqlite") == want, name


def test_json_lines_sorted_by_the_driver_or_by_spark_are_the_same_file(spark, tmp_path):
    mapping = parse_ocel_mapping(yaml.safe_load(MAPPING))
    with ExitStack() as stack:
        c = compute(plan_from(_frames(spark), mapping), stack, input_name="inline")
        for name, rows, per in (("spark", c.rows, 2), ("driver", c.rows, 100),
                                ("uncounted", None, 100)):
            write_json(spark, c.tables, c.types, str(tmp_path / f"{name}.json"), rows, per)
    texts = {n: (tmp_path / f"{n}.json").read_bytes() for n in ("spark", "driver", "uncounted")}
    assert texts["driver"] == texts["spark"] == texts["uncounted"]
    doc = json.loads(texts["driver"])
    assert len(doc["objects"]) == len({o["id"] for o in doc["objects"]}) == c.rows["ocel_objects"]
    # equal times in source-row order, not by id, as the SQLite tables have them
    placed = [e["id"] for e in doc["events"] if e["type"] == "Place Order"][:3]
    assert placed == [r[0] for r in _expected(c)["event_PlaceOrder"][:3]]


def test_rows_appended_are_counted(spark, tmp_path):
    df = spark.range(0, 7, 1, 3).select(F.col("id").cast("string").alias("k"))
    place = Placement(every=(("t", (0,)),), by_type={}, key=("k",))
    for rows, per in ((7, 2), (7, 100)):
        with sqlite3.connect(tmp_path / f"{per}.sqlite") as db:
            db.execute("CREATE TABLE t (k TEXT PRIMARY KEY)")
            assert append_sqlite_parts(db, df, place, rows, per) == 7
            assert [r[0] for r in db.execute("SELECT k FROM t ORDER BY rowid")] == \
                [str(i) for i in range(7)]
    with sqlite3.connect(tmp_path / "short.sqlite") as db:
        db.execute("CREATE TABLE t (k TEXT PRIMARY KEY)")
        with pytest.raises(RuntimeError, match="7 rows appended, 8 expected"):
            append_sqlite_parts(db, df, place, 8, 2)


def test_a_small_table_orders_nulls_as_its_parts_do(spark, tmp_path):
    df = spark.createDataFrame([("b", None), ("a", "x"), ("a", None)], _strings("k", "q"))
    place = Placement(every=(("t", (0, 1)),), by_type={}, key=("k", "q"))
    for per in (1, 100):  # parts sorted by Spark; the whole table sorted on the driver
        with sqlite3.connect(tmp_path / f"{per}.sqlite") as db:
            db.execute("CREATE TABLE t (k TEXT, q TEXT)")
            append_sqlite_parts(db, df, place, 3, per)
            assert db.execute("SELECT k, q FROM t ORDER BY rowid").fetchall() == \
                [("a", None), ("a", "x"), ("b", None)], per
