"""Object-centric event logs (OCEL 2.0) from source tables, built and validated in Spark.

Tables (all DataFrames, nothing collected):

* ``events``: ``ocel_id``, activity, timestamp, attributes, src_order, row_order
* ``objects``: ``ocel_id``, ``ocel_type``, type_index, attributes
* ``e2o``: ``ocel_event_id``, ``ocel_object_id``, ``ocel_type`` (the object's), ``ocel_qualifier``
* ``o2o``: ``ocel_source_id``, ``ocel_target_id``, ``ocel_qualifier``
* ``changes``: ``ocel_id``, ``ocel_type``, ``ocel_time``, ``ocel_changed_field``, value

Object ids are ``<type>:<key>`` (:func:`object_id`), the source key prefixed by its object
type, so they are unique across the log by construction, as OCEL 2.0 requires, even where
source systems number every table from 1; the source key itself is kept as the object
attribute ``source_key``. Validation follows the standard's rules: every event and object has a
type, an object id is used once, every relation names an existing event and object of the
declared type. What breaks a rule becomes a reject (source, reason, record as JSON), never a
silent drop.

Event ids are ``e`` + a 64-bit hash of the event's content (activity, time, source position,
attributes, objects): stable from run to run without a global sort. Events with equal
timestamps are ordered as in the classic extraction: the mapping's activity order, then the
source row order, then the activity name (``schema.ORDER``); the files list events in that order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import reduce

from pyspark.errors import AnalysisException, ParseException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.window import Window

from sparkfield.core.io import CORRUPT_COL, corrupt_record
from sparkfield.process.events import REASON, parse_timestamp
from sparkfield.process.extract import source_frames
from sparkfield.process.mapping import MappingError
from sparkfield.process.ocel_mapping import SOURCE_KEY, OcelActivity, OcelMapping
from sparkfield.process.schema import ACTIVITY, ATTRIBUTES, ROW_ORDER, SRC_ORDER, TIMESTAMP

EID, OID, OTYPE, QUAL = "ocel_id", "ocel_id", "ocel_type", "ocel_qualifier"
E2O_EVENT, E2O_OBJECT = "ocel_event_id", "ocel_object_id"
TYPE_INDEX = "type_index"


def object_id(type_name: str, key: Column) -> Column:
    """The log-wide object id of a source key: ``<type>:<key>`` (null for a null key)."""
    return F.concat(F.lit(f"{type_name}:"), key)


def object_key(type_name: str, oid: Column) -> Column:
    """The source key of an object id of ``type_name`` (the inverse of :func:`object_id`)."""
    return oid.substr(len(type_name) + 2, 2 ** 31 - 1)


def _blank(col: Column) -> Column:
    return col.isNull() | (F.trim(col) == "")


@dataclass
class OcelTables:
    events: DataFrame
    objects: DataFrame
    e2o: DataFrame
    o2o: DataFrame
    changes: DataFrame
    rejects: DataFrame  # source, reason, record


def _expr(df: DataFrame, text: str, label: str, field: str, boolean: bool = False) -> Column:
    """Compile an expression now: unknown columns and syntax errors name the place."""
    try:
        dtype = df.select(F.expr(text).alias("_")).schema["_"].dataType  # analysis only
    except (AnalysisException, ParseException) as exc:
        first = str(exc).strip().splitlines()[0]
        raise MappingError(f"{label}: {field} expression {text!r}: {first}") from None
    if boolean and not isinstance(dtype, T.BooleanType):
        raise MappingError(f"{label}: where expression {text!r} gives {dtype.simpleString()}, "
                           "not a boolean")
    return F.expr(text)


def _filtered(df: DataFrame, where: str | None, label: str) -> DataFrame:
    return df.where(_expr(df, where, label, "where", boolean=True)) if where else df


def _attr_map(df: DataFrame, attrs: dict[str, str], label: str) -> Column:
    if not attrs:
        return F.lit(None).cast("map<string,string>")
    return F.map_filter(F.create_map(*[
        x for k, e in attrs.items()
        for x in (F.lit(k), _expr(df, e, label, f"attribute {k}").cast("string"))]),
        lambda k, v: v.isNotNull())


def _time(df: DataFrame, text: str, label: str, timezone: str, fmt: str | None) -> Column:
    col = _expr(df, text, label, "timestamp")
    dtype = df.select(col.alias("t")).schema["t"].dataType
    return parse_timestamp(col, dtype, timezone, fmt)


def _reject(df: DataFrame, source: Column | str, fields: list[str]) -> DataFrame:
    src = F.lit(source) if isinstance(source, str) else source
    return df.where(F.col(REASON).isNotNull()).select(
        src.alias("source"), F.col(REASON).alias("reason"),
        F.to_json(F.struct(*[F.col(c) for c in fields])).alias("record"))


def _in_range(ts: Column, mapping: OcelMapping) -> Column:
    lo = F.lit(mapping.min_timestamp).cast("timestamp")
    hi = F.lit(mapping.max_timestamp).cast("timestamp")
    return (ts >= lo) & (ts <= hi)


def plan_objects(frames: dict[str, DataFrame], mapping: OcelMapping) -> DataFrame:
    """Object rows of every type with ``reject_reason`` (null for a good object)."""
    parts = []
    for t in mapping.objects.values():
        df = _filtered(frames[t.source], t.where, t.label)
        key = _expr(df, t.id, t.label, "id").cast("string")
        attrs = F.map_concat(F.create_map(F.lit(SOURCE_KEY), key),
                             F.coalesce(_attr_map(df, t.attributes, t.label),
                                        F.create_map().cast("map<string,string>")))
        parts.append(df.select(
            F.when(~_blank(key), object_id(t.name, key)).alias(OID), key.alias("key"),
            F.lit(t.name).alias(OTYPE), F.lit(t.index).alias(TYPE_INDEX),
            attrs.alias(ATTRIBUTES), F.col("__row").alias(ROW_ORDER),
            corrupt_record(df).alias(CORRUPT_COL)))
    rows = reduce(DataFrame.unionByName, parts)
    malformed = F.col(CORRUPT_COL).isNotNull()
    w = Window.partitionBy(malformed, OID).orderBy(TYPE_INDEX, ROW_ORDER,
                                                   F.to_json(ATTRIBUTES))
    reason = (F.when(malformed, "malformed row")
              .when(F.col(OID).isNull(), "null object id")
              .when(F.row_number().over(w) > 1, "duplicate object id"))
    return rows.withColumn(REASON, reason)


def plan_events(frames: dict[str, DataFrame], mapping: OcelMapping) -> DataFrame:
    """Event rows with their related objects (``objs``: type, id, qualifier) and
    ``reject_reason``."""
    parts = []
    for a in mapping.activities:
        df = _filtered(frames[a.source], a.where, a.label)
        ts = _expr(df, a.timestamp, a.label, "timestamp")
        name = F.lit(a.name) if a.name else _expr(df, a.activity, a.label, "activity")
        keys = [_expr(df, o.id, a.label, f"objects #{j + 1} ({o.type}) id").cast("string")
                for j, o in enumerate(a.objects)]
        objs = F.array(*[F.struct(
            F.lit(o.type).alias("type"),
            F.when(~_blank(k), object_id(o.type, k)).alias("id"),
            F.lit(o.qualifier).alias("qualifier"), k.alias("key"))
            for o, k in zip(a.objects, keys, strict=True)])
        corrupt = corrupt_record(df)
        parts.append(df.select(
            name.cast("string").alias(ACTIVITY),
            _time(df, a.timestamp, a.label, mapping.timezone, a.timestamp_format)
            .alias(TIMESTAMP),
            ts.cast("string").alias("timestamp_raw"),
            _attr_map(df, a.attributes, a.label).alias(ATTRIBUTES), objs.alias("objs"),
            F.lit(a.index).alias(SRC_ORDER), F.col("__row").alias(ROW_ORDER),
            corrupt.alias(CORRUPT_COL)))
    rows = reduce(DataFrame.unionByName, parts)
    raw = F.col("timestamp_raw")
    objs_json = F.to_json(F.array_sort(F.col("objs")))
    attrs_json = F.coalesce(F.to_json(ATTRIBUTES), F.lit(""))
    reason = (F.when(F.col(CORRUPT_COL).isNotNull(), "malformed row")
              .when(F.col(ACTIVITY).isNull() | (F.trim(F.col(ACTIVITY)) == ""),
                    "null activity")
              .when(raw.isNull() | (F.trim(raw) == ""), "null timestamp")
              .when(F.col(TIMESTAMP).isNull(), "unparseable timestamp")
              .when(~_in_range(F.col(TIMESTAMP), mapping), "timestamp out of range"))
    rows = rows.withColumn(REASON, reason)
    key = [ACTIVITY, TIMESTAMP, attrs_json, objs_json]
    w = Window.partitionBy(F.col(REASON).isNull(), *key).orderBy(SRC_ORDER, ROW_ORDER)
    dup = F.col(REASON).isNull() & (F.row_number().over(w) > 1)
    rows = rows.withColumn(REASON, F.when(dup, "duplicate event").otherwise(F.col(REASON)))
    eid = F.concat(F.lit("e"), F.lower(F.hex(F.xxhash64(
        ACTIVITY, F.unix_micros(TIMESTAMP), SRC_ORDER, ROW_ORDER, attrs_json, objs_json))))
    return rows.withColumn(EID, eid)


def _changes(frames: dict[str, DataFrame], mapping: OcelMapping) -> DataFrame | None:
    parts = []
    for t in mapping.objects.values():
        for j, c in enumerate(t.changes):
            label = f"{t.label}: change #{j + 1}"
            df = _filtered(frames[c.source], c.where, label)
            key = _expr(df, c.id, label, "id").cast("string")
            parts.append(df.select(
                F.when(~_blank(key), object_id(t.name, key)).alias(OID), key.alias("key"),
                F.lit(t.name).alias(OTYPE),
                _time(df, c.timestamp, label, mapping.timezone, c.timestamp_format)
                .alias("ocel_time"),
                _expr(df, c.timestamp, label, "timestamp").cast("string").alias("time_raw"),
                F.explode(_attr_map(df, c.attributes, label)).alias(
                    "ocel_changed_field", "value"),
                F.lit(label).alias("source"), corrupt_record(df).alias(CORRUPT_COL)))
    return reduce(DataFrame.unionByName, parts) if parts else None


def _activity_label(a: OcelActivity) -> str:
    return a.label.removeprefix("activity ").strip("'")


def reject_kinds(mapping: OcelMapping) -> dict[str, str]:
    """What each ``source`` of the rejects table holds: objects, events, e2o, o2o or
    changes."""
    kinds = {_activity_label(a): "events" for a in mapping.activities}
    kinds.update({f"e2o {_activity_label(a)}": "e2o" for a in mapping.activities})
    kinds.update({r.label: "o2o" for r in mapping.object_relations})
    for t in mapping.objects.values():
        kinds[f"object type {t.name}"] = "objects"
        kinds.update({f"{t.label}: change #{j + 1}": "changes" for j in range(len(t.changes))})
    return kinds


def build(spark: SparkSession, mapping: OcelMapping,
          keep: Callable[[DataFrame, str], DataFrame] | None = None) -> OcelTables:
    """Plan the whole log: every expression is checked before any data is read. ``keep``
    (e.g. persist) is applied to the validated row sets that both the log and its rejects are
    derived from, so that nothing is computed twice."""
    frames = source_frames(spark, mapping)
    objects_all = plan_objects(frames, mapping)
    events_all = plan_events(frames, mapping)
    changes_all = _changes(frames, mapping)
    keep = keep or (lambda df, name: df)
    objects_all = keep(objects_all, "ocel_object_rows")
    events_all = keep(events_all, "ocel_event_rows")
    o2o_parts = []
    for r in mapping.object_relations:
        df = _filtered(frames[r.source], r.where, r.label)
        src = _expr(df, r.from_id, r.label, "from id").cast("string")
        tgt = _expr(df, r.to_id, r.label, "to id").cast("string")
        o2o_parts.append(df.select(
            F.when(~_blank(src), object_id(r.from_type, src)).alias("ocel_source_id"),
            F.lit(r.from_type).alias("source_type"),
            F.when(~_blank(tgt), object_id(r.to_type, tgt)).alias("ocel_target_id"),
            F.lit(r.to_type).alias("target_type"), F.lit(r.qualifier).alias(QUAL),
            F.lit(r.label).alias("source"), src.alias("source_key"), tgt.alias("target_key"),
            corrupt_record(df).alias(CORRUPT_COL)))

    labels = {a.index: _activity_label(a) for a in mapping.activities}
    act_label = F.element_at(F.create_map(*[x for i, lab in labels.items()
                                            for x in (F.lit(i), F.lit(lab))]), F.col(SRC_ORDER))
    good_objects = objects_all.where(F.col(REASON).isNull()).select(
        OID, OTYPE, TYPE_INDEX, ATTRIBUTES, ROW_ORDER)
    known = good_objects.select(F.col(OID).alias("_oid"))
    rejects = [_reject(objects_all, F.concat(F.lit("object type "), F.col(OTYPE)),
                       ["key", OTYPE, ATTRIBUTES, CORRUPT_COL])]

    rejects.append(_reject(events_all, act_label,
                           [ACTIVITY, "timestamp_raw", ATTRIBUTES, "objs", CORRUPT_COL]))
    events = events_all.where(F.col(REASON).isNull()).select(
        EID, ACTIVITY, TIMESTAMP, ATTRIBUTES, SRC_ORDER, ROW_ORDER, "objs")

    # event-to-object: each relation must name an object of the declared type
    rel = events.select(EID, ACTIVITY, SRC_ORDER, F.explode("objs").alias("o")).select(
        F.col(EID).alias(E2O_EVENT), ACTIVITY, SRC_ORDER, F.col("o.id").alias(E2O_OBJECT),
        F.col("o.key").alias("key"), F.col("o.type").alias("declared_type"),
        F.col("o.qualifier").alias(QUAL))
    rel = rel.join(known, rel[E2O_OBJECT] == known["_oid"], "left")
    rel = keep(rel.withColumn(REASON, F.when(F.col(E2O_OBJECT).isNull(), "null object id")
                              .when(F.col("_oid").isNull(), "unknown object")),
               "ocel_e2o_rows")
    rejects.append(_reject(rel, F.concat(F.lit("e2o "), act_label),
                           [E2O_EVENT, ACTIVITY, "key", "declared_type", QUAL]))
    e2o = rel.where(F.col(REASON).isNull()).select(
        E2O_EVENT, E2O_OBJECT, F.col("declared_type").alias(OTYPE), QUAL).dropDuplicates()

    if o2o_parts:
        o2o = reduce(DataFrame.unionByName, o2o_parts)
        src = known.select(F.col("_oid").alias("_s"))
        tgt = known.select(F.col("_oid").alias("_t"))
        o2o = (o2o.join(src, o2o["ocel_source_id"] == src["_s"], "left")
               .join(tgt, o2o["ocel_target_id"] == tgt["_t"], "left"))
        o2o = keep(o2o.withColumn(REASON, F.when(F.col(CORRUPT_COL).isNotNull(), "malformed row")
            .when(F.col("ocel_source_id").isNull() | F.col("ocel_target_id").isNull(),
            "null object id")
            .when(F.col("_s").isNull(), "unknown source object")
            .when(F.col("_t").isNull(), "unknown target object")), "ocel_o2o_rows")
        rejects.append(_reject(o2o, F.col("source"), ["source_key", "source_type",
                                                      "target_key", "target_type", QUAL,
                                                      CORRUPT_COL]))
        o2o = o2o.where(F.col(REASON).isNull()).select(
            "ocel_source_id", "ocel_target_id", QUAL).dropDuplicates()
    else:
        o2o = events.sparkSession.createDataFrame(
            [], "ocel_source_id string, ocel_target_id string, ocel_qualifier string")

    if changes_all is not None:
        ch = changes_all.join(known, changes_all[OID] == known["_oid"], "left")
        raw = F.col("time_raw")
        ch = keep(ch.withColumn(REASON, F.when(F.col(CORRUPT_COL).isNotNull(), "malformed row")
                           .when(F.col(OID).isNull(), "null object id")
                           .when(F.col("_oid").isNull(), "unknown object")
                           .when(raw.isNull() | (F.trim(raw) == ""), "null timestamp")
                           .when(F.col("ocel_time").isNull(), "unparseable timestamp")
                           .when(~_in_range(F.col("ocel_time"), mapping),
                                 "timestamp out of range")), "ocel_change_rows")
        rejects.append(_reject(ch, F.col("source"), ["key", OTYPE, "time_raw",
                                                     "ocel_changed_field", "value",
                                                     CORRUPT_COL]))
        changes = ch.where(F.col(REASON).isNull()).select(
            OID, OTYPE, "ocel_time", "ocel_changed_field", "value").dropDuplicates()
    else:
        changes = events.sparkSession.createDataFrame(
            [], "ocel_id string, ocel_type string, ocel_time timestamp, "
                "ocel_changed_field string, value string")
    return OcelTables(events=events.drop("objs"), objects=good_objects, e2o=e2o, o2o=o2o,
                      changes=changes, rejects=reduce(DataFrame.unionByName, rejects))
