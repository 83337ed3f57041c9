"""Extraction semantics on tiny inline tables: mapping errors, rejects, ordering, sampling."""

from collections import Counter
from pathlib import Path

import pytest
import yaml
from chispa import assert_df_equality
from pyspark.sql import functions as F

from sparkfield.core.conf import load_config
from sparkfield.process import run_event_log
from sparkfield.process.extraction.extract import extract
from sparkfield.process.extraction.mapping import MappingError, load_mapping, parse_mapping

ORDERS = """order_id,placed,paid,amount
o1,2020-01-01 10:00:00,2020-01-01 10:05:00,5
o2,2020-01-02 09:00:00,2020-01-02 09:00:00,7
o3,,2020-01-03 09:00:00,1
,2020-01-04 09:00:00,2020-01-04 09:30:00,1
o5,yesterday,2020-01-05 09:00:00,1
o6,1850-01-01 00:00:00,2020-01-06 09:00:00,1
o1,2020-01-01 10:00:00,2020-01-01 10:05:00,5
o7,2020-01-07 08:00:00+02:00,,3
"""


def _mapping(tmp: Path, **extra) -> dict:
    (tmp / "orders.csv").write_text(ORDERS)
    (tmp / "empty.csv").write_text("order_id,at\n")
    doc = {
        "sources": {"orders": {"format": "csv", "path": str(tmp / "orders.csv")},
                    "empty": {"format": "csv", "path": str(tmp / "empty.csv")}},
        "timezone": "Europe/Paris",
        "timestamp_bounds": {"min": "2000-01-01", "max": "2030-01-01"},
        "activities": [
            {"name": "Placed", "source": "orders", "case_id": "order_id", "timestamp": "placed"},
            {"name": "Paid", "source": "orders", "case_id": "order_id", "timestamp": "paid",
             "attributes": ["amount"]},
            {"name": "Nothing", "source": "empty", "case_id": "order_id", "timestamp": "at"},
        ],
    }
    doc.update(extra)
    return doc


def _run(spark, repo_root, tmp_path, doc, **job):
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(doc))
    cfg = load_config("event_log", "local", repo_root / "conf",
                      {"job": {"mapping": str(path), "output": str(tmp_path / "out"),
                               "render_map": False, **job}})
    return run_event_log(spark, cfg)


def test_every_row_is_an_event_or_a_reject_with_its_reason(spark, repo_root, tmp_path):
    res = _run(spark, repo_root, tmp_path, _mapping(tmp_path))
    rep = res.report
    assert rep.inputs["rows"] == 16  # 8 rows x 2 activities, empty source adds none
    assert rep.outputs["events"] + rep.total_rejects == rep.inputs["rows"]
    assert rep.rejects == {
        "Placed": {"null timestamp": 1, "null case id": 1, "unparseable timestamp": 1,
                   "timestamp out of range": 1, "duplicate event": 1},
        "Paid": {"null case id": 1, "duplicate event": 1, "null timestamp": 1},
    }
    assert rep.counts["empty_sources"] == ["empty"]
    rejects = spark.read.parquet(str(tmp_path / "out" / "rejects"))
    assert rejects.count() == rep.total_rejects
    assert Counter(r.reason for r in rejects.collect())["duplicate event"] == 2
    events = spark.read.parquet(str(tmp_path / "out" / "events"))
    o7 = events.where("case_id = 'o7'").select("timestamp").first()[0]
    # an explicit offset wins over the mapping's time zone: 08:00+02:00 is 06:00 UTC
    assert o7.isoformat().startswith("2020-01-07T06:00")
    o1 = events.where("case_id = 'o1' AND activity = 'Placed'").select(
        F.date_format("timestamp", "HH:mm").alias("t")).first()["t"]
    assert o1 == "09:00"  # 10:00 in Paris is 09:00 UTC in winter


def test_equal_timestamps_follow_the_mapping_order(spark, repo_root, tmp_path):
    res = _run(spark, repo_root, tmp_path, _mapping(tmp_path))
    dfg = {(r.source, r.target): r.frequency for r in res.views["dfg"].itertuples()}
    # o2 is placed and paid in the same second: Placed comes first in the mapping
    assert dfg == {("Placed", "Paid"): 2}  # o1 and o2 have both events
    doc = _mapping(tmp_path)
    doc["activities"] = [doc["activities"][1], doc["activities"][0]]
    res = _run(spark, repo_root, tmp_path, doc)
    dfg = {(r.source, r.target): r.frequency for r in res.views["dfg"].itertuples()}
    assert dfg == {("Placed", "Paid"): 1, ("Paid", "Placed"): 1}


@pytest.mark.parametrize("change,message", [
    (lambda d: d["activities"][0].update(source="nope"), "unknown source 'nope'"),
    (lambda d: d["activities"][1].update(timestamp="paid_at"),
     "activity 'Paid': timestamp expression 'paid_at'"),
    (lambda d: d["activities"][0].update(case_id="order_id +* 1"),
     "activity 'Placed': case_id expression"),
    (lambda d: d["activities"][0].update(where="amount >>> 2"), "where expression"),
    (lambda d: d["sources"]["orders"].update(format="xlsx"), "format must be one of"),
    (lambda d: d["sources"].update(db={"format": "jdbc", "url": "jdbc:postgresql://x/y",
                                        "table": "t", "password": "hunter2"}),
     "credentials come only from the environment"),
])
def test_mapping_errors_name_the_place_before_any_work(spark, tmp_path, change, message):
    doc = _mapping(tmp_path)
    change(doc)
    with pytest.raises(MappingError, match=message):
        extract(spark, parse_mapping(doc))


def test_missing_credential_variable_is_named(spark, tmp_path, monkeypatch):
    monkeypatch.delenv("SF_TEST_PW", raising=False)
    doc = _mapping(tmp_path)
    doc["sources"]["db"] = {"format": "jdbc", "url": "jdbc:postgresql://127.0.0.1:1/x",
                            "table": "t", "password_env": "SF_TEST_PW"}
    with pytest.raises(MappingError, match="SF_TEST_PW"):
        extract(spark, parse_mapping(doc))


def test_sampling_takes_whole_cases(spark, repo_root, tmp_path, fixtures_dir):
    # the Olist mapping as shipped, on the 400-order sample in tests/fixtures/olist
    text = (repo_root / "conf/event_logs/olist_orders.yaml").read_text()
    text = text.replace("${SPARKFIELD_DATA:-../../../shared/data}/process_mining/olist/"
                        "sample_4000_orders", str(fixtures_dir / "olist"))
    assert "${SPARKFIELD_DATA" not in text
    (tmp_path / "olist.yaml").write_text(text)
    mapping = load_mapping(tmp_path / "olist.yaml")
    full = extract(spark, mapping).rows
    part = extract(spark, mapping, fraction=0.2, seed=3).rows
    per_full = full.groupBy("case_id").count()
    per_part = part.groupBy("case_id").count()
    n_full, n_part = per_full.count(), per_part.count()
    assert 0.15 * n_full < n_part < 0.25 * n_full
    joined = per_part.join(per_full.withColumnRenamed("count", "full"), "case_id")
    assert_df_equality(joined.select("case_id", "count"),
                       joined.select("case_id", F.col("full").alias("count")),
                       ignore_row_order=True, ignore_nullable=True)
