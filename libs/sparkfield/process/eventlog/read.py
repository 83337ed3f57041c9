"""Existing event logs as input: XES (.xes, .xes.gz), CSV or Parquet -> raw event rows."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.core.errors import InputError
from sparkfield.core.failures import spark_input_error
from sparkfield.core.io import CORRUPT_COL, corrupt_record, read_csv_strings, require_path
from sparkfield.process.eventlog.events import (
    LOCAL_PROBLEM,
    RAW_TS,
    local_time_problem,
    parse_timestamp,
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
from sparkfield.process.eventlog.xes_split import INSTANT, read_xes


def log_format(path: str) -> str:
    p = path.lower().rstrip("/")
    if p.endswith((".xes", ".xes.gz")):
        return "xes"
    if p.endswith((".csv", ".csv.gz")):
        return "csv"
    if p.endswith(".parquet") or "." not in p.rsplit("/", 1)[-1]:
        return "parquet"
    raise InputError(f"cannot tell the log format of {path} (.xes, .xes.gz, .csv, parquet)")


def _read_parquet_log(spark: SparkSession, path: str) -> DataFrame:
    """A Parquet log, or a clear InputError when the path holds no readable Parquet."""
    try:
        return spark.read.parquet(path)
    except Exception as exc:  # AnalysisException (no schema) or a footer Spark cannot read
        reason = spark_input_error(exc) or str(exc).strip().splitlines()[0][:300]
        raise InputError(f"--log {path}: not a Parquet event log (give .xes, .xes.gz, .csv "
                         f"or a Parquet directory): {reason}") from None


def read_log(spark: SparkSession, path: str, cols: Any, timezone: str = "UTC",
             one_range: bool = False, csv_multiline: bool = True,
             csv_encoding: str = "utf-8", jvm: bool = False) -> DataFrame:
    """Raw rows with the event columns, ``timestamp_raw``, ``local_time_problem`` (a naive
    time ``timezone`` skips or repeats) and file order in ``row_order``;
    ``one_range``: a plain XES file read as one range (see :func:`read_xes`);
    ``csv_multiline=False`` reads a CSV log line by line (splittable, no quoted line breaks);
    ``jvm``: a plain XES file of the common shape is parsed in the JVM (see :func:`read_xes`)."""
    fmt = log_format(path)
    if fmt == "xes":
        raw = read_xes(spark, path, one_range=one_range, instants=True, jvm=jvm)
        stamp = parse_timestamp(F.col(RAW_TS), T.StringType(), timezone, None)
        problem = local_time_problem(F.col(RAW_TS), T.StringType(), timezone, None)
        if INSTANT in raw.columns:  # read in the workers: Spark parses only the other times
            stamp = F.coalesce(F.col(INSTANT), stamp)
            problem = F.when(F.col(INSTANT).isNull(), problem)
        return raw.select(
            CASE, ACTIVITY, stamp.alias(TIMESTAMP), RESOURCE, LIFECYCLE, ATTRIBUTES,
            F.lit(0).alias(SRC_ORDER), ROW_ORDER, RAW_TS, problem.alias(LOCAL_PROBLEM),
        )
    if fmt == "csv":
        df = read_csv_strings(spark, path, multiLine=str(csv_multiline).lower(),
                              encoding=csv_encoding)
    else:
        require_path(spark, path, "log")
        df = _read_parquet_log(spark, path)
    df = df.withColumn("__row", F.monotonically_increasing_id())
    missing = [c for c in (cols.case, cols.activity, cols.timestamp) if c not in df.columns]
    if missing:
        raise InputError(f"{path}: missing column(s) {missing}; set --case-col/--activity-col/"
                         f"--timestamp-col (columns: {', '.join(df.columns[:20])})")
    std = {cols.case, cols.activity, cols.timestamp, cols.resource, cols.lifecycle,
           CORRUPT_COL, "__row"}
    extra = [c for c in df.columns if c not in std]

    def opt(name: str):
        return F.col(f"`{name}`").cast("string") if name in df.columns \
            else F.lit(None).cast("string")

    ts = F.col(f"`{cols.timestamp}`")
    attrs = F.map_filter(F.create_map(*[x for c in extra for x in (
        F.lit(c), F.col(f"`{c}`").cast("string"))]), lambda k, v: v.isNotNull()) if extra \
        else F.lit(None).cast("map<string,string>")
    corrupt = corrupt_record(df)
    return df.select(
        F.col(f"`{cols.case}`").cast("string").alias(CASE),
        F.col(f"`{cols.activity}`").cast("string").alias(ACTIVITY),
        parse_timestamp(ts, df.schema[cols.timestamp].dataType, timezone, None).alias(TIMESTAMP),
        opt(cols.resource).alias(RESOURCE), opt(cols.lifecycle).alias(LIFECYCLE),
        attrs.alias(ATTRIBUTES), F.lit(0).alias(SRC_ORDER), F.col("__row").alias(ROW_ORDER),
        ts.cast("string").alias(RAW_TS), corrupt.alias(CORRUPT_COL),
        local_time_problem(ts, df.schema[cols.timestamp].dataType, timezone, None)
        .alias(LOCAL_PROBLEM),
    )
