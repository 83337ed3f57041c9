"""Extraction: source tables (CSV, Parquet, JSON, JDBC, or DataFrames given) -> events, as
the mapping says."""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.core.io import CORRUPT_COL, corrupt_record
from sparkfield.process.eventlog.events import (
    LOCAL_PROBLEM,
    RAW_TS,
    local_time_problem,
    parse_timestamp,
    sample_cases,
)
from sparkfield.process.eventlog.schema import (
    ACTIVITY,
    ATTRIBUTES,
    CASE,
    LIFECYCLE,
    RESOURCE,
    ROW_ORDER,
    SRC_ORDER,
    TIMESTAMP,
)
from sparkfield.process.extraction.mapping import Activity, Mapping
from sparkfield.process.extraction.mapping_common import MappingError
from sparkfield.process.extraction.sources import ROW_COL, compile_expr, java_message, source_frames


def _expr(df: DataFrame, text: str, act: Activity, field: str) -> Column:
    return compile_expr(df, text, f"activity {act.label!r}", field, boolean=field == "where")


def _check_format(spark: SparkSession, act: Activity) -> None:
    """An invalid datetime pattern fails only when rows are parsed: try it on one value now."""
    try:
        spark.range(1).select(F.try_to_timestamp(F.lit("2020-01-01"),
                                                 F.lit(act.timestamp_format))).collect()
    except Exception as exc:
        first = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), "")
        raise MappingError(f"activity {act.label!r}: invalid timestamp_format "
                           f"{act.timestamp_format!r}: {java_message(first)[:200]}") from None


def _case_id(df: DataFrame, act: Activity) -> Column:
    """The case id as text. A floating-point id is refused: Spark writes 1234 as "1234.0" and
    12345678 as "1.2345678E7", so the same case from another source (an integer or text
    column) would become a case of its own."""
    col = _expr(df, act.case_id, act, "case_id")
    dtype = df.select(col.alias("c")).schema["c"].dataType
    if isinstance(dtype, (T.FloatType, T.DoubleType)):
        raise MappingError(
            f"activity {act.label!r}: case_id {act.case_id!r} is a {dtype.simpleString()} "
            "(a column with nulls read as numbers): as text its ids would not match the same "
            f"cases elsewhere; give CAST({act.case_id} AS BIGINT), or a decimal's cast")
    return col.cast("string")


@dataclass
class Extracted:
    # event columns + timestamp_raw, local_time_problem (+ _corrupt_record), not validated
    rows: DataFrame
    empty_sources: list[str]


def extract(
    spark: SparkSession, mapping: Mapping, fraction: float | None = None, seed: int = 42
) -> Extracted:
    """The mapping's sources read and turned into event rows (nothing validated yet)."""
    return extract_from(source_frames(spark, mapping), mapping, fraction, seed)


def extract_from(frames: dict[str, DataFrame], mapping: Mapping, fraction: float | None = None,
                 seed: int = 42) -> Extracted:
    """:func:`extract` on given frames: every source and view of ``mapping`` by name, each
    with its row order (:func:`~sparkfield.process.extraction.sources.source_frames`,
    :func:`~sparkfield.process.extraction.sources.given_frames`)."""
    parts = []
    for act in mapping.activities:
        df = frames[act.source]
        if act.where:
            df = df.where(_expr(df, act.where, act, "where"))
        case = _case_id(df, act)
        ts_col = _expr(df, act.timestamp, act, "timestamp")
        if act.timestamp_format:
            _check_format(df.sparkSession, act)
        ts_type = df.select(ts_col.alias("t")).schema["t"].dataType
        name = F.lit(act.name) if act.name else _expr(df, act.activity, act, "activity")
        resource = _expr(df, act.resource, act, "resource").cast("string") if act.resource \
            else F.lit(None).cast("string")
        lifecycle = _expr(df, act.lifecycle, act, "lifecycle").cast("string") \
            if act.lifecycle else F.lit(None).cast("string")
        attrs = (F.create_map(*[x for k, e in act.attributes.items()
                                for x in (F.lit(k), _expr(df, e, act, f"attribute {k}")
                                          .cast("string"))])
                 if act.attributes else F.lit(None).cast("map<string,string>"))
        corrupt = corrupt_record(df)
        parts.append(df.select(
            case.alias(CASE), name.cast("string").alias(ACTIVITY),
            parse_timestamp(ts_col, ts_type, mapping.timezone, act.timestamp_format)
            .alias(TIMESTAMP),
            resource.alias(RESOURCE), lifecycle.alias(LIFECYCLE), attrs.alias(ATTRIBUTES),
            F.lit(act.index).alias(SRC_ORDER), F.col(ROW_COL).alias(ROW_ORDER),
            ts_col.cast("string").alias(RAW_TS), corrupt.alias(CORRUPT_COL),
            local_time_problem(ts_col, ts_type, mapping.timezone, act.timestamp_format)
            .alias(LOCAL_PROBLEM),
        ))
    rows = reduce(DataFrame.unionByName, parts)
    rows = sample_cases(rows, fraction, seed)
    empty = [name for name in mapping.sources if frames[name].isEmpty()]
    return Extracted(rows=rows, empty_sources=empty)
