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

Why one module: planning and validation are one pass over the same plan (one Spark action fills
every cache), so their rules stay side by side."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.window import Window

from sparkfield.core.io import CORRUPT_COL, corrupt_record, rejects_of
from sparkfield.core.keep import Keeper
from sparkfield.process.eventlog.events import (
    LOCAL_PROBLEM,
    REASON,
    wall_clock_columns,
    zoned_time_columns,
)
from sparkfield.process.eventlog.schema import ACTIVITY, ATTRIBUTES, ROW_ORDER, SRC_ORDER, TIMESTAMP
from sparkfield.process.extraction.sources import (
    ROW_COL,
    Keep,
    compile_expr,
    expr_type,
    expr_types,
    source_frames,
)
from sparkfield.process.ocel.mapping import SOURCE_KEY, OcelActivity, OcelMapping

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


def _id_of(type_name: str, key: Column) -> Column:
    """The object id of a key; null for a blank key."""
    return F.when(~_blank(key), object_id(type_name, key))


@dataclass
class OcelTables:
    events: DataFrame
    objects: DataFrame
    e2o: DataFrame
    o2o: DataFrame
    changes: DataFrame
    rejects: DataFrame  # source, reason, record
    # every row set counted by kind, source and reason in one aggregation (:data:`TALLY`)
    tallies: DataFrame | None = None


TALLY = ("kind", "source", "reason", "detail", "src_order", "n")
"""The columns of :attr:`OcelTables.tallies`: per ``kind`` (objects, events, e2o, o2o,
changes: the rows read, validated; ``*_kept``: the rows of a table after its duplicates are
dropped) the rows by ``source`` (as in the rejects) and ``reason`` (null: kept). ``detail`` is
the object type of an object row and the activity of a kept event (with its ``src_order``)."""


def _tally(df: DataFrame, kind: str, source: Column, detail: Column | None = None,
           src_order: Column | None = None) -> DataFrame:
    """The rows of ``df`` counted by source, reject reason and detail: one aggregation gives
    every check's count, instead of one Spark job per check."""
    reason = F.col(REASON) if REASON in df.columns else F.lit(None).cast("string")
    return df.groupBy(
        F.lit(kind).alias("kind"), source.cast("string").alias("source"),
        reason.alias("reason"),
        (detail if detail is not None else F.lit(None)).cast("string").alias("detail"),
        (src_order if src_order is not None else F.lit(None)).cast("int").alias("src_order"),
    ).agg(F.count(F.lit(1)).alias("n"))


@dataclass
class OcelPlan:
    """The log planned from its sources, every expression checked, no data read: the rows of
    each kind with ``reject_reason`` set where a rule within the rows is broken (relations
    are checked against the objects by :func:`validate`)."""

    mapping: OcelMapping
    objects: DataFrame
    events: DataFrame  # with ``objs``: the related objects (type, id, qualifier, key)
    changes: DataFrame | None  # object attribute changes; None when the mapping has none
    o2o: DataFrame | None  # object-to-object relations; None when the mapping has none
    # the sources and views that several entries read (kept by :func:`validate`, unless
    # :func:`plan` kept them before planning on them: ``shared_kept``)
    shared: dict[str, DataFrame] = field(default_factory=dict)
    shared_kept: bool = False


Types = dict[str, T.DataType]


def _typed(df: DataFrame, where: str | None, *texts: str | None,
           attrs: dict[str, str] | None = None) -> Types:
    """The types of one entry's expressions on its source (one analysis for them all)."""
    return expr_types(df, [where, *texts, *(attrs or {}).values()])


def _filtered(df: DataFrame, where: str | None, label: str, types: Types | None = None
              ) -> DataFrame:
    if not where:
        return df
    return df.where(compile_expr(df, where, label, "where", boolean=True, types=types))


def _attr_map(df: DataFrame, attrs: dict[str, str], label: str, types: Types | None = None
              ) -> Column:
    if not attrs:
        return F.lit(None).cast("map<string,string>")
    return F.map_filter(F.create_map(*[
        x for k, e in attrs.items()
        for x in (F.lit(k),
                  compile_expr(df, e, label, f"attribute {k}", types=types).cast("string"))]),
        lambda k, v: v.isNotNull())


_WALL, _NAIVE = "__sparkfield_ocel_wall", "__sparkfield_ocel_naive"


def _wall_clock(df: DataFrame, text: str, label: str, fmt: str | None,
                types: Types | None = None) -> list[Column]:
    """A timestamp expression's wall-clock columns
    (:func:`~sparkfield.process.eventlog.events.wall_clock_columns`), to be selected by each
    entry: the union of all is zoned once (:func:`_zoned`)."""
    dtype = expr_type(df, text, label, "timestamp", types)
    wall, naive = wall_clock_columns(F.expr(text), dtype, fmt)
    return [wall.alias(_WALL), naive.alias(_NAIVE)]


def _zoned(rows: DataFrame, timezone: str, timestamp: str) -> DataFrame:
    """``rows`` with the instant of their wall-clock columns as ``timestamp`` and why it has
    none when the zone skips or repeats that time as ``local_time_problem``."""
    return zoned_time_columns(rows, _WALL, _NAIVE, timezone, timestamp, LOCAL_PROBLEM)


def _in_range(ts: Column, mapping: OcelMapping) -> Column:
    lo = F.lit(mapping.min_timestamp).cast("timestamp")
    hi = F.lit(mapping.max_timestamp).cast("timestamp")
    return (ts >= lo) & (ts <= hi)


def _bad_time(raw: Column, ts: Column, mapping: OcelMapping, reason: Column) -> Column:
    """``reason`` followed by the timestamp rules: given, a time the zone has, parseable,
    within the bounds."""
    return (reason.when(_blank(raw), "null timestamp")
            .when(F.col(LOCAL_PROBLEM).isNotNull(), F.col(LOCAL_PROBLEM))
            .when(ts.isNull(), "unparseable timestamp")
            .when(~_in_range(ts, mapping), "timestamp out of range"))


def plan_objects(frames: dict[str, DataFrame], mapping: OcelMapping) -> DataFrame:
    """Object rows of every type with ``reject_reason`` (null for a good object)."""
    parts = []
    for t in mapping.objects.values():
        types = _typed(frames[t.source], t.where, t.id, attrs=t.attributes)
        df = _filtered(frames[t.source], t.where, t.label, types)
        key = compile_expr(df, t.id, t.label, "id", types=types).cast("string")
        attrs = F.map_concat(F.create_map(F.lit(SOURCE_KEY), key),
                             F.coalesce(_attr_map(df, t.attributes, t.label, types),
                                        F.create_map().cast("map<string,string>")))
        parts.append(df.select(
            _id_of(t.name, key).alias(OID), key.alias("key"),
            F.lit(t.name).alias(OTYPE), F.lit(t.index).alias(TYPE_INDEX),
            attrs.alias(ATTRIBUTES), F.col(ROW_COL).alias(ROW_ORDER),
            corrupt_record(df).alias(CORRUPT_COL)))
    rows = reduce(DataFrame.unionByName, parts)
    malformed = F.col(CORRUPT_COL).isNotNull()
    w = Window.partitionBy(malformed, OID).orderBy(TYPE_INDEX, ROW_ORDER,
                                                   F.to_json(ATTRIBUTES))
    reason = (F.when(malformed, "malformed row")
              .when(F.col(OID).isNull(), "null object id")
              .when(F.row_number().over(w) > 1, "duplicate object id"))
    return rows.withColumn(REASON, reason)


def _activity_rows(df: DataFrame, a: OcelActivity, types: Types | None = None) -> DataFrame:
    """One activity's event rows with their related objects (``objs``), and their time as
    wall-clock columns (:func:`_wall_clock`)."""
    ts = compile_expr(df, a.timestamp, a.label, "timestamp", types=types)
    name = F.lit(a.name) if a.name else compile_expr(df, a.activity, a.label, "activity",
                                                     types=types)
    keys = [compile_expr(df, o.id, a.label, f"objects #{j + 1} ({o.type}) id",
                         types=types).cast("string")
            for j, o in enumerate(a.objects)]
    objs = F.array(*[F.struct(
        F.lit(o.type).alias("type"), _id_of(o.type, k).alias("id"),
        F.lit(o.qualifier).alias("qualifier"), k.alias("key"))
        for o, k in zip(a.objects, keys, strict=True)])
    return df.select(
        name.cast("string").alias(ACTIVITY),
        *_wall_clock(df, a.timestamp, a.label, a.timestamp_format, types),
        ts.cast("string").alias("timestamp_raw"),
        _attr_map(df, a.attributes, a.label, types).alias(ATTRIBUTES), objs.alias("objs"),
        F.lit(a.index).alias(SRC_ORDER), F.col(ROW_COL).alias(ROW_ORDER),
        corrupt_record(df).alias(CORRUPT_COL))


def plan_events(frames: dict[str, DataFrame], mapping: OcelMapping) -> DataFrame:
    """Event rows with their related objects (``objs``: type, id, qualifier) and
    ``reject_reason``."""
    parts = []
    for a in mapping.activities:
        types = _typed(frames[a.source], a.where, a.timestamp, a.activity,
                       *(o.id for o in a.objects), attrs=a.attributes)
        parts.append(_activity_rows(_filtered(frames[a.source], a.where, a.label, types), a,
                                    types))
    rows = _zoned(reduce(DataFrame.unionByName, parts), mapping.timezone, TIMESTAMP)
    objs_json = F.to_json(F.array_sort(F.col("objs")))
    attrs_json = F.coalesce(F.to_json(ATTRIBUTES), F.lit(""))
    reason = _bad_time(F.col("timestamp_raw"), F.col(TIMESTAMP), mapping,
                       F.when(F.col(CORRUPT_COL).isNotNull(), "malformed row")
                       .when(_blank(F.col(ACTIVITY)), "null activity"))
    rows = rows.withColumn(REASON, reason)
    key = [ACTIVITY, TIMESTAMP, attrs_json, objs_json]
    w = Window.partitionBy(F.col(REASON).isNull(), *key).orderBy(SRC_ORDER, ROW_ORDER)
    dup = F.col(REASON).isNull() & (F.row_number().over(w) > 1)
    rows = rows.withColumn(REASON, F.when(dup, "duplicate event").otherwise(F.col(REASON)))
    digest = F.hex(F.xxhash64(
        ACTIVITY, F.unix_micros(TIMESTAMP), SRC_ORDER, ROW_ORDER, attrs_json, objs_json))
    # lower-case by translate: Spark's lower() starts its Unicode case mapper (ICU) in the
    # first task that calls it, about 2 s of a small log's run
    return rows.withColumn(EID, F.concat(F.lit("e"), F.translate(digest, "ABCDEF", "abcdef")))


def plan_changes(frames: dict[str, DataFrame], mapping: OcelMapping) -> DataFrame | None:
    """Object attribute changes, one row per changed field (``source`` names the change)."""
    parts = []
    for t in mapping.objects.values():
        for j, c in enumerate(t.changes):
            label = f"{t.label}: change #{j + 1}"
            types = _typed(frames[c.source], c.where, c.id, c.timestamp, attrs=c.attributes)
            df = _filtered(frames[c.source], c.where, label, types)
            key = compile_expr(df, c.id, label, "id", types=types).cast("string")
            raw = compile_expr(df, c.timestamp, label, "timestamp", types=types)
            parts.append(df.select(
                _id_of(t.name, key).alias(OID), key.alias("key"), F.lit(t.name).alias(OTYPE),
                *_wall_clock(df, c.timestamp, label, c.timestamp_format, types),
                raw.cast("string").alias("time_raw"),
                F.explode(_attr_map(df, c.attributes, label, types)).alias(
                    "ocel_changed_field", "value"),
                F.lit(label).alias("source"), corrupt_record(df).alias(CORRUPT_COL)))
    if not parts:
        return None
    return _zoned(reduce(DataFrame.unionByName, parts), mapping.timezone, "ocel_time")


def plan_o2o(frames: dict[str, DataFrame], mapping: OcelMapping) -> DataFrame | None:
    """Object-to-object relation rows (``source`` names the relation)."""
    parts = []
    for r in mapping.object_relations:
        types = _typed(frames[r.source], r.where, r.from_id, r.to_id)
        df = _filtered(frames[r.source], r.where, r.label, types)
        src = compile_expr(df, r.from_id, r.label, "from id", types=types).cast("string")
        tgt = compile_expr(df, r.to_id, r.label, "to id", types=types).cast("string")
        parts.append(df.select(
            _id_of(r.from_type, src).alias("ocel_source_id"),
            F.lit(r.from_type).alias("source_type"),
            _id_of(r.to_type, tgt).alias("ocel_target_id"),
            F.lit(r.to_type).alias("target_type"), F.lit(r.qualifier).alias(QUAL),
            F.lit(r.label).alias("source"), src.alias("source_key"), tgt.alias("target_key"),
            corrupt_record(df).alias(CORRUPT_COL)))
    return reduce(DataFrame.unionByName, parts) if parts else None


def plan(spark: SparkSession, mapping: OcelMapping, keep: Keep | None = None) -> OcelPlan:
    """Plan the whole log: the sources' headers are read and every expression is checked,
    no data yet. ``keep`` (see :func:`shared_keep`) is applied to the sources and views that
    several entries read before anything is planned on them."""
    return plan_from(source_frames(spark, mapping, shared_keep(mapping, keep)), mapping,
                     shared_kept=keep is not None)


def plan_from(frames: dict[str, DataFrame], mapping: OcelMapping,
              shared_kept: bool = False) -> OcelPlan:
    """:func:`plan` on given frames: every source and view of ``mapping`` by name, each with
    its row order (:func:`~sparkfield.process.extraction.sources.with_row_order`);
    ``shared_kept``: the frames that several entries read are kept already."""
    shared = _shared_names(mapping)
    return OcelPlan(mapping=mapping, objects=plan_objects(frames, mapping),
                    events=plan_events(frames, mapping), changes=plan_changes(frames, mapping),
                    o2o=plan_o2o(frames, mapping),
                    shared={n: df for n, df in frames.items() if n in shared},
                    shared_kept=shared_kept)


def shared_keep(mapping: OcelMapping, keep: Keep | None) -> Keep | None:
    """``keep`` for the sources and views of ``mapping`` that several entries read (each
    then read once: a CSV parsed, a view's joins run), as ``source <name>``; the others are
    left as they are, unless ``keep`` is a :class:`Keeper` that cuts lineage (every view
    then gives the plans on it a short one)."""
    if keep is None:
        return None
    shared = _shared_names(mapping)

    def kept(df: DataFrame, name: str) -> DataFrame:
        cut = isinstance(keep, Keeper) and keep.cuts_lineage(df.sparkSession)
        return keep(df, f"source {name}") if cut or name in shared else df

    return kept


def _shared_names(mapping: OcelMapping) -> set[str]:
    """Every source (the views read them too) and each view that several entries name."""
    uses: dict[str, int] = {}
    names = [*(t.source for t in mapping.objects.values()),
             *(c.source for t in mapping.objects.values() for c in t.changes),
             *(a.source for a in mapping.activities),
             *(r.source for r in mapping.object_relations)]
    for name in names:
        uses[name] = uses.get(name, 0) + 1
    return {*mapping.sources, *(n for n, k in uses.items() if k > 1)}


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


def _activity_source(mapping: OcelMapping) -> Column:
    """The activity label of an event row, by its ``src_order``."""
    labels = {a.index: _activity_label(a) for a in mapping.activities}
    return F.element_at(F.create_map(*[x for i, lab in labels.items()
                                       for x in (F.lit(i), F.lit(lab))]), F.col(SRC_ORDER))


def _known(objects: DataFrame, alias: str) -> DataFrame:
    """The ids of the good objects, as column ``alias``."""
    return objects.select(F.col(OID).alias(alias))


def _e2o(events: DataFrame, objects: DataFrame, act_source: Column, keep: Keep
         ) -> tuple[DataFrame, DataFrame, list[DataFrame]]:
    """Event-to-object relations (each must name a known object of the declared type), their
    rejects and tallies."""
    rel = events.select(EID, ACTIVITY, SRC_ORDER, F.explode("objs").alias("o")).select(
        F.col(EID).alias(E2O_EVENT), ACTIVITY, SRC_ORDER, F.col("o.id").alias(E2O_OBJECT),
        F.col("o.key").alias("key"), F.col("o.type").alias("declared_type"),
        F.col("o.qualifier").alias(QUAL))
    known = _known(objects, "_oid")
    rel = rel.join(known, rel[E2O_OBJECT] == known["_oid"], "left")
    rel = keep(rel.withColumn(REASON, F.when(F.col(E2O_OBJECT).isNull(), "null object id")
                              .when(F.col("_oid").isNull(), "unknown object")),
               "ocel_e2o_rows")
    source = F.concat(F.lit("e2o "), act_source)
    rejects = rejects_of(rel, source,
                         fields=[E2O_EVENT, ACTIVITY, "key", "declared_type", QUAL])
    e2o = keep(rel.where(F.col(REASON).isNull()).select(
        E2O_EVENT, E2O_OBJECT, F.col("declared_type").alias(OTYPE), QUAL).dropDuplicates(),
        "ocel_e2o")
    return e2o, rejects, [_tally(rel, "e2o", source), _tally(e2o, "e2o_kept", F.lit(None))]


def _o2o(rows: DataFrame | None, objects: DataFrame, keep: Keep
         ) -> tuple[DataFrame, DataFrame | None, list[DataFrame]]:
    """Object-to-object relations between known objects, their rejects (None: no relation
    in the mapping) and tallies."""
    if rows is None:
        empty = objects.sparkSession.createDataFrame(
            [], "ocel_source_id string, ocel_target_id string, ocel_qualifier string")
        return empty, None, []
    src, tgt = _known(objects, "_s"), _known(objects, "_t")
    o2o = (rows.join(src, rows["ocel_source_id"] == src["_s"], "left")
           .join(tgt, rows["ocel_target_id"] == tgt["_t"], "left"))
    reason = (F.when(F.col(CORRUPT_COL).isNotNull(), "malformed row")
              .when(F.col("ocel_source_id").isNull() | F.col("ocel_target_id").isNull(),
                    "null object id")
              .when(F.col("_s").isNull(), "unknown source object")
              .when(F.col("_t").isNull(), "unknown target object"))
    o2o = keep(o2o.withColumn(REASON, reason), "ocel_o2o_rows")
    rejects = rejects_of(o2o, F.col("source"), fields=[
        "source_key", "source_type", "target_key", "target_type", QUAL])
    good = keep(o2o.where(F.col(REASON).isNull()).select(
        "ocel_source_id", "ocel_target_id", QUAL).dropDuplicates(), "ocel_o2o")
    return good, rejects, [_tally(o2o, "o2o", F.col("source")),
                           _tally(good, "o2o_kept", F.lit(None))]


def _changes(rows: DataFrame | None, objects: DataFrame, mapping: OcelMapping, keep: Keep
             ) -> tuple[DataFrame, DataFrame | None, list[DataFrame]]:
    """Attribute changes of known objects, timed within the bounds, their rejects (None: no
    change in the mapping) and tallies."""
    if rows is None:
        empty = objects.sparkSession.createDataFrame(
            [], "ocel_id string, ocel_type string, ocel_time timestamp, "
                "ocel_changed_field string, value string")
        return empty, None, []
    known = _known(objects, "_oid")
    ch = rows.join(known, rows[OID] == known["_oid"], "left")
    reason = _bad_time(F.col("time_raw"), F.col("ocel_time"), mapping,
                       F.when(F.col(CORRUPT_COL).isNotNull(), "malformed row")
                       .when(F.col(OID).isNull(), "null object id")
                       .when(F.col("_oid").isNull(), "unknown object"))
    ch = keep(ch.withColumn(REASON, reason), "ocel_change_rows")
    rejects = rejects_of(ch, F.col("source"), fields=[
        "key", OTYPE, "time_raw", "ocel_changed_field", "value"])
    good = keep(ch.where(F.col(REASON).isNull()).select(
        OID, OTYPE, "ocel_time", "ocel_changed_field", "value").dropDuplicates(),
        "ocel_changes")
    return good, rejects, [_tally(ch, "changes", F.col("source")),
                           _tally(good, "changes_kept", F.lit(None))]


def validate(planned: OcelPlan, keep: Keep | None = None) -> OcelTables:
    """The log's tables, its rejects and the tallies of both: what breaks a rule of the
    standard becomes a reject. ``keep`` (e.g. persist) is applied to the validated row sets
    that both the log and its rejects are derived from, and to the relation and change
    tables once their duplicates are dropped, so that nothing is computed twice; one action
    on the tallies then fills them all."""
    keep = keep or (lambda df, name: df)
    mapping = planned.mapping
    if not planned.shared_kept:  # the plans below read the kept frame (the cache's)
        for name, df in planned.shared.items():
            keep(df, f"source {name}")
    objects_all = keep(planned.objects, "ocel_object_rows")
    events_all = keep(planned.events, "ocel_event_rows")
    act_source = _activity_source(mapping)
    objects = objects_all.where(F.col(REASON).isNull()).select(
        OID, OTYPE, TYPE_INDEX, ATTRIBUTES, ROW_ORDER)
    events = events_all.where(F.col(REASON).isNull()).select(
        EID, ACTIVITY, TIMESTAMP, ATTRIBUTES, SRC_ORDER, ROW_ORDER, "objs")
    e2o, e2o_rejects, e2o_tallies = _e2o(events, objects, act_source, keep)
    o2o, o2o_rejects, o2o_tallies = _o2o(planned.o2o, objects, keep)
    changes, change_rejects, change_tallies = _changes(planned.changes, objects, mapping, keep)
    object_source = F.concat(F.lit("object type "), F.col(OTYPE))
    rejects = [rejects_of(objects_all, object_source, fields=["key", OTYPE, ATTRIBUTES]),
               rejects_of(events_all, act_source,
                          fields=[ACTIVITY, "timestamp_raw", ATTRIBUTES, "objs"]),
               e2o_rejects, o2o_rejects, change_rejects]
    tallies = [_tally(objects_all, "objects", object_source, F.col(OTYPE)),
               _tally(events_all, "events", act_source,
                      F.when(F.col(REASON).isNull(), F.col(ACTIVITY)),
                      F.when(F.col(REASON).isNull(), F.col(SRC_ORDER))),
               *e2o_tallies, *o2o_tallies, *change_tallies]
    return OcelTables(events=events.drop("objs"), objects=objects, e2o=e2o, o2o=o2o,
                      changes=changes,
                      rejects=reduce(DataFrame.unionByName, [r for r in rejects if r is not None]),
                      tallies=reduce(DataFrame.unionByName, tallies))


def build(spark: SparkSession, mapping: OcelMapping, keep: Keep | None = None) -> OcelTables:
    """:func:`plan` and :func:`validate` in one: the whole log of ``mapping``."""
    return validate(plan(spark, mapping, keep), keep)
