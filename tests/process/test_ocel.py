"""Object-centric event logs (OCEL 2.0): mapping errors, validation rejects, and the Olist
log end to end with pm4py as the oracle (both files load; per object type, pm4py's flattening
and DFG equal ocel_views/<type>/dfg.csv)."""

import json
import re
import sqlite3
import warnings
from zoneinfo import ZoneInfo

import pandas as pd
import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.core.conf import load_config
from sparkfield.process import run_event_log
from sparkfield.process.extraction.mapping import MappingError, load_mapping
from sparkfield.process.extraction.sources import compile_expr, expr_type, expr_types
from sparkfield.process.ocel.build import build, plan
from sparkfield.process.ocel.mapping import OcelMapping, parse_ocel_mapping

TYPES = ["order", "customer", "product", "seller"]


@pytest.fixture(scope="module")
def olist(spark, repo_root, tmp_path_factory, shared_data):
    out = tmp_path_factory.mktemp("ocel") / "out"
    cfg = load_config("event_log", "local", repo_root / "conf", {"job": {
        "mapping": str(repo_root / "conf/event_logs/olist_ocel.yaml"), "output": str(out)}})
    return run_event_log(spark, cfg), out


def _pm4py():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pm4py
    return pm4py


def test_outputs_and_object_counts_equal_distinct_source_ids(olist, shared_data):
    res, out = olist
    names = {p.name for p in out.iterdir()}
    assert {"ocel.json", "ocel.sqlite", "ocel_views", "ocel_map.dot", "ocel_map.svg",
            "ocel_rejects", "classic_log", "run_report.json"} <= names
    for t in TYPES:
        for f in ("dfg.csv", "variants.csv", "activities.csv"):
            assert (out / "ocel_views" / t / f).is_file()
    assert list(pd.read_csv(out / "ocel_views/order/dfg.csv").columns) == [
        "source", "target", "frequency", "mean_s", "median_s"]
    src = shared_data / "process_mining/olist/sample_4000_orders"
    want = {
        "order": pd.read_csv(src / "olist_orders_dataset.csv")["order_id"].nunique(),
        "customer": pd.read_csv(src / "olist_customers_dataset.csv")
        ["customer_unique_id"].nunique(),
        "product": pd.read_csv(src / "olist_products_dataset.csv")["product_id"].nunique(),
        "seller": pd.read_csv(src / "olist_order_items_dataset.csv")["seller_id"].nunique(),
    }
    rep = json.loads((out / "run_report.json").read_text())
    assert rep["counts"]["objects_by_type"] == want
    # one order was placed, approved and paid in the hour Sao Paulo's clocks showed twice
    # (2018-02-17 23:00-24:00): those three events are the only rejects, as pandas says
    local = {"ambiguous local time": 1}
    assert rep["rejects"] == {"Place order": local, "Approve order": local, "Payment": local}
    rejects = pd.read_parquet(out / "ocel_rejects")
    for r in rejects.itertuples():
        raw = json.loads(r.record)["timestamp_raw"]
        with pytest.raises(Exception) as info:  # pandas' AmbiguousTimeError
            pd.Timestamp(raw).tz_localize(ZoneInfo("America/Sao_Paulo"), ambiguous="raise")
        assert type(info.value).__name__ == "AmbiguousTimeError", raw
    svg = (out / "ocel_map.svg").read_text()
    assert "Ship item" in svg and "seller" in svg


def test_pm4py_flattening_dfg_equals_our_views_per_object_type(olist):
    res, out = olist
    pm4py = _pm4py()
    ocel = pm4py.read_ocel2_json(str(out / "ocel.json"))
    counts = ocel.objects["ocel:type"].value_counts().to_dict()
    rep = json.loads((out / "run_report.json").read_text())
    # pm4py drops objects that no event relates to (a seller or product known only through
    # object-to-object relations): every other object is loaded
    doc = json.loads((out / "ocel.json").read_text())
    related = {r["objectId"] for e in doc["events"] for r in e.get("relationships") or []}
    with_events = pd.Series([o["type"] for o in doc["objects"] if o["id"] in related])
    assert counts == with_events.value_counts().to_dict()
    assert len(doc["objects"]) == sum(rep["counts"]["objects_by_type"].values())
    assert len(ocel.events) == rep["outputs"]["events"]
    for t in TYPES:
        flat = pm4py.ocel_flattening(ocel, t)
        dfg, _, _ = pm4py.discover_dfg(flat)
        ours = pd.read_csv(out / "ocel_views" / t / "dfg.csv", keep_default_na=False)
        assert {(r.source, r.target): int(r.frequency) for r in ours.itertuples()} == \
            {k: int(v) for k, v in dfg.items()}, t
        acts = pd.read_csv(out / "ocel_views" / t / "activities.csv")
        assert acts["events"].sum() == len(flat)


def test_sqlite_holds_the_same_log(olist):
    res, out = olist
    pm4py = _pm4py()
    js = pm4py.read_ocel2_json(str(out / "ocel.json"))
    sq = pm4py.read_ocel2_sqlite(str(out / "ocel.sqlite"))

    def events(o):
        e = o.events[["ocel:eid", "ocel:activity", "ocel:timestamp"]].copy()
        e["ocel:timestamp"] = pd.to_datetime(e["ocel:timestamp"], utc=True)
        return e.sort_values("ocel:eid").reset_index(drop=True)

    pd.testing.assert_frame_equal(events(js), events(sq))
    rel = ["ocel:eid", "ocel:oid", "ocel:qualifier"]
    assert set(map(tuple, js.relations[rel].values)) == set(map(tuple, sq.relations[rel].values))
    obj = ["ocel:oid", "ocel:type"]
    assert set(map(tuple, js.objects[obj].values)) == set(map(tuple, sq.objects[obj].values))
    assert len(js.o2o) == len(sq.o2o) > 0
    # pm4py reads the first timed value of a JSON attribute as the initial one; count the
    # timed values in the file itself
    doc = json.loads((out / "ocel.json").read_text())
    timed = sum(1 for o in doc["objects"] for a in o.get("attributes", [])
                if not a["time"].startswith("1970-01-01T00:00:00"))
    rep = json.loads((out / "run_report.json").read_text())
    assert timed == len(sq.object_changes) == rep["outputs"]["object_changes"] > 0
    with sqlite3.connect(out / "ocel.sqlite") as db:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"event", "object", "event_object", "object_object", "event_map_type",
            "object_map_type", "event_PlaceOrder", "object_Order"} <= tables


def test_classic_log_for_the_case_object_type(olist):
    res, out = olist
    pm4py = _pm4py()
    log = pm4py.read_xes(str(out / "classic_log/event_log.xes.gz"), show_progress_bar=False)
    dfg, _, _ = pm4py.discover_dfg(log)
    ours = pd.read_csv(out / "ocel_views/order/dfg.csv")
    assert {(r.source, r.target): int(r.frequency) for r in ours.itertuples()} == \
        {k: int(v) for k, v in dfg.items()}
    assert log["case:concept:name"].nunique() == 4000


def _doc(tmp_path, **extra):
    (tmp_path / "orders.csv").write_text(
        "order_id,customer,placed\n"
        "o1,c1,2024-01-01 10:00:00\n"
        "o2,c2,2024-01-02 10:00:00\n"
        "o2,c2,2024-01-02 11:00:00\n"      # duplicate object id (and a second event)
        "o3,,2024-01-03 10:00:00\n"        # null customer: the relation is rejected
        "o4,c9,not a time\n")              # unknown customer c9, unparseable timestamp
    (tmp_path / "customers.csv").write_text("customer_id\nc1\nc2\n\n")
    doc = {
        "sources": {"orders": {"format": "csv", "path": str(tmp_path / "orders.csv")},
                    "customers": {"format": "csv", "path": str(tmp_path / "customers.csv")}},
        "objects": {"order": {"source": "orders", "id": "order_id"},
                    "customer": {"source": "customers", "id": "customer_id"}},
        "activities": [{"name": "Place", "source": "orders", "timestamp": "placed",
                        "objects": [{"type": "order", "id": "order_id", "qualifier": "o"},
                                    {"type": "customer", "id": "customer", "qualifier": "c"}]}],
        "object_relations": [{"source": "orders", "from": {"type": "order", "id": "order_id"},
                              "to": {"type": "customer", "id": "customer"}}],
    }
    doc.update(extra)
    return doc


def test_validation_rules_become_rejects_with_reasons(spark, tmp_path):
    t = build(spark, parse_ocel_mapping(_doc(tmp_path)))
    rejects = {(r.source, r.reason) for r in t.rejects.collect()}
    assert ("object type order", "duplicate object id") in rejects
    assert ("Place", "unparseable timestamp") in rejects
    assert ("e2o Place", "null object id") in rejects
    assert any(r == "null object id" for s, r in rejects if s.startswith("object relation"))
    assert {r.ocel_id for r in t.objects.collect()} == {
        "order:o1", "order:o2", "order:o3", "order:o4", "customer:c1", "customer:c2"}
    assert t.events.count() == 4
    e2o = {(r.ocel_object_id, r.ocel_type) for r in t.e2o.collect()}
    assert ("customer:c1", "customer") in e2o and all(o != "customer:c9" for o, _ in e2o)
    # every relation names an existing event and object
    assert t.e2o.join(t.events, t.e2o.ocel_event_id == t.events.ocel_id, "left_anti").count() \
        == 0


def test_unknown_object_is_rejected(spark, tmp_path):
    doc = _doc(tmp_path)
    (tmp_path / "orders.csv").write_text("order_id,customer,placed\no1,c9,2024-01-01\n")
    t = build(spark, parse_ocel_mapping(doc))
    assert {(r.source, r.reason) for r in t.rejects.collect()} == {
        ("e2o Place", "unknown object"), ("object relation #1 (order -> customer)",
                                          "unknown target object")}


@pytest.mark.parametrize("change, message", [
    (lambda d: d["activities"][0]["objects"].append({"type": "shop", "id": "x"}),
     "activity #1 (Place): objects #3: unknown object type 'shop'"),
    (lambda d: d["activities"][0].update(case_id="order_id"), "not to a 'case_id'"),
    (lambda d: d["objects"]["order"].pop("id"), "object type 'order': missing 'id'"),
    (lambda d: d["object_relations"][0]["to"].update(type="x"),
     "object relation #1: to: unknown object type 'x'"),
    (lambda d: d.update(case_object_type="nope"), "case_object_type: unknown object type"),
])
def test_mapping_errors_name_the_place(tmp_path, change, message):
    doc = _doc(tmp_path)
    change(doc)
    with pytest.raises(MappingError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_ocel_mapping(doc)


@pytest.mark.parametrize("change, message", [
    (lambda d: d["activities"][0]["objects"][1].update(id="no_such_column"),
     "activity 'Place': objects #2 (customer) id expression 'no_such_column'"),
    (lambda d: d["activities"][0].update(where="order_id"),
     "activity 'Place': where expression 'order_id' gives string, not a boolean"),
    # the entry's expressions are typed together; when they fail together (an aggregate
    # beside a column), each is checked alone and the one at fault named
    (lambda d: d["objects"]["order"].update(id="max(order_id)", attributes={"a": "nope"}),
     "object type 'order': attribute a expression 'nope'"),
    (lambda d: d["objects"]["customer"].update(attributes={"n": "customer_id +"}),
     "object type 'customer': attribute n expression 'customer_id +'"),
    (lambda d: d["object_relations"][0]["to"].update(id="upper(nope)"),
     "to id expression 'upper(nope)'"),
])
def test_bad_expression_is_reported_before_data_is_read(spark, tmp_path, change, message):
    doc = _doc(tmp_path)
    change(doc)
    with pytest.raises(MappingError, match=re.escape(message)):
        plan(spark, parse_ocel_mapping(doc))


def test_expressions_are_typed_together_and_alone_alike(spark):
    df = spark.createDataFrame([("a", 1, None)], "s string, n int, t timestamp")
    texts = ["s", "n + 1", "t IS NULL", None, "n + 1", "concat(s, n)"]
    together = expr_types(df, texts)
    assert list(together) == ["s", "n + 1", "t IS NULL", "concat(s, n)"]
    assert together == {t: expr_type(df, t, "x", "y") for t in together}
    assert expr_types(df, ["s", "no_such"]) == {}  # left to each expression's own check
    assert expr_types(df, ["max(n)", "s"]) == {}  # alone each would do
    assert expr_types(df, []) == {}
    # a type given is the one checked: no analysis of its own
    with pytest.raises(MappingError, match="gives int, not a boolean"):
        compile_expr(df, "t IS NULL", "x", "where", boolean=True,
                     types={"t IS NULL": T.IntegerType()})


def test_sap_vbfa_mapping_plans_and_counts_documents(spark, repo_root, shared_data):
    m = load_mapping(repo_root / "conf/event_logs/sap_o2c_ocel.yaml")
    assert isinstance(m, OcelMapping) and m.case_object_type == "sales order"
    t = build(spark, m)
    vbfa = pd.read_csv(shared_data / "process_mining/sap_o2c/VBFA.csv.gz", dtype=str)
    got = {r["ocel_type"]: r["count"] for r in t.objects.groupBy("ocel_type").count().collect()}
    assert got == {
        "sales order": vbfa.loc[vbfa.VBTYP_V == "C", "VBELV"].nunique(),
        "delivery": vbfa.loc[vbfa.VBTYP_N == "J", "VBELN"].nunique(),
        "invoice": vbfa.loc[vbfa.VBTYP_N.isin(["M", "N"]), "VBELN"].nunique(),
    }


def test_the_classic_log_is_exported_in_the_formats_asked(spark, repo_root, tmp_path):
    import yaml

    mapping = tmp_path / "ocel.yaml"
    mapping.write_text(yaml.safe_dump(_doc(tmp_path, case_object_type="order")))
    out = tmp_path / "out"
    cfg = load_config("event_log", "local", repo_root / "conf", {"job": {
        "mapping": str(mapping), "output": str(out), "exports": "xes"}})
    run_event_log(spark, cfg)
    classic = out / "classic_log"
    assert (classic / "dfg.csv").exists()
    assert sorted(p.name for p in classic.glob("event_log.*")) == ["event_log.xes.gz"]


def test_times_of_every_entry_are_zoned_by_their_own_type_and_format(spark, tmp_path):
    """Each activity and change reads its time by its own type and format; the zone's rules
    (Berlin: 02:30 skipped on 2024-03-31, shown twice on 2024-10-27) reject what it skips or
    repeats, in events and changes alike, and give the others pandas' instants."""
    (tmp_path / "orders.csv").write_text(
        "order_id,placed,shipped\n"
        "o1,2024-03-31 01:30:00,31/03/2024 03:30\n"
        "o2,2024-03-31 02:30:00,27/10/2024 02:30\n"   # placed: skipped; shipped: twice
        "o3,2024-10-27T03:30:00+01:00,28/10/2024 09:00\n")  # an offset of its own
    (tmp_path / "moves.csv").write_text(
        "order_id,at,status\no1,2024-03-31 02:15:00,late\no3,2024-06-01 12:00:00,ok\n")
    doc = {
        "sources": {n: {"format": "csv", "path": str(tmp_path / f"{n}.csv")}
                    for n in ("orders", "moves")},
        "timezone": "Europe/Berlin",
        "objects": {"order": {"source": "orders", "id": "order_id", "changes": [
            {"source": "moves", "id": "order_id", "timestamp": "at",
             "attributes": ["status"]}]}},
        "activities": [
            {"name": "Place", "source": "orders", "timestamp": "placed",
             "objects": [{"type": "order", "id": "order_id"}]},
            {"name": "Ship", "source": "orders", "timestamp": "shipped",
             "timestamp_format": "dd/MM/yyyy HH:mm",
             "objects": [{"type": "order", "id": "order_id"}]}],
    }
    t = build(spark, parse_ocel_mapping(doc))
    rejects = sorted((r.source, r.reason) for r in t.rejects.collect())
    assert rejects == [("Place", "nonexistent local time"), ("Ship", "ambiguous local time"),
                       ("object type 'order': change #1", "nonexistent local time")]
    berlin = ZoneInfo("Europe/Berlin")

    def instant(text: str, fmt: str | None = None) -> pd.Timestamp:
        ts = pd.to_datetime(text, format=fmt)
        return (ts if ts.tzinfo else ts.tz_localize(berlin)).tz_convert("UTC")

    def micros(ts: pd.Timestamp) -> int:  # instants compared whatever this machine's zone
        return ts.value // 1000

    got = {tuple(r) for r in t.events.select("activity", F.unix_micros("timestamp")).collect()}
    assert got == {("Place", micros(instant("2024-03-31 01:30:00"))),
                   ("Place", micros(instant("2024-10-27T03:30:00+01:00"))),
                   ("Ship", micros(instant("31/03/2024 03:30", "%d/%m/%Y %H:%M"))),
                   ("Ship", micros(instant("28/10/2024 09:00", "%d/%m/%Y %H:%M")))}
    changes = [tuple(r) for r in t.changes.select(
        "ocel_id", F.unix_micros("ocel_time"), "value").collect()]
    assert changes == [("order:o3", micros(instant("2024-06-01 12:00:00")), "ok")]
