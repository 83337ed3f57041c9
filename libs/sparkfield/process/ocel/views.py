"""Flattened views of an object-centric log: per object type, every object of the type is a
case holding the events related to it (OCEL flattening), with the classic views on top.

An event related to two objects of the type appears in both cases; events with equal
timestamps keep the classic order (``schema.ORDER``).
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sparkfield.core.practices import cached_rows
from sparkfield.core.report import Stats
from sparkfield.process.ocel.build import (
    E2O_EVENT,
    E2O_OBJECT,
    EID,
    OTYPE,
    OcelTables,
    object_key,
)
from sparkfield.process.schema import (
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
from sparkfield.process.views import Views, case_sequences, compute_views

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
    """What :func:`type_views` returns for one object type. ``variants`` stays cached until
    the ``stack`` given to it closes; so do ``events`` (the flattened log) and ``views`` when
    the log is kept (the case object type's classic log), else they are None."""

    small: dict[str, pd.DataFrame]  # dfg and activities, collected
    variants: DataFrame  # variant, cases, share, mean_duration_s
    flattened: dict[str, int]  # cases, events, dfg_arcs
    events: DataFrame | None = None
    views: Views | None = None


def type_views(tables: OcelTables, otype: str, stack: ExitStack, stats: Stats,
               keep_log: bool = False) -> TypeViews:
    """One object type's flattened log and its views. Only the variants stay cached on
    ``stack`` unless ``keep_log``: the flattened log of one type is released before the next
    type's is built."""
    with ExitStack() as own:
        log_stack = stack if keep_log else own
        ev, n_events = log_stack.enter_context(cached_rows(flatten(tables, otype),
                                                           f"flat_{otype}", report=stats))
        seqs, n_cases = log_stack.enter_context(cached_rows(case_sequences(ev),
                                                            f"seqs_{otype}", report=stats))
        views = compute_views(ev, seqs, n_cases)
        small = {"dfg": views.dfg.toPandas(), "activities": views.activities.toPandas()}
        variants, _ = stack.enter_context(cached_rows(
            views.variants.select(*VARIANT_COLUMNS), f"variants_{otype}", report=stats))
    return TypeViews(small=small, variants=variants,
                     flattened={"cases": n_cases, "events": n_events,
                                "dfg_arcs": len(small["dfg"])},
                     events=ev if keep_log else None, views=views if keep_log else None)
