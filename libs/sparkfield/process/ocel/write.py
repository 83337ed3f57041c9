"""OCEL 2.0 files: ``ocel.json`` (JSON-OCEL 2.0) and ``ocel.sqlite`` (SQLite-OCEL 2.0).

ocel.json is written by the executors: every object and every event becomes one JSON text line
in Spark, the parts are written in order and concatenated with the header (the object and
event types, small) into one file, so the log is never collected; but for a table of one part
or less (see below), whose lines the driver collects and sorts itself (no sort's jobs).
Events are listed in event order (``schema.ORDER``: timestamp, mapping order, source row,
activity), which is how readers order events with equal timestamps.

ocel.sqlite must be one database file written by one process. The executors place the rows of
each table, sorted and cut into partitions of a bounded size, into small in-memory SQLite
databases (the parts); the driver receives the parts one at a time (``toLocalIterator``) and
appends their tables to a local SQLite file with ``INSERT ... SELECT``, in partition order,
then copies the file into the output. No Python runs per row on the driver, but for a table
of one part or less, which it places itself (no Python worker to start). SQLite has no
event order beyond ``ocel_time``: readers order equal timestamps by table position (pm4py:
per event-type table), so the event-type tables are written in event order too.

Why one module: the JSON and SQLite forms write the same tables with the same OCEL 2.0 type
mapping."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import tempfile
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.core.filesystem import hadoop_fs
from sparkfield.core.parts import append_parts
from sparkfield.core.workers import in_worker
from sparkfield.process.eventlog.schema import (
    ACTIVITY,
    ATTRIBUTES,
    ORDER,
    ROW_ORDER,
    SRC_ORDER,
    TIMESTAMP,
)
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


PART_ROWS = 100_000  # the default part size (event_log's sqlite_part_rows)
OBJECT_ORDER = (TYPE_INDEX, OID)
EVENT_ORDER = (*ORDER, EID)


def object_lines(tables: OcelTables) -> DataFrame:
    """One JSON text per object, ``line``, beside its place in the file
    (:data:`OBJECT_ORDER`: type order, id)."""
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
    return objs.select(*OBJECT_ORDER, F.to_json(doc).alias("line"))


def event_lines(tables: OcelTables) -> DataFrame:
    """One JSON text per event, ``line``, beside its place in the file
    (:data:`EVENT_ORDER`: event order)."""
    e2o = _rels(tables.e2o, E2O_EVENT, E2O_OBJECT).withColumnRenamed(E2O_EVENT, EID)
    attrs = F.array_sort(F.transform(F.map_entries(F.coalesce(ATTRIBUTES, F.create_map().cast(
        "map<string,string>"))), lambda e: F.struct(e["key"].alias("name"),
                                                    e["value"].alias("value"))))
    doc = F.struct(F.col(EID).alias("id"), F.col(ACTIVITY).alias("type"),
                   _time(TIMESTAMP).alias("time"),
                   F.when(F.size(attrs) > 0, attrs).alias("attributes"),
                   F.col("rels").alias("relationships"))
    return tables.events.join(e2o, EID, "left").select(*EVENT_ORDER,
                                                       F.to_json(doc).alias("line"))


def in_order(lines: DataFrame, key: tuple[str, ...], rows: int | None, per: int = PART_ROWS
             ) -> str | DataFrame:
    """The ``line`` column of ``lines`` in ``key`` order, as :func:`concat_pieces` takes it:
    a frame that Spark sorts, or, when ``rows`` (its row count) is known and at most
    ``per``, the elements' text, collected and sorted by the driver (no sort's jobs)."""
    if rows is not None and rows <= per:
        table = _spark_sorted(lines.toArrow(), key)
        return "".join(f",{line}\n" for line in table["line"].to_pylist())[1:]
    return lines.orderBy(*key).select("line")


def concat_pieces(spark: SparkSession, target: str, pieces: Iterable[str | DataFrame],
                  scratch: str) -> None:
    """Literal texts and JSON array elements (a DataFrame of one ``line`` column, already
    ordered, written by the executors) concatenated into one file. Every element is written
    after a comma, and the first comma is left out as the parts are joined: no job to find
    the first element."""
    tfs, jtarget = hadoop_fs(spark, target)
    out = tfs.create(jtarget, True)
    try:
        for i, piece in enumerate(pieces):
            if isinstance(piece, str):
                out.write(bytearray(piece.encode("utf-8")))
                continue
            parts = f"{scratch}/piece-{i}"
            (piece.select(F.concat(F.lit(","), F.col("line")).alias("line"))
             .write.mode("overwrite").text(parts))
            append_parts(spark, parts, out, skip=1)
    finally:
        out.close()
    fs, jscratch = hadoop_fs(spark, scratch)
    fs.delete(jscratch, True)


def write_json(spark: SparkSession, tables: OcelTables, types: Types, target: str,
               rows: dict[str, int] | None = None, per: int = PART_ROWS) -> None:
    """``rows``: the row counts of the kept tables (``ocel_events``, ...), when known: a
    table of at most ``per`` rows is sorted and written by the driver."""
    rows = rows or {}

    def described(kind: dict[str, list[str]]) -> list[dict]:
        return [{"name": n, "attributes": [{"name": a, "type": "string"} for a in attrs]}
                for n, attrs in kind.items()]

    head = ('{\n"objectTypes": ' + json.dumps(described(types.objects), ensure_ascii=False)
            + ',\n"eventTypes": ' + json.dumps(described(types.events), ensure_ascii=False)
            + ',\n"objects": [\n')
    objects = in_order(object_lines(tables), OBJECT_ORDER, rows.get("ocel_objects"), per)
    events = in_order(event_lines(tables), EVENT_ORDER, rows.get("ocel_events"), per)
    concat_pieces(spark, target, [head, objects, '],\n"events": [\n', events, "]\n}\n"],
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


def _sql_time(col: Column | str) -> Column:
    return F.date_format(col, "yyyy-MM-dd HH:mm:ss.SSSSSSxxx")


@dataclass(frozen=True)
class Placement:
    """Where the rows of one selected frame go: every row into each of ``every`` and each
    row into the table of its type (``by_type``, keyed by the value of column ``route``: an
    event's activity, an object's type); each table with the positions of its columns.
    ``key``: the columns of the frame the rows are appended in the order of (columns after
    the placed ones are read for the order alone)."""

    every: tuple[tuple[str, tuple[int, ...]], ...]
    by_type: dict[str, tuple[str, tuple[int, ...]]]
    key: tuple[str, ...]
    route: int = 1

    def tables(self) -> list[tuple[str, int]]:
        """(table, number of columns), every table of the placement once."""
        out = {name: len(cols) for name, cols in (*self.every, *self.by_type.values())}
        return list(out.items())


PART = T.StructType([T.StructField("part", T.BinaryType(), False),
                     T.StructField("rows", T.LongType(), False)])


def _insert(table: str, width: int) -> str:
    return f"INSERT INTO {_q(table)} VALUES ({', '.join('?' * width)})"


def _put(db: sqlite3.Connection, table: str, batch: pa.RecordBatch, cols: tuple[int, ...]
         ) -> None:
    db.executemany(_insert(table, len(cols)),
                   zip(*(batch.column(i).to_pylist() for i in cols), strict=True))


def _add(db: sqlite3.Connection, place: Placement, batch: pa.RecordBatch) -> None:
    for table, cols in place.every:
        _put(db, table, batch, cols)
    if not place.by_type:
        return
    route = batch.column(place.route)
    for value in pc.unique(route).to_pylist():
        table, cols = place.by_type[value]
        _put(db, table, batch.filter(pc.equal(route, value)), cols)


def _part_builder(place: Placement) -> Callable[[Iterator[pa.RecordBatch]],
                                                 Iterator[pa.RecordBatch]]:
    """A ``mapInArrow`` function: a task's rows in, placed into an in-memory SQLite database
    (the placement's tables, untyped columns, no keys); out one row, the database file's bytes
    (``part``) and the rows read (``rows``), or nothing for an empty partition."""

    def build(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        with closing(sqlite3.connect(":memory:")) as db:
            for table, width in place.tables():
                db.execute(f"CREATE TABLE {_q(table)} "
                           f"({', '.join(f'c{i}' for i in range(width))})")
            n = 0
            for batch in batches:
                if batch.num_rows:
                    _add(db, place, batch)
                    n += batch.num_rows
            db.commit()
            if n:
                yield pa.RecordBatch.from_arrays(
                    [pa.array([db.serialize()], pa.binary()), pa.array([n], pa.int64())],
                    names=["part", "rows"])

    return build


def append_sqlite_parts(db: sqlite3.Connection, df: DataFrame, place: Placement,
                        rows: int | None, per: int = PART_ROWS) -> int:
    """The rows of ``df`` appended, in the order of the placement's key, to the tables of
    ``place`` in ``db``.

    The executors place each partition of about ``per`` rows into a SQLite part (Python per
    row runs there, in parallel); the driver receives one part at a time and copies its
    tables with ``INSERT ... SELECT``, SQLite's own loop, in partition order. A frame of one
    part or less is collected as Arrow, sorted and placed by the driver itself: no Python
    worker to start, no sort's jobs.
    Returns the rows appended; raises when ``rows`` is known and differs."""
    if rows is not None and rows <= per:
        small = _spark_sorted(df.toArrow(), place.key)
        for batch in small.to_batches():
            _add(db, place, batch)
        db.commit()
        total = small.num_rows
    else:
        total = _append_parts(db, df, place, rows, per)
    if rows is not None and total != rows:
        raise RuntimeError(f"SQLite tables {', '.join(t for t, _ in place.tables())}: "
                           f"{total} rows appended, {rows} expected")
    return total


def _spark_sorted(table: pa.Table, key: tuple[str, ...]) -> pa.Table:
    """``table`` in the order of Spark's ascending sort on ``key``, nulls first (Arrow's
    default puts them last), as the executors' parts are."""
    keys = [pc.is_valid(table[k]) for k in key]
    order = [f"__valid{i}" for i in range(len(key))]
    flags = pa.table(dict(zip(order, keys, strict=True)))
    for k in key:
        flags = flags.append_column(k, table[k])
    return table.take(pc.sort_indices(flags, sort_keys=[
        (c, "ascending") for pair in zip(order, key, strict=True) for c in pair]))


def _append_parts(db: sqlite3.Connection, df: DataFrame, place: Placement, rows: int | None,
                  per: int) -> int:
    parts = _in_parts(df, place.key, rows, per).mapInArrow(in_worker(_part_builder(place)),
                                                            PART)
    tables = [t for t, _ in place.tables()]
    total = 0
    for part in parts.toLocalIterator(prefetchPartitions=True):
        db.execute("ATTACH ':memory:' AS part")
        try:
            db.deserialize(part["part"], name="part")
            for t in tables:
                db.execute(f"INSERT INTO main.{_q(t)} SELECT * FROM part.{_q(t)} ORDER BY rowid")
            db.commit()
        finally:
            db.execute("DETACH part")
        total += part["rows"]
    return total


def _in_parts(df: DataFrame, key: tuple[str, ...], rows: int | None, per: int) -> DataFrame:
    """``df`` sorted by ``key``, in partitions of about ``per`` rows (``rows``: its row count,
    when known)."""
    ranged = (df.repartitionByRange(max(1, -(-rows // per)), *key) if rows is not None
              else df.repartitionByRange(*key))
    return ranged.sortWithinPartitions(*key)


def write_sqlite(spark: SparkSession, tables: OcelTables, types: Types, target: str,
                 rows: dict[str, int] | None = None, per: int = PART_ROWS) -> None:
    """``rows``: the row counts of the cached tables (``ocel_events``, ...), when known;
    ``per``: about how many rows the executors put into one part."""
    fd, local = tempfile.mkstemp(prefix=f"sparkfield-{uuid.uuid4().hex[:8]}-", suffix=".sqlite")
    os.close(fd)
    try:
        with closing(sqlite3.connect(local)) as db:
            _fill(db, tables, types, rows or {}, per)
            db.commit()
        fs, jtarget = hadoop_fs(spark, target)
        fs.copyFromLocalFile(False, True, spark.sparkContext._jvm.org.apache.hadoop.fs.Path(
            local), jtarget)
    finally:
        os.remove(local)


def _fill(db: sqlite3.Connection, tables: OcelTables, types: Types, rows: dict[str, int],
          per: int) -> None:
    """The SQLite-OCEL 2.0 tables, filled from ``tables``."""
    db.execute("PRAGMA journal_mode=OFF")
    db.execute("PRAGMA synchronous=OFF")
    etab = table_names(sorted(types.events))
    otab = table_names(sorted(types.objects))
    _create_tables(db, types, etab, otab)
    for df, place, name in (
            _events(tables.events, types.events, etab),
            _keyed(tables.events.select(EID, ACTIVITY), "event", "ocel_events"),
            _keyed(tables.e2o.select(E2O_EVENT, E2O_OBJECT, QUAL), "event_object", "ocel_e2o"),
            _keyed(tables.o2o.select("ocel_source_id", "ocel_target_id", QUAL),
                   "object_object", "ocel_o2o"),
            _objects(tables.objects, types.objects, otab),
            _changes(tables.changes, types.objects, otab)):
        append_sqlite_parts(db, df, place, rows.get(name), per)


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


def _attribute_names(kinds: dict[str, list[str]]) -> dict[str, int]:
    """Every attribute name of ``kinds``, once, with its position among them."""
    names = dict.fromkeys(a for attrs in kinds.values() for a in attrs)
    return {a: i for i, a in enumerate(names)}


def _by_type(kinds: dict[str, list[str]], names: dict[str, str], prefix: str,
             fixed: tuple[int, ...], pos: dict[str, int]) -> dict[str, tuple[str, tuple]]:
    """Per type: its table and the positions of its columns in the selection, the ``fixed``
    ones, then one per attribute of the type (the attributes follow the fixed columns)."""
    first = max(fixed) + 1
    return {t: (prefix + names[t], (*fixed, *(first + pos[a] for a in attrs)))
            for t, attrs in kinds.items()}


def _attributes(pos: dict[str, int], value: Callable[[str], Column] | None = None
                ) -> list[Column]:
    """One column per attribute name: ``value(name)``, or the name's value in the row's
    attribute map."""
    return [(value(a) if value else F.col(ATTRIBUTES)[a]).alias(f"a{i}")
            for a, i in pos.items()]


def _events(events: DataFrame, kinds: dict[str, list[str]], etab: dict[str, str]
            ) -> tuple[DataFrame, Placement, str]:
    """The event-type tables, each in event order (``schema.ORDER``, then id), as ocel.json
    lists them: the order readers keep for equal times. Selected: id, activity, time, every
    attribute (null where the event has none), then the order's columns."""
    pos = _attribute_names(kinds)
    df = events.select(EID, ACTIVITY, _sql_time(TIMESTAMP).alias("t"), *_attributes(pos),
                       TIMESTAMP, SRC_ORDER, ROW_ORDER)
    return df, Placement(every=(), by_type=_by_type(kinds, etab, "event_", (0, 2), pos),
                         key=(*ORDER, EID)), "ocel_events"


def _objects(objects: DataFrame, kinds: dict[str, list[str]], otab: dict[str, str]
             ) -> tuple[DataFrame, Placement, str]:
    """Every object with its initial attribute values, at the epoch and no changed field, in
    (type, id) order: id, type, time, field, every attribute, then the type's index."""
    pos = _attribute_names(kinds)
    df = objects.select(OID, OTYPE, F.lit("1970-01-01 00:00:00.000000+00:00").alias("t"),
                        F.lit(None).cast("string").alias("field"), *_attributes(pos),
                        TYPE_INDEX)
    return df, Placement(every=(("object", (0, 1)),),
                         by_type=_by_type(kinds, otab, "object_", (0, 2, 3), pos),
                         key=(TYPE_INDEX, OID)), "ocel_objects"


def _changes(changes: DataFrame, kinds: dict[str, list[str]], otab: dict[str, str]
             ) -> tuple[DataFrame, Placement, str]:
    """One row per changed field, in the object type's table after its objects, the new value
    in the field's column, by object and time: id, type, time, field, every attribute, then
    the time and value again (the order)."""
    pos = _attribute_names(kinds)
    field = F.col("ocel_changed_field")
    df = changes.select(OID, OTYPE, _sql_time("ocel_time").alias("t"), field,
                        *_attributes(pos, lambda a: F.when(field == F.lit(a), F.col("value"))),
                        "ocel_time", "value")
    return df, Placement(every=(), by_type=_by_type(kinds, otab, "object_", (0, 2, 3), pos),
                         key=(OID, "ocel_time", "ocel_changed_field", "value")), \
        "ocel_changes"


def _keyed(df: DataFrame, table: str, name: str) -> tuple[DataFrame, Placement, str]:
    """A table whose rows are a set, keyed by its leading columns (``event``,
    ``event_object``, ``object_object``): appended sorted by all its columns, so that SQLite
    appends to the key's index rather than inserting all over it (which slows down as the
    index outgrows SQLite's cache)."""
    return df, Placement(every=((table, tuple(range(len(df.columns)))),), by_type={},
                         key=tuple(df.columns)), name
