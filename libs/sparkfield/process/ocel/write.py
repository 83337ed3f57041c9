"""OCEL 2.0 files: ``ocel.json`` (JSON-OCEL 2.0) and ``ocel.sqlite`` (SQLite-OCEL 2.0).

ocel.json is written by the executors: every object and every event becomes one JSON text line
in Spark, the parts are written in order and concatenated with the header (the object and
event types, small) into one file, so the log is never collected. Events are listed in event
order (``schema.ORDER``: timestamp, mapping order, source row, activity), which is how readers
order events with equal timestamps.

ocel.sqlite must be one database file written by one process: the driver streams the tables
partition by partition (``toLocalIterator``: one partition in memory at a time) into a local
SQLite file, then copies it into the output. SQLite has no event order beyond ``ocel_time``:
readers order equal timestamps by table position (pm4py: per event-type table).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import tempfile
import uuid
from collections.abc import Iterable
from contextlib import closing
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from sparkfield.core.io import append_parts, hadoop_fs
from sparkfield.process.ocel.build import (
    E2O_EVENT,
    E2O_OBJECT,
    EID,
    OID,
    OTYPE,
    QUAL,
    SOURCE_KEY,
    TYPE_INDEX,
    OcelTables,
)
from sparkfield.process.ocel.mapping import OcelMapping
from sparkfield.process.schema import ACTIVITY, ATTRIBUTES, ORDER, TIMESTAMP

ISO = "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"
EPOCH = "1970-01-01T00:00:00Z"  # the time of an object attribute's initial value


@dataclass(frozen=True)
class Types:
    """Event types (activity -> attribute names) and object types (type -> attribute names),
    in the order they are written."""

    events: dict[str, list[str]]
    objects: dict[str, list[str]]


def log_types(tables: OcelTables, mapping: OcelMapping,
              present: Iterable[tuple[str, int]] | None = None) -> Types:
    """The attribute names per type: from the mapping, for the event types present (an
    activity given by an expression is known only from the data). ``present``: the
    (activity, src_order) pairs of the events when already known (the validation's tally),
    else a small distinct of the events."""
    if present is None:
        present = [(r[ACTIVITY], r["src_order"]) for r in
                   tables.events.select(ACTIVITY, "src_order").distinct().collect()]
    by_index = {a.index: list(a.attributes) for a in mapping.activities}
    events: dict[str, list[str]] = {}
    for activity, src_order in sorted(set(present)):
        names = events.setdefault(activity, [])
        names.extend(n for n in by_index[src_order] if n not in names)
    objects = {}
    for t in mapping.objects.values():
        names = [SOURCE_KEY, *t.attributes]
        for c in t.changes:
            names.extend(n for n in c.attributes if n not in names)
        objects[t.name] = names
    return Types(events=events, objects=objects)


def _time(col: Column | str) -> Column:
    return F.date_format(col, ISO)


def _rels(df: DataFrame, key: str, target: str) -> DataFrame:
    return df.groupBy(key).agg(F.sort_array(F.collect_list(F.struct(
        F.col(target).alias("objectId"), F.col(QUAL).alias("qualifier")))).alias("rels"))


def object_lines(tables: OcelTables) -> DataFrame:
    """One JSON text per object, in (type order, id) order: ``line``."""
    changes = tables.changes.groupBy(OID).agg(F.sort_array(F.collect_list(F.struct(
        F.col("ocel_time").alias("t"), F.col("ocel_changed_field").alias("name"),
        F.col("value")))).alias("ch"))
    o2o = _rels(tables.o2o, "ocel_source_id", "ocel_target_id").withColumnRenamed(
        "ocel_source_id", OID)
    base = F.transform(F.map_entries(F.coalesce(ATTRIBUTES, F.create_map().cast(
        "map<string,string>"))), lambda e: F.struct(
        e["key"].alias("name"), F.lit(EPOCH).alias("time"), e["value"].alias("value")))
    changed = F.transform(F.coalesce("ch", F.array().cast(
        "array<struct<t:timestamp,name:string,value:string>>")), lambda c: F.struct(
        c["name"].alias("name"), _time(c["t"]).alias("time"), c["value"].alias("value")))
    objs = tables.objects.join(changes, OID, "left").join(o2o, OID, "left")
    attrs = F.concat(F.array_sort(base), changed)
    doc = F.struct(F.col(OID).alias("id"), F.col(OTYPE).alias("type"),
                   F.when(F.size(attrs) > 0, attrs).alias("attributes"),
                   F.col("rels").alias("relationships"))
    return objs.orderBy(TYPE_INDEX, OID).select(F.to_json(doc).alias("line"))


def event_lines(tables: OcelTables) -> DataFrame:
    """One JSON text per event, in event order: ``line``."""
    e2o = _rels(tables.e2o, E2O_EVENT, E2O_OBJECT).withColumnRenamed(E2O_EVENT, EID)
    attrs = F.array_sort(F.transform(F.map_entries(F.coalesce(ATTRIBUTES, F.create_map().cast(
        "map<string,string>"))), lambda e: F.struct(e["key"].alias("name"),
                                                    e["value"].alias("value"))))
    doc = F.struct(F.col(EID).alias("id"), F.col(ACTIVITY).alias("type"),
                   _time(TIMESTAMP).alias("time"),
                   F.when(F.size(attrs) > 0, attrs).alias("attributes"),
                   F.col("rels").alias("relationships"))
    return tables.events.join(e2o, EID, "left").orderBy(*ORDER, EID).select(
        F.to_json(doc).alias("line"))


def _with_commas(lines: DataFrame) -> DataFrame:
    """JSON array elements: every line but the first ends the previous one with a comma."""
    first = lines.first()
    if first is None:
        return lines
    return lines.select(F.when(F.col("line") == F.lit(first["line"]), F.col("line"))
                        .otherwise(F.concat(F.lit(","), F.col("line"))).alias("line"))


def concat_pieces(spark: SparkSession, target: str, pieces: Iterable[str | DataFrame],
                  scratch: str) -> None:
    """Literal texts and DataFrames (one ``line`` column, already ordered, written by the
    executors) concatenated into one file."""
    tfs, jtarget = hadoop_fs(spark, target)
    out = tfs.create(jtarget, True)
    try:
        for i, piece in enumerate(pieces):
            if isinstance(piece, str):
                out.write(bytearray(piece.encode("utf-8")))
                continue
            parts = f"{scratch}/piece-{i}"
            piece.write.mode("overwrite").text(parts)
            append_parts(spark, parts, out)
    finally:
        out.close()
    fs, jscratch = hadoop_fs(spark, scratch)
    fs.delete(jscratch, True)


def write_json(spark: SparkSession, tables: OcelTables, types: Types, target: str) -> None:
    def described(kind: dict[str, list[str]]) -> list[dict]:
        return [{"name": n, "attributes": [{"name": a, "type": "string"} for a in attrs]}
                for n, attrs in kind.items()]

    head = ('{\n"objectTypes": ' + json.dumps(described(types.objects), ensure_ascii=False)
            + ',\n"eventTypes": ' + json.dumps(described(types.events), ensure_ascii=False)
            + ',\n"objects": [\n')
    concat_pieces(spark, target, [head, _with_commas(object_lines(tables)), '],\n"events": [\n',
                                  _with_commas(event_lines(tables)), "]\n}\n"],
                  f"{target}.__parts")


_STRIP = re.compile(r"[^0-9a-zA-Z]+")


def table_names(types: Iterable[str]) -> dict[str, str]:
    """SQLite-OCEL table suffixes: words capitalised, only letters and digits, made unique
    (case-insensitively) with a counter, as pm4py names them."""
    out: dict[str, str] = {}
    used: set[str] = set()
    for t in types:
        base = _STRIP.sub("", "".join(w.capitalize() for w in str(t).split(" ")))[:100] \
            or "Type"
        name, n = base, 2
        while name.casefold() in used:
            name, n = f"{base}_{n}", n + 1
        used.add(name.casefold())
        out[t] = name
    return out


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _stream(db: sqlite3.Connection, sql: str, rows: Iterable[tuple], batch: int = 20_000) -> None:
    buf: list[tuple] = []
    for r in rows:
        buf.append(r)
        if len(buf) >= batch:
            db.executemany(sql, buf)
            buf = []
    if buf:
        db.executemany(sql, buf)


def _sql_time(col: Column | str) -> Column:
    return F.date_format(col, "yyyy-MM-dd HH:mm:ss.SSSSSSxxx")


_POS = "_sparkfield_pos"


def bounded_partitions(df: DataFrame, rows: int | None, per: int = 250_000) -> DataFrame:
    """``df`` in partitions of about ``per`` rows, its rows in the same order: small
    partitions are merged (one job per chunk rather than per tiny partition), large ones split
    (a partition is what the driver holds at once). ``rows``: the row count, when known."""
    if rows is None:
        return df
    n = max(1, -(-rows // per))
    have = df.rdd.getNumPartitions()
    if have >= n:
        return df.coalesce(n)
    if rows <= per * have:
        return df
    return (df.withColumn(_POS, F.monotonically_increasing_id())  # the order as it is
            .repartitionByRange(n, _POS).sortWithinPartitions(_POS).drop(_POS))


def _chunks(df: DataFrame, rows: int | None) -> Iterable:
    """The rows of ``df`` on the driver, one bounded partition at a time."""
    return bounded_partitions(df, rows).toLocalIterator()


def write_sqlite(spark: SparkSession, tables: OcelTables, types: Types, target: str,
                 rows: dict[str, int] | None = None) -> None:
    """``rows``: the row counts of the cached tables (``ocel_events``, ...), when known."""
    fd, local = tempfile.mkstemp(prefix=f"sparkfield-{uuid.uuid4().hex[:8]}-", suffix=".sqlite")
    os.close(fd)
    try:
        with closing(sqlite3.connect(local)) as db:
            _fill(db, tables, types, rows or {})
            db.commit()
        fs, jtarget = hadoop_fs(spark, target)
        fs.copyFromLocalFile(False, True, spark.sparkContext._jvm.org.apache.hadoop.fs.Path(
            local), jtarget)
    finally:
        os.remove(local)


def _fill(db: sqlite3.Connection, tables: OcelTables, types: Types, rows: dict[str, int]
          ) -> None:
    """The SQLite-OCEL 2.0 tables, filled from ``tables``."""
    db.execute("PRAGMA journal_mode=OFF")
    db.execute("PRAGMA synchronous=OFF")
    etab = table_names(sorted(types.events))
    otab = table_names(sorted(types.objects))
    _create_tables(db, types, etab, otab)
    _insert_events(db, tables.events, types, etab, rows.get("ocel_events"))
    _stream(db, "INSERT INTO event_object VALUES (?, ?, ?)",
            (tuple(r) for r in _chunks(tables.e2o.select(E2O_EVENT, E2O_OBJECT, QUAL),
                                       rows.get("ocel_e2o"))))
    _stream(db, "INSERT INTO object_object VALUES (?, ?, ?)",
            (tuple(r) for r in _chunks(tables.o2o.select(
                "ocel_source_id", "ocel_target_id", QUAL), rows.get("ocel_o2o"))))
    inserts = _insert_statements(types.objects, otab, "object_", 3)
    _insert_objects(db, tables.objects, inserts, rows.get("ocel_objects"))
    _insert_changes(db, tables.changes, inserts, rows.get("ocel_changes"))


def _create_tables(db: sqlite3.Connection, types: Types, etab: dict[str, str],
                   otab: dict[str, str]) -> None:
    db.execute("CREATE TABLE event (ocel_id TEXT PRIMARY KEY, ocel_type TEXT)")
    db.execute("CREATE TABLE object (ocel_id TEXT PRIMARY KEY, ocel_type TEXT)")
    db.execute("CREATE TABLE event_map_type (ocel_type TEXT, ocel_type_map TEXT)")
    db.execute("CREATE TABLE object_map_type (ocel_type TEXT, ocel_type_map TEXT)")
    db.execute("CREATE TABLE event_object (ocel_event_id TEXT, ocel_object_id TEXT, "
               "ocel_qualifier TEXT, PRIMARY KEY (ocel_event_id, ocel_object_id, "
               "ocel_qualifier))")
    db.execute("CREATE TABLE object_object (ocel_source_id TEXT, ocel_target_id TEXT, "
               "ocel_qualifier TEXT, PRIMARY KEY (ocel_source_id, ocel_target_id, "
               "ocel_qualifier))")
    db.executemany("INSERT INTO event_map_type VALUES (?, ?)", sorted(etab.items()))
    db.executemany("INSERT INTO object_map_type VALUES (?, ?)", sorted(otab.items()))
    for t, attrs in types.events.items():
        cols = "".join(f", {_q(a)} TEXT" for a in attrs)
        db.execute(f"CREATE TABLE {_q('event_' + etab[t])} (ocel_id TEXT PRIMARY KEY, "
                   f"ocel_time TIMESTAMP{cols})")
    for t, attrs in types.objects.items():
        cols = "".join(f", {_q(a)} TEXT" for a in attrs)
        db.execute(f"CREATE TABLE {_q('object_' + otab[t])} (ocel_id TEXT, ocel_time "
                   f"TIMESTAMP, ocel_changed_field TEXT{cols})")


def _insert_statements(kinds: dict[str, list[str]], names: dict[str, str], prefix: str,
                       fixed: int) -> dict[str, tuple[str, list[str]]]:
    """Per type: the INSERT into its table (``fixed`` leading columns, then one per
    attribute) and its attribute names."""
    return {t: (f"INSERT INTO {_q(prefix + names[t])} VALUES "
                f"({', '.join('?' * (fixed + len(a)))})", a) for t, a in kinds.items()}


def _insert_events(db: sqlite3.Connection, events: DataFrame, types: Types,
                   etab: dict[str, str], rows: int | None) -> None:
    inserts = _insert_statements(types.events, etab, "event_", 2)
    ev = events.select(EID, ACTIVITY, _sql_time(TIMESTAMP).alias("t"), ATTRIBUTES)
    for r in _chunks(ev, rows):
        sql, attrs = inserts[r[ACTIVITY]]
        vals = r[ATTRIBUTES] or {}
        db.execute(sql, (r[EID], r["t"], *[vals.get(a) for a in attrs]))
        db.execute("INSERT INTO event VALUES (?, ?)", (r[EID], r[ACTIVITY]))


def _insert_objects(db: sqlite3.Connection, objects: DataFrame,
                    inserts: dict[str, tuple[str, list[str]]], rows: int | None) -> None:
    """Every object with its initial attribute values (at the epoch)."""
    for r in _chunks(objects, rows):
        sql, attrs = inserts[r[OTYPE]]
        vals = r[ATTRIBUTES] or {}
        db.execute(sql, (r[OID], "1970-01-01 00:00:00.000000+00:00", None,
                         *[vals.get(a) for a in attrs]))
        db.execute("INSERT INTO object VALUES (?, ?)", (r[OID], r[OTYPE]))


def _insert_changes(db: sqlite3.Connection, changes: DataFrame,
                    inserts: dict[str, tuple[str, list[str]]], rows: int | None) -> None:
    """One row per changed field, in the object type's table."""
    for r in _chunks(changes.select(OID, OTYPE, _sql_time("ocel_time").alias("t"),
                                    "ocel_changed_field", "value"), rows):
        sql, attrs = inserts[r[OTYPE]]
        db.execute(sql, (r[OID], r["t"], r["ocel_changed_field"],
                         *[r["value"] if a == r["ocel_changed_field"] else None
                           for a in attrs]))
