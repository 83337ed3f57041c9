"""Flattened views of an object-centric log: per object type, every object of the type is a
case holding the events related to it (OCEL flattening), with the classic views on top.

An event related to two objects of the type appears in both cases; events with equal
timestamps keep the classic order (``schema.ORDER``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sparkfield.core.collect import collect_small
from sparkfield.core.keep import Keeper
from sparkfield.core.report import Stats
from sparkfield.process.analysis.views import (
    Views,
    case_sequences,
    cases,
    compute_views,
    pairs,
)
from sparkfield.process.eventlog.schema import (
    ACTIVITY,
    ATTRIBUTES,
    CASE,
    EVENT_COLUMNS,
    LIFECYCLE,
    RESOURCE,
    ROW_ORDER,
    SRC_ORDER,
    TIMESTAMP,
)
from sparkfield.process.ocel.build import (
    E2O_EVENT,
    E2O_OBJECT,
    EID,
    OTYPE,
    OcelTables,
    object_key,
)
from sparkfield.process.ocel.mapping import OcelMapping

VARIANT_COLUMNS = ("variant", "cases", "share", "mean_duration_s")


def flatten(tables: OcelTables, object_type: str) -> DataFrame:
    """The classic event log of one object type (the event columns of ``schema``): each
    object's source key is a case id; the OCEL event id is kept as the attribute
    ``ocel:eid``."""
    rel = (tables.e2o.where(F.col(OTYPE) == object_type)
           .select(E2O_EVENT, E2O_OBJECT).dropDuplicates())
    ev = tables.events.join(rel, tables.events[EID] == rel[E2O_EVENT])
    return ev.select(
        object_key(object_type, F.col(E2O_OBJECT)).alias(CASE), ACTIVITY, TIMESTAMP,
        F.lit(None).cast("string").alias(RESOURCE), F.lit(None).cast("string").alias(LIFECYCLE),
        F.map_concat(F.create_map(F.lit("ocel:eid"), F.col(EID)),
                     F.coalesce(ATTRIBUTES, F.create_map().cast("map<string,string>")))
        .alias(ATTRIBUTES), SRC_ORDER, ROW_ORDER).select(*EVENT_COLUMNS)


@dataclass
class TypeViews:
    """One object type's views (see :func:`all_type_views`). ``variants`` is kept by the
    keeper given to it (cached until its stack closes); so are ``events`` (the flattened
    log) and ``views`` when the log is kept (the case object type's classic log), else they
    are None."""

    # dfg and activities, collected; variants too when the log is small (SMALL_CASES), and,
    # for the case object type, start_activities and end_activities
    small: dict[str, pd.DataFrame]
    variants: DataFrame  # variant, cases, share, mean_duration_s
    flattened: dict[str, int]  # cases, events, dfg_arcs
    events: DataFrame | None = None
    views: Views | None = None


SMALL_CASES = 100_000
"""Up to this many cases over all the object types, the variants (at most one per case) are
collected with the other small views and written from the driver, not by one Spark job per
type."""


def _type_of(case: Column) -> Column:
    """The object type of an object id (``<type>:<key>``; a type name holds no ':')."""
    return F.substring_index(case, ":", 1)


def all_sequences(tables: OcelTables) -> DataFrame:
    """Every object type's flattened cases at once: ``case_sequences`` of the flattened logs
    of all the types together, a case being the object id (unique across the types), with
    its ``ocel_type``."""
    rel = tables.e2o.select(E2O_EVENT, E2O_OBJECT).dropDuplicates()
    ev = tables.events.select(EID, ACTIVITY, TIMESTAMP, SRC_ORDER, ROW_ORDER)
    flat = ev.join(rel, ev[EID] == rel[E2O_EVENT]).select(
        F.col(E2O_OBJECT).alias(CASE), ACTIVITY, TIMESTAMP, SRC_ORDER, ROW_ORDER)
    return case_sequences(flat).withColumn(OTYPE, _type_of(F.col(CASE)))


def _split(table: pd.DataFrame, otypes: list[str], order: list[str], ascending: list[bool]
           ) -> dict[str, pd.DataFrame]:
    """A collected table of every type, one table per type in the classic views' order."""
    out = {}
    for otype in otypes:
        part = table[table[OTYPE] == otype].drop(columns=[OTYPE])
        out[otype] = part.sort_values(order, ascending=ascending, kind="stable").reset_index(
            drop=True)
    return out


def all_type_views(tables: OcelTables, mapping: OcelMapping, keep: Keeper, stats: Stats
                   ) -> dict[str, TypeViews]:
    """Every object type's flattened views, all the types in the same few Spark jobs: the
    flattened cases of every type are built and kept once, and each view is one
    aggregation grouped by type (the classic views of ``process.views``, computed per type);
    dfg and activities are small and collected. The variants stay kept by ``keep``, and,
    for the case object type, its flattened log and classic views."""
    otypes = list(mapping.objects)
    seqs = keep(all_sequences(tables), "flattened_cases")
    with stats.step("cache flattened_cases"):
        sizes = {r[OTYPE]: (r["cases"], r["events"]) for r in seqs.groupBy(OTYPE).agg(
            F.count(F.lit(1)).alias("cases"),
            F.sum(F.size("seq")).alias("events")).collect()}
    stats.cached.append({"name": "flattened_cases", "level": keep.level,
                         "rows": sum(c for c, _ in sizes.values())})
    arcs = pairs(seqs, OTYPE)
    dfg = (arcs.groupBy(OTYPE, "source", "target")
           .agg(F.count(F.lit(1)).alias("frequency"), F.avg("d").alias("mean_s"),
                F.percentile("d", 0.5).alias("median_s")))
    acts = (seqs.select(OTYPE, CASE, F.explode("seq.a").alias(ACTIVITY))
            .groupBy(OTYPE, ACTIVITY)
            .agg(F.count(F.lit(1)).alias("events"), F.countDistinct(CASE).alias("cases")))
    n_cases = {t: sizes.get(t, (0, 0))[0] for t in otypes}
    case_table = cases(seqs).withColumn(OTYPE, _type_of(F.col(CASE)))
    share = F.col("cases") / F.element_at(F.create_map(*[
        x for t, n in n_cases.items() for x in (F.lit(t), F.lit(max(n, 1)))]), F.col(OTYPE))
    variants = keep(case_table.groupBy(OTYPE, "variant").agg(
        F.count(F.lit(1)).alias("cases"), F.avg("duration_s").alias("mean_duration_s"))
        .withColumn("share", share), "variants")
    case_type = mapping.case_object_type
    own = None if case_type is None else seqs.where(F.col(OTYPE) == case_type).select(
        object_key(case_type, F.col(CASE)).alias(CASE), "seq")
    queries = {"dfg": dfg, "activities": acts}
    if sum(n_cases.values()) <= SMALL_CASES:
        queries["variants"] = variants.select(OTYPE, *VARIANT_COLUMNS)
    if own is not None:
        queries["endpoints"] = _endpoints(own)
    got = collect_small(queries)  # small queries, run side by side
    dfgs = _split(got["dfg"], otypes, ["frequency", "source", "target"], [False, True, True])
    activities = _split(got["activities"], otypes, ["events", ACTIVITY], [False, True])
    collected = {}
    if "variants" in got:
        collected = _split(got["variants"], otypes, ["cases", "variant"], [False, True])
    out = {}
    for otype in otypes:
        small = {"dfg": dfgs[otype], "activities": activities[otype]}
        if otype in collected:
            small["variants"] = collected[otype]
        mine = (variants.where(F.col(OTYPE) == otype).orderBy(F.desc("cases"), "variant")
                .select(*VARIANT_COLUMNS))
        tv = TypeViews(small=small, variants=mine,
                       flattened={"cases": n_cases[otype],
                                  "events": sizes.get(otype, (0, 0))[1] or 0,
                                  "dfg_arcs": len(small["dfg"])})
        if otype == case_type:
            tv.events = keep(flatten(tables, otype), f"flattened {otype}")
            tv.views = replace(compute_views(tv.events, own, n_cases[otype]),
                               variants=mine)
            split = _split(got["endpoints"], ["start", "end"], ["cases", ACTIVITY],
                           [False, True])
            small.update(start_activities=split["start"], end_activities=split["end"])
        out[otype] = tv
    return out


def _endpoints(seqs: DataFrame) -> DataFrame:
    """The start and end activities of one type's sequences in one query: ``ocel_type``
    (start or end), activity, cases; :func:`_split` orders them as
    ``process.views.endpoint_activities`` does."""
    ends = seqs.select(F.element_at("seq", 1)["a"].alias("start"),
                       F.element_at("seq", -1)["a"].alias("end"))
    return (ends.select(F.lit("start").alias(OTYPE), F.col("start").alias(ACTIVITY))
            .unionByName(ends.select(F.lit("end").alias(OTYPE), F.col("end").alias(ACTIVITY)))
            .groupBy(OTYPE, ACTIVITY).agg(F.count(F.lit(1)).alias("cases")))
