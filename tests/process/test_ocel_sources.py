"""Object-centric logs from source tables as real databases keep them: integer keys that every
table numbers from 1, quoted line breaks in CSV fields, rows with the wrong number of fields.
No object or relation is lost to a key shared by two types; what is left out is a counted
reject, counts toward ``max_reject_fraction`` and is named on the console."""

import json
import re
import warnings

import pandas as pd
import pytest

from sparkfield.core.conf import load_config
from sparkfield.process import run_event_log
from sparkfield.process.analysis import process_map
from sparkfield.process.ocel.build import build
from sparkfield.process.ocel.mapping import parse_ocel_mapping
from sparkfield.process.ocel.views import flatten

EMPLOYEES = ('EmployeeID,LastName,Address,City\n'
             '1,Davolio,"507 - 20th Ave. E.\nApt. 2A",Seattle\n'
             '2,Fuller,"908 W. Capital Way",Tacoma\n'
             '3,Leverling,"722 Moss Bay Blvd., ""Suite"" 4",Kirkland\n')
SHIPPERS = "ShipperID,CompanyName\n1,Speedy Express\n2,United Package\n3,Federal Shipping\n"
PRODUCTS = "ProductID,ProductName\n1,Chai\n2,Chang\n3,Aniseed Syrup\n"
ORDERS = ("OrderID,EmployeeID,ShipVia,OrderDate,ShippedDate\n"
          "1,1,2,2024-01-01 10:00:00,2024-01-03 10:00:00\n"
          "2,3,1,2024-01-02 10:00:00,2024-01-05 09:00:00\n"
          "3,2,3,2024-01-02 11:00:00,\n")
DETAILS = "OrderID,ProductID,Quantity\n1,1,12\n1,2,10\n2,3,5\n3,1,3\n3,3,1\n"


def _tables(tmp_path, **override):
    for name, text in {"employees": EMPLOYEES, "shippers": SHIPPERS, "products": PRODUCTS,
                       "orders": ORDERS, "details": DETAILS, **override}.items():
        (tmp_path / f"{name}.csv").write_text(text)


def _doc(tmp_path, employee_options=None):
    def src(name, **options):
        return {"format": "csv", "path": str(tmp_path / f"{name}.csv"),
                **({"options": options} if options else {})}

    return {
        "sources": {"orders": src("orders"), "details": src("details"), "shippers": src("shippers"),
                    "products": src("products"),
                    "employees": src("employees", **(employee_options or {}))},
        "objects": {
            "order": {"source": "orders", "id": "OrderID"},
            "employee": {"source": "employees", "id": "EmployeeID",
                         "attributes": ["LastName", "Address"]},
            "shipper": {"source": "shippers", "id": "ShipperID", "attributes": ["CompanyName"]},
            "product": {"source": "products", "id": "ProductID", "attributes": ["ProductName"]},
        },
        "activities": [
            {"name": "Place order", "source": "orders", "timestamp": "OrderDate",
             "objects": [{"type": "order", "id": "OrderID"},
                         {"type": "employee", "id": "EmployeeID", "qualifier": "taken by"}]},
            {"name": "Ship order", "source": "orders", "timestamp": "ShippedDate",
             "where": "ShippedDate IS NOT NULL",
             "objects": [{"type": "order", "id": "OrderID"},
                         {"type": "shipper", "id": "ShipVia", "qualifier": "ship via"}]},
        ],
        "object_relations": [{"source": "details", "qualifier": "contains",
                              "from": {"type": "order", "id": "OrderID"},
                              "to": {"type": "product", "id": "ProductID"}}],
        "case_object_type": "order",
    }


def test_integer_keys_shared_by_every_table_lose_no_object_or_relation(spark, tmp_path):
    _tables(tmp_path)
    t = build(spark, parse_ocel_mapping(_doc(tmp_path)))
    assert t.rejects.count() == 0
    objects = {(r.ocel_id, r.ocel_type): r.attributes for r in t.objects.collect()}
    assert sorted(objects) == sorted(
        (f"{typ}:{k}", typ) for typ in ("order", "employee", "shipper", "product")
        for k in (1, 2, 3))
    # the source key is kept as an attribute, and quoted line breaks stay in their field
    assert objects[("employee:1", "employee")] == {
        "source_key": "1", "LastName": "Davolio", "Address": "507 - 20th Ave. E.\nApt. 2A"}
    assert objects[("employee:3", "employee")]["Address"] == '722 Moss Bay Blvd., "Suite" 4'
    assert t.e2o.count() == 10  # 5 events, each with its order and one other object
    e2o = {(r.ocel_object_id, r.ocel_type, r.ocel_qualifier) for r in t.e2o.collect()}
    assert {o for o, typ, _ in e2o if typ == "shipper"} == {"shipper:2", "shipper:1"}
    assert {(r.ocel_source_id, r.ocel_target_id) for r in t.o2o.collect()} == {
        ("order:1", "product:1"), ("order:1", "product:2"), ("order:2", "product:3"),
        ("order:3", "product:1"), ("order:3", "product:3")}
    # a flattened log's cases are the source keys of its type
    cases = {r.case_id for r in flatten(t, "order").select("case_id").distinct().collect()}
    assert cases == {"1", "2", "3"}


def test_the_written_log_holds_every_object_for_pm4py(spark, repo_root, tmp_path):
    _tables(tmp_path)
    (tmp_path / "mapping.json").write_text(json.dumps(_doc(tmp_path)))
    out = tmp_path / "out"
    cfg = load_config("event_log", "local", repo_root / "conf", {"job": {
        "mapping": str(tmp_path / "mapping.json"), "output": str(out),
        "max_reject_fraction": 0.0}})
    res = run_event_log(spark, cfg)
    assert res.report.status == "ok" and res.report.total_rejects == 0
    assert not [n for n in res.report.notes if "left out" in n]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pm4py
    doc = json.loads((out / "ocel.json").read_text())
    assert pd.Series([o["type"] for o in doc["objects"]]).value_counts().to_dict() == {
        "order": 3, "employee": 3, "shipper": 3, "product": 3}
    assert sum(len(o.get("relationships", [])) for o in doc["objects"]) == 5
    # pm4py keeps the objects that take part in events: every one of them is there
    ocel = pm4py.read_ocel2_json(str(out / "ocel.json"))
    assert sorted(ocel.objects["ocel:oid"]) == [
        "employee:1", "employee:2", "employee:3", "order:1", "order:2", "order:3",
        "shipper:1", "shipper:2"]
    assert len(ocel.relations) == 10
    classic = pd.read_csv(out / "classic_log" / "event_log.csv.gz")
    assert sorted(classic["case_id"].astype(str).unique()) == ["1", "2", "3"]


def test_lost_objects_and_relations_are_rejects_that_count_and_are_named(spark, repo_root,
                                                                         tmp_path, capsys):
    _tables(tmp_path, products=PRODUCTS + "1,Chai Tea\n",  # one key, two products
            orders=ORDERS + "4,9,7,2024-01-03 10:00:00,2024-01-04 10:00:00\n")
    (tmp_path / "mapping.json").write_text(json.dumps(_doc(tmp_path)))
    cfg = load_config("event_log", "local", repo_root / "conf", {"job": {
        "mapping": str(tmp_path / "mapping.json"), "output": str(tmp_path / "out"),
        "max_reject_fraction": 0.05}})
    res = run_event_log(spark, cfg)
    rejects = res.report.rejects
    assert rejects["object type product"] == {"duplicate object id": 1}
    assert rejects["e2o Place order"] == {"unknown object": 1}  # employee 9
    assert rejects["e2o Ship order"] == {"unknown object": 1}  # shipper 7
    # 3 rejects of 40 rows read: above 5 %
    assert res.report.inputs == {"object_rows": 14, "event_rows": 7, "e2o_relations": 14,
                                 "o2o_relations": 5, "object_changes": 0}
    assert res.report.status == "too_many_rejects"
    lost = [n for n in res.report.notes if n.startswith("left out of the log")]
    assert lost == ["left out of the log (reasons in ocel_rejects): 1 objects, "
                    "2 event-object relations"]
    assert "note: left out of the log" in res.report.summary()


def test_rows_with_the_wrong_number_of_fields_are_rejected_not_made_objects(spark, tmp_path):
    _tables(tmp_path, employees=EMPLOYEES + "4,Peacock,4110 Old Redmond Rd.,Redmond,WA,x\n")
    t = build(spark, parse_ocel_mapping(_doc(tmp_path)))
    assert {(r.source, r.reason) for r in t.rejects.collect()} == {
        ("object type employee", "malformed row")}
    assert t.objects.where("ocel_type = 'employee'").count() == 3
    # without multiLine the quoted line break splits a row: both halves are rejected, no junk
    t = build(spark, parse_ocel_mapping(_doc(tmp_path, {"multiLine": "false"})))
    bad = [r for r in t.rejects.collect() if r.source == "object type employee"]
    assert len(bad) == 3 and {r.reason for r in bad} == {"malformed row"}
    names = {r.attributes.get("LastName") for r in t.objects.collect()
             if r.ocel_type == "employee"}
    assert names == {"Fuller", "Leverling"}


def test_without_graphviz_an_object_centric_run_keeps_its_outputs(spark, repo_root, tmp_path,
                                                                  monkeypatch):
    _tables(tmp_path)
    (tmp_path / "mapping.json").write_text(json.dumps(_doc(tmp_path)))
    monkeypatch.setattr(process_map.shutil, "which", lambda name: None)
    out = tmp_path / "out"
    cfg = load_config("event_log", "local", repo_root / "conf", {"job": {
        "mapping": str(tmp_path / "mapping.json"), "output": str(out)}})
    res = run_event_log(spark, cfg)
    names = {p.name for p in out.iterdir()}
    assert {"ocel.json", "ocel.sqlite", "ocel_map.dot", "ocel_views", "classic_log",
            "run_report.json"} <= names and "ocel_map.svg" not in names
    report = json.loads((out / "run_report.json").read_text())
    assert report["status"] == "ok"
    assert any(n.startswith("ocel_map.svg not written") and "apt-get install graphviz" in n
               for n in report["notes"])
    assert "note: ocel_map.svg not written" in res.report.summary()


@pytest.mark.parametrize("change, message", [
    (lambda d: d["objects"]["shipper"].update(attributes={"source_key": "CompanyName"}),
     "object type 'shipper': attribute 'source_key' is reserved"),
    (lambda d: d["objects"]["shipper"].update(changes=[{
        "timestamp": "'2024-01-01'", "attributes": {"source_key": "CompanyName"}}]),
     "object type 'shipper': attribute 'source_key' is reserved"),
    (lambda d: d["objects"].update({"ship:per": d["objects"].pop("shipper")}),
     "object type 'ship:per': an object type name cannot hold ':'"),
    *[(lambda d, bad=bad: d["objects"].update({bad: d["objects"].pop("shipper")}),
       re.escape(f"object type {bad!r}: an object type name is a folder name"))
      for bad in ("../../x", "a/b", "..", "a\\b", "tab\there")],
])
def test_names_that_would_make_ids_or_folders_ambiguous_are_refused(tmp_path, change, message):
    from sparkfield.process.extraction.mapping import MappingError

    doc = _doc(tmp_path)
    change(doc)
    with pytest.raises(MappingError, match=message):
        parse_ocel_mapping(doc)
