"""Mapping files are read as strictly as conf files: unknown keys (with the nearest valid one),
YAML alias bombs, time zones Spark would refuse and unset variables are errors, and the job
exits 2 with one line before any Spark work."""

from __future__ import annotations

import copy
import time
from pathlib import Path

import pytest
import yaml

from sparkfield.core.params import timezone_problem
from sparkfield.process.extraction.mapping import Mapping, MappingError, load_mapping, parse_mapping
from sparkfield.process.ocel.mapping import OcelMapping, parse_ocel_mapping
from tests.conftest import job_module

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "conf" / "event_logs").glob("*.yaml"))

CLASSIC = {
    "sources": {"orders": {"format": "csv", "path": "/data/orders.csv"}},
    "timezone": "Europe/Paris",
    "timestamp_bounds": {"min": "2000-01-01", "max": "2030-01-01"},
    "activities": [
        {"name": "Placed", "source": "orders", "case_id": "order_id", "timestamp": "placed",
         "where": "amount > 0", "attributes": ["amount"]},
    ],
}

OCEL = {
    "sources": {"orders": {"format": "csv", "path": "/data/orders.csv"},
                "reviews": {"format": "csv", "path": "/data/reviews.csv"}},
    "objects": {
        "order": {"source": "orders", "id": "order_id", "attributes": ["status"],
                  "changes": [{"source": "reviews", "id": "order_id", "timestamp": "at",
                               "attributes": ["score"]}]},
        "customer": {"source": "orders", "id": "customer_id"},
    },
    "activities": [{"name": "Place", "source": "orders", "timestamp": "placed",
                    "objects": [{"type": "order", "id": "order_id", "qualifier": "placed"}]}],
    "object_relations": [{"source": "orders", "from": {"type": "order", "id": "order_id"},
                          "to": {"type": "customer", "id": "customer_id"},
                          "qualifier": "placed by"}],
}


def _rename(path: tuple, old: str, new: str):
    """A change of a mapping document that renames key ``old`` at ``path`` to ``new``."""
    def change(doc: dict) -> None:
        node = doc
        for step in path:
            node = node[step]
        node[new] = node.pop(old)
    return change


def _write(tmp_path: Path, doc: dict | str, name: str = "m.yaml") -> Path:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
    return path


def _event_log(capsys, tmp_path: Path, mapping: Path) -> tuple[int, str]:
    code = job_module("event_log").main([
        "--conf-dir", str(ROOT / "conf"), "--mapping", str(mapping),
        "--output", str(tmp_path / "out")])
    return code, capsys.readouterr().err


def _one_error_line(code: int, err: str, tmp_path: Path) -> None:
    assert code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists()


# -- unknown keys ---------------------------------------------------------------------------

@pytest.mark.parametrize("change, message", [
    (_rename((), "timezone", "timezon"), "unknown key 'timezon' (did you mean 'timezone'?)"),
    (_rename(("sources", "orders"), "path", "pth"),
     "source 'orders': unknown key 'pth' (did you mean 'path'?)"),
    (_rename(("timestamp_bounds",), "max", "mx"),
     "timestamp_bounds: unknown key 'mx' (did you mean 'max'?)"),
    (_rename(("activities", 0), "where", "wehre"),
     "activity #1 (Placed): unknown key 'wehre' (did you mean 'where'?)"),
    (_rename(("activities", 0), "attributes", "atributes"),
     "activity #1 (Placed): unknown key 'atributes' (did you mean 'attributes'?)"),
    (_rename(("activities", 0), "timestamp", "timestmp"),
     "unknown key 'timestmp' (did you mean 'timestamp'?)"),
])
def test_classic_mapping_unknown_key_names_the_nearest(change, message):
    doc = copy.deepcopy(CLASSIC)
    change(doc)
    with pytest.raises(MappingError) as err:
        parse_mapping(doc)
    assert message in str(err.value)


@pytest.mark.parametrize("change, message", [
    (_rename((), "object_relations", "object_relation"),
     "unknown key 'object_relation' (did you mean 'object_relations'?)"),
    (_rename(("objects", "order"), "attributes", "atributes"),
     "object type 'order': unknown key 'atributes' (did you mean 'attributes'?)"),
    (_rename(("objects", "order", "changes", 0), "timestamp", "timestmp"),
     "object type 'order': change #1: unknown key 'timestmp' (did you mean 'timestamp'?)"),
    (_rename(("activities", 0), "objects", "object"),
     "activity #1 (Place): unknown key 'object' (did you mean 'objects'?)"),
    (_rename(("activities", 0, "objects", 0), "qualifier", "qualifer"),
     "activity #1 (Place): objects #1: unknown key 'qualifer' (did you mean 'qualifier'?)"),
    (_rename(("object_relations", 0), "qualifier", "qualifer"),
     "object relation #1: unknown key 'qualifer' (did you mean 'qualifier'?)"),
    (_rename(("object_relations", 0, "from"), "type", "typ"),
     "object relation #1: from: unknown key 'typ' (did you mean 'type'?)"),
    (_rename(("object_relations", 0, "to"), "id", "idd"),
     "object relation #1: to: unknown key 'idd' (did you mean 'id'?)"),
    (lambda d: d["activities"][0].update(resource="clerk"),
     "activity #1 (Place): 'resource' belongs to the classic form"),
    (lambda d: d["sources"]["orders"].update(opts={"header": "true"}),
     "source 'orders': unknown key 'opts' (did you mean 'options'?)"),
])
def test_ocel_mapping_unknown_key_names_the_nearest(change, message):
    doc = copy.deepcopy(OCEL)
    change(doc)
    with pytest.raises(MappingError) as err:
        parse_ocel_mapping(doc)
    assert message in str(err.value)


def test_every_unknown_key_of_an_entry_is_named():
    doc = copy.deepcopy(CLASSIC)
    doc["activities"][0]["wehre"] = doc["activities"][0].pop("where")
    doc["activities"][0]["resorce"] = "clerk"
    with pytest.raises(MappingError, match=r"unknown key 'wehre' \(did you mean 'where'\?\); "
                                           r"unknown key 'resorce' \(did you mean "
                                           r"'resource'\?\)"):
        parse_mapping(doc)


def test_a_misspelt_key_exits_2_before_spark(capsys, tmp_path):
    doc = copy.deepcopy(CLASSIC)
    doc["activities"][0]["wehre"] = doc["activities"][0].pop("where")
    code, err = _event_log(capsys, tmp_path, _write(tmp_path, doc))
    _one_error_line(code, err, tmp_path)
    assert "unknown key 'wehre' (did you mean 'where'?)" in err


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_shipped_mappings_load(path, monkeypatch):
    monkeypatch.delenv("SPARKFIELD_DATA", raising=False)
    mapping = load_mapping(path)
    assert isinstance(mapping, Mapping | OcelMapping)
    assert mapping.activities and mapping.sources
    assert timezone_problem(mapping.timezone) is None


# -- YAML aliases ---------------------------------------------------------------------------

# ten levels of ten aliases: 10**9 values once written out, a few hundred bytes of YAML
LEVELS = "[&a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol], " + ", ".join(
    f"&a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)) + "]"
BOMB = f"""
sources: {{o: {{format: csv, path: /x.csv}}}}
activities:
  - {{name: x, source: o, case_id: id, timestamp: ts, attributes: {{bomb: {LEVELS}}}}}
"""


def test_alias_bomb_is_refused_at_once(capsys, tmp_path):
    path = _write(tmp_path, BOMB)
    start = time.monotonic()
    with pytest.raises(MappingError, match="YAML aliases expand to more than"):
        load_mapping(path)
    assert time.monotonic() - start < 5
    code, err = _event_log(capsys, tmp_path, path)
    _one_error_line(code, err, tmp_path)
    assert "alias" in err


def test_an_alias_that_holds_itself_is_refused(tmp_path):
    text = yaml.safe_dump(CLASSIC) + "loop: &loop [*loop]\n"
    with pytest.raises(MappingError, match="alias refers to the value that holds it"):
        load_mapping(_write(tmp_path, text))


def test_shared_options_through_an_alias(tmp_path):
    text = """
sources:
  orders:  {format: csv, path: /data/orders.csv, options: &csv {header: "true", sep: ";"}}
  reviews: {format: csv, path: /data/reviews.csv, options: *csv}
activities:
  - {name: Placed, source: orders, case_id: id, timestamp: ts}
  - {name: Reviewed, source: reviews, case_id: id, timestamp: ts}
"""
    mapping = load_mapping(_write(tmp_path, text))
    assert mapping.sources["reviews"].options == {"header": "true", "sep": ";"}


# -- time zones -----------------------------------------------------------------------------

@pytest.mark.parametrize("zone", ["America/Sao_Paulo", "UTC", "+02:00", "-05:30", "Z",
                                  "GMT+2", "Europe/Berlin"])
def test_mapping_time_zones_spark_takes_are_kept(zone):
    assert parse_mapping({**CLASSIC, "timezone": zone}).timezone == zone
    assert parse_ocel_mapping({**OCEL, "timezone": zone}).timezone == zone


@pytest.mark.parametrize("zone, message", [
    ("Mars/Olympus", "timezone 'Mars/Olympus' is not a time zone"),
    ("America/SaoPaulo", "(did you mean 'America/Sao_Paulo'?)"),
    ("+25:00", "timezone '+25:00' is not a valid offset"),
    (120, "expected a time zone as text, got 120"),
])
def test_mapping_time_zone_spark_refuses_is_an_error(zone, message):
    for parse, doc in ((parse_mapping, CLASSIC), (parse_ocel_mapping, OCEL)):
        with pytest.raises(MappingError) as err:
            parse({**doc, "timezone": zone})
        assert message in str(err.value)


def test_a_bad_mapping_time_zone_exits_2_before_spark(capsys, tmp_path):
    code, err = _event_log(capsys, tmp_path,
                           _write(tmp_path, {**CLASSIC, "timezone": "Europe/Pariss"}))
    _one_error_line(code, err, tmp_path)
    assert "timezone 'Europe/Pariss' is not a time zone (did you mean 'Europe/Paris'?)" in err


def test_time_zones_agree_with_spark(spark):
    """What the check accepts Spark accepts, and what it refuses Spark refuses."""
    from pyspark.sql import functions as F

    for zone in ["America/Sao_Paulo", "UTC", "+02:00", "+2:00", "-0530", "GMT+2", "UT",
                 "EST", "PST", "Z", "Mars/Olympus", "+19:00", "europe/paris", "UTC+25"]:
        frame = spark.range(1).select(
            F.to_utc_timestamp(F.lit("2020-01-01 00:00:00"), zone).alias("t"))
        try:
            frame.collect()
            spark_takes = True
        except Exception:  # noqa: BLE001 (Spark's INVALID_TIMEZONE, whatever its class)
            spark_takes = False
        assert (timezone_problem(zone) is None) == spark_takes, zone


# -- environment variables ------------------------------------------------------------------

def test_unset_variable_in_a_path_is_named(monkeypatch):
    monkeypatch.delenv("SF_NO_SUCH_DIR", raising=False)
    doc = copy.deepcopy(CLASSIC)
    doc["sources"]["orders"]["path"] = "${SF_NO_SUCH_DIR}/orders.csv"
    with pytest.raises(MappingError, match=r"source 'orders': path: environment variable "
                                           r"SF_NO_SUCH_DIR is not set"):
        parse_mapping(doc)
    with pytest.raises(MappingError, match="SF_NO_SUCH_DIR"):
        parse_ocel_mapping({**OCEL, "sources": doc["sources"]})


def test_unset_variable_in_a_url_is_named(monkeypatch):
    monkeypatch.delenv("SF_DB_HOST", raising=False)
    doc = copy.deepcopy(CLASSIC)
    doc["sources"]["orders"] = {"format": "jdbc", "url": "jdbc:postgresql://${SF_DB_HOST}/x",
                                "table": "orders"}
    with pytest.raises(MappingError, match="source 'orders': url: environment variable "
                                           "SF_DB_HOST is not set"):
        parse_mapping(doc)


def test_variables_with_defaults_and_set_variables_still_expand(monkeypatch, tmp_path):
    monkeypatch.delenv("SF_NO_SUCH_DIR", raising=False)
    monkeypatch.setenv("SF_DB_HOST", "db.example:5432")
    doc = copy.deepcopy(CLASSIC)
    doc["sources"]["orders"]["path"] = "${SF_NO_SUCH_DIR:-/srv/data}/orders.csv"
    doc["sources"]["db"] = {"format": "jdbc", "url": "jdbc:postgresql://${SF_DB_HOST}/x",
                            "table": "t"}
    mapping = parse_mapping(doc)
    assert mapping.sources["orders"].path == "/srv/data/orders.csv"
    assert mapping.sources["db"].url == "jdbc:postgresql://db.example:5432/x"
    doc["sources"]["orders"]["path"] = "${SF_NO_SUCH_DIR:-data}/orders.csv"
    assert parse_mapping(doc, base=tmp_path).sources["orders"].path == \
        str((tmp_path / "data" / "orders.csv").resolve())


def test_an_unset_variable_exits_2_before_spark(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("SF_NO_SUCH_DIR", raising=False)
    doc = copy.deepcopy(CLASSIC)
    doc["sources"]["orders"]["path"] = "${SF_NO_SUCH_DIR}/orders.csv"
    code, err = _event_log(capsys, tmp_path, _write(tmp_path, doc))
    _one_error_line(code, err, tmp_path)
    assert "SF_NO_SUCH_DIR is not set" in err
