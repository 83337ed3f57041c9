"""The object-centric pure step on a handful of inline rows: no files, no run report, no
output. Objects, events, relations, attribute changes, rejects and one type's flattened view
are checked against what was worked out by hand (times in the session's time zone, UTC)."""

import json
from contextlib import ExitStack

import pandas as pd
import yaml
from chispa import assert_df_equality
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.core.keep import LOCAL_CHECKPOINT, Keeper
from sparkfield.core.practices import cached_storage_bytes
from sparkfield.process.analysis.views import case_sequences, compute_views
from sparkfield.process.extraction.sources import given_frames, with_row_order
from sparkfield.process.jobs.ocel import compute
from sparkfield.process.ocel.build import plan_from, shared_keep
from sparkfield.process.ocel.mapping import parse_ocel_mapping
from sparkfield.process.ocel.views import VARIANT_COLUMNS, flatten

MAPPING = """
sources:
  orders: {format: csv, path: orders.csv}
  payments: {format: csv, path: payments.csv}
  customers: {format: csv, path: customers.csv}
  moves: {format: csv, path: moves.csv}
objects:
  order: {source: orders, id: order_id}
  customer:
    source: customers
    id: customer_id
    attributes: [name]
    changes: [{source: moves, id: customer_id, timestamp: at, attributes: [city]}]
activities:
  - name: Place
    source: orders
    timestamp: placed
    objects:
      - {type: order, id: order_id, qualifier: placed}
      - {type: customer, id: customer, qualifier: by}
  - name: Pay
    source: payments
    timestamp: paid
    objects: [{type: order, id: order_id}]
object_relations:
  - source: orders
    qualifier: of
    from: {type: order, id: order_id}
    to: {type: customer, id: customer}
case_object_type: order
"""


def _strings(*names: str) -> T.StructType:
    return T.StructType([T.StructField(n, T.StringType(), True) for n in names])


def _frames(spark):
    tables = {
        "orders": (_strings("order_id", "customer", "placed"), [
            ("o1", "c1", "2024-01-01 10:00:00"),
            ("o2", "c2", "2024-01-02 10:00:00"),
            ("o3", None, "2024-01-03 10:00:00"),  # no customer: its relations are rejected
            ("o4", "c1", "not a time"),  # the order is an object, the event a reject
        ]),
        "payments": (_strings("order_id", "paid"), [
            ("o1", "2024-01-01 12:00:00"),
            ("o2", "2024-01-05 09:00:00"),
            (None, "2024-01-06 09:00:00"),  # an event related to no object
        ]),
        "customers": (_strings("customer_id", "name"), [
            ("c1", "Ann"), ("c2", "Bob"),
            (None, None),  # a null row
        ]),
        "moves": (_strings("customer_id", "at", "city"), [
            ("c1", "2024-02-01 00:00:00", "Lyon"),
            ("c9", "2024-02-02 00:00:00", "Paris"),  # no such customer
        ]),
    }
    return {name: with_row_order(spark.createDataFrame(rows, schema))
            for name, (schema, rows) in tables.items()}


def _classic_views(t, otype):
    """The type's dfg, activities and variants as the classic views make them from its
    flattened log on its own."""
    ev = flatten(t, otype)
    seqs = case_sequences(ev)
    n = seqs.count()
    v = compute_views(ev, seqs, n)
    return (v.dfg.toPandas(), v.activities.toPandas(),
            [tuple(r) for r in v.variants.select(*VARIANT_COLUMNS).collect()])


def test_compute_builds_the_log_its_rejects_and_the_views_without_a_report(spark):
    mapping = parse_ocel_mapping(yaml.safe_load(MAPPING))
    planned = plan_from(_frames(spark), mapping)

    with ExitStack() as stack:
        c = compute(planned, stack, input_name="inline")
        t = c.tables
        objects = {(r.ocel_id, r.ocel_type): r.attributes for r in t.objects.collect()}
        events = {r.ocel_id: (r.activity, r.at) for r in t.events.select(
            "ocel_id", "activity", F.date_format("timestamp", "MM-dd HH:mm").alias("at"))
            .collect()}
        e2o = {(events[r.ocel_event_id], r.ocel_object_id, r.ocel_type, r.ocel_qualifier)
               for r in t.e2o.collect()}
        o2o = {tuple(r) for r in t.o2o.collect()}
        changes = [tuple(r) for r in t.changes.select(
            "ocel_id", F.date_format("ocel_time", "MM-dd"), "ocel_changed_field", "value")
            .collect()]
        rejects = {(r.source, r.reason): r.record for r in t.rejects.collect()}
        order = c.views["order"]
        variants = [tuple(r) for r in order.variants.collect()]
        flat_cases = sorted(r.case_id for r in order.events.select("case_id").collect())
        reject_counts = {(r.source, r.reason): r["count"]
                         for r in t.rejects.groupBy("source", "reason").count().collect()}
        by_type = {r.ocel_type: r["count"] for r in t.objects.groupBy("ocel_type").count()
                   .collect()}
        per_type = {otype: _classic_views(t, otype) for otype in c.views}

    assert objects == {
        ("order:o1", "order"): {"source_key": "o1"}, ("order:o2", "order"): {"source_key": "o2"},
        ("order:o3", "order"): {"source_key": "o3"}, ("order:o4", "order"): {"source_key": "o4"},
        ("customer:c1", "customer"): {"source_key": "c1", "name": "Ann"},
        ("customer:c2", "customer"): {"source_key": "c2", "name": "Bob"}}
    assert sorted(events.values()) == [
        ("Pay", "01-01 12:00"), ("Pay", "01-05 09:00"), ("Pay", "01-06 09:00"),
        ("Place", "01-01 10:00"), ("Place", "01-02 10:00"), ("Place", "01-03 10:00")]
    assert e2o == {
        (("Place", "01-01 10:00"), "order:o1", "order", "placed"),
        (("Place", "01-01 10:00"), "customer:c1", "customer", "by"),
        (("Place", "01-02 10:00"), "order:o2", "order", "placed"),
        (("Place", "01-02 10:00"), "customer:c2", "customer", "by"),
        (("Place", "01-03 10:00"), "order:o3", "order", "placed"),
        (("Pay", "01-01 12:00"), "order:o1", "order", ""),
        (("Pay", "01-05 09:00"), "order:o2", "order", "")}
    assert o2o == {("order:o1", "customer:c1", "of"), ("order:o2", "customer:c2", "of"),
                   ("order:o4", "customer:c1", "of")}
    assert changes == [("customer:c1", "02-01", "city", "Lyon")]

    assert set(rejects) == {
        ("object type customer", "null object id"), ("Place", "unparseable timestamp"),
        ("e2o Place", "null object id"), ("e2o Pay", "null object id"),
        ("object relation #1 (order -> customer)", "null object id"),
        ("object type 'customer': change #1", "unknown object")}
    assert json.loads(rejects[("Place", "unparseable timestamp")]) == {
        "activity": "Place", "timestamp_raw": "not a time",
        "objs": [{"type": "order", "id": "order:o4", "qualifier": "placed", "key": "o4"},
                 {"type": "customer", "id": "customer:c1", "qualifier": "by", "key": "c1"}]}
    assert json.loads(rejects[("object type 'customer': change #1", "unknown object")]) == {
        "key": "c9", "ocel_type": "customer", "time_raw": "2024-02-02 00:00:00",
        "ocel_changed_field": "city", "value": "Paris"}

    s = c.stats
    assert s.inputs == {"object_rows": 7, "event_rows": 7, "e2o_relations": 9,
                        "o2o_relations": 4, "object_changes": 2}
    assert s.outputs == {"events": 6, "objects": 6, "e2o": 7, "o2o": 3, "object_changes": 1}
    assert s.total_rejects == 6
    assert s.notes == ["left out of the log (reasons in ocel_rejects): 1 objects, 1 events, "
                       "2 event-object relations, 1 object-object relations, "
                       "1 attribute changes"]
    assert s.counts["objects_by_type"] == {"order": 4, "customer": 2}
    assert s.counts["event_types"] == 2
    assert s.counts["flattened"] == {"order": {"cases": 3, "events": 5, "dfg_arcs": 1},
                                     "customer": {"cases": 2, "events": 2, "dfg_arcs": 0}}
    assert s.counts["cases"] == 3

    # the order type's flattened view: o1 and o2 placed then paid, o3 only placed
    assert flat_cases == ["o1", "o1", "o2", "o2", "o3"]
    dfg = order.small["dfg"]
    assert [(r.source, r.target, r.frequency, r.mean_s) for r in dfg.itertuples()] == [
        ("Place", "Pay", 2, (2 * 3600 + 71 * 3600) / 2)]
    assert order.small["activities"].set_index("activity")[["events", "cases"]].to_dict(
        "index") == {"Place": {"events": 3, "cases": 3}, "Pay": {"events": 2, "cases": 2}}
    assert variants == [('["Place","Pay"]', 2, 2 / 3, (2 * 3600 + 71 * 3600) / 2),
                        ('["Place"]', 1, 1 / 3, 0.0)]
    assert c.views["customer"].events is None  # released: only the case type's log is kept
    # the counts come from one aggregation: they are those of the tables and the rejects
    assert {(src, r): n for src, by in s.rejects.items() for r, n in by.items()} == \
        reject_counts
    assert s.counts["objects_by_type"] == by_type
    # every type's views, computed for all the types at once, are its classic views
    for otype, (dfg_t, acts_t, variants_t) in per_type.items():
        tv = c.views[otype]
        pd.testing.assert_frame_equal(tv.small["dfg"], dfg_t, check_dtype=False)
        pd.testing.assert_frame_equal(tv.small["activities"], acts_t, check_dtype=False)
        assert [tuple(r) for r in tv.variants.collect()] == variants_t, otype
    assert "Place" in c.map_dot and "order: 2" in c.map_dot


def _computed(spark, stack, mode):
    """compute on the inline frames, with the sources kept before planning as the job does."""
    mapping = parse_ocel_mapping(yaml.safe_load(MAPPING))
    keep = Keeper(stack, mode)
    planned = plan_from(given_frames(_frames(spark), mapping, shared_keep(mapping, keep)),
                        mapping, shared_kept=True)
    return compute(planned, stack, input_name="inline", keep=keep)


def _sortable(df):
    """``df`` with its map, array and struct columns as JSON (rows sortable to compare)."""
    return df.select(*[F.to_json(f.name).alias(f.name)
                       if isinstance(f.dataType, (T.MapType, T.ArrayType, T.StructType))
                       else F.col(f.name) for f in df.schema.fields])


def test_local_checkpoints_give_the_tables_and_views_that_caching_gives(spark):
    before = cached_storage_bytes(spark)
    with ExitStack() as stack:
        cached = _computed(spark, stack, None)  # the session's mode: cache
        cut = _computed(spark, stack, LOCAL_CHECKPOINT)
        for name in ("events", "objects", "e2o", "o2o", "changes", "rejects"):
            a, b = getattr(cached.tables, name), getattr(cut.tables, name)
            assert_df_equality(_sortable(b), _sortable(a), ignore_row_order=True,
                               ignore_nullable=True)
        for otype, tv in cached.views.items():
            for view, table in tv.small.items():
                pd.testing.assert_frame_equal(cut.views[otype].small[view], table)
            assert_df_equality(cut.views[otype].variants, tv.variants)
        assert cut.stats.counts == cached.stats.counts
        assert cut.stats.rejects == cached.stats.rejects
        levels = {c["name"]: c["level"] for c in cut.stats.cached}
        assert levels["source orders"] == levels["ocel_event_rows"] == "LOCAL_CHECKPOINT"
        assert {c["level"] for c in cached.stats.cached} == {"MEMORY_AND_DISK_DESER"}
        assert [c["name"] for c in cut.stats.cached] == [c["name"] for c in cached.stats.cached]
    # both runs' frames, cached or checkpointed, are dropped with the stack
    assert cached_storage_bytes(spark) == before
