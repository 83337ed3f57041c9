"""Flattened views of an object-centric log: per object type, every object of the type is a
case holding the events related to it (OCEL flattening), with the classic views on top.

An event related to two objects of the type appears in both cases; events with equal
timestamps keep the classic order (``schema.ORDER``).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sparkfield.process.ocel import E2O_EVENT, E2O_OBJECT, EID, OTYPE, OcelTables, object_key
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
