"""A mapping's sources and views as DataFrames, and its expressions compiled against them:
what the classic and the object-centric extraction share."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from pyspark.errors import AnalysisException, ParseException
from pyspark.logger import PySparkLogger
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.core.errors import ConfigError, InputError
from sparkfield.core.io import read_csv_strings, require_path
from sparkfield.process.extraction.mapping_common import MappingError, Source

ROW_COL = "__row"  # a source row's position in its source


def read_source(spark: SparkSession, src: Source) -> DataFrame:
    """One source as a DataFrame with ``__row`` (its row order). CSV columns stay strings so
    that parsing problems become rejects with a reason instead of silent nulls."""
    if src.format == "csv":
        df = read_csv_strings(spark, src.path, **src.options)
    elif src.format in ("parquet", "json"):
        require_path(spark, src.path, f"source {src.name!r}")
        df = spark.read.format(src.format).options(**src.options).load(src.path)
    else:
        df = _read_jdbc(spark, src)
    return with_row_order(df)


def with_row_order(df: DataFrame) -> DataFrame:
    """``df`` with ``__row``: its row order, as the planners of both forms expect a
    source."""
    return df.withColumn(ROW_COL, F.monotonically_increasing_id())


_DRIVERS = {
    "postgresql": "org.postgresql.Driver",
    "mysql": "com.mysql.cj.jdbc.Driver",
    "mariadb": "org.mariadb.jdbc.Driver",
    "sqlserver": "com.microsoft.sqlserver.jdbc.SQLServerDriver",
    "oracle": "oracle.jdbc.OracleDriver",
}


def _env(name: str | None, src: Source, what: str) -> str | None:
    if not name:
        return None
    value = os.environ.get(name)
    if value is None:
        raise MappingError(f"source {src.name!r}: environment variable {name} ({what}) is not set")
    return value


def _read_jdbc(spark: SparkSession, src: Source) -> DataFrame:
    # timestamps without zone stay wall-clock times, read in the mapping's time zone
    reader = (spark.read.format("jdbc").option("url", src.url).option("dbtable", src.table)
              .option("preferTimestampNTZ", "true"))
    driver = src.options.get("driver") or _DRIVERS.get(src.url.split(":")[1] if src.url else "")
    if driver:  # named explicitly so a jar passed with spark.jars is found
        reader = reader.option("driver", driver)
    user = _env(src.user_env, src, "user_env")
    password = _env(src.password_env, src, "password_env")
    if user is not None:
        reader = reader.option("user", user)
    if password is not None:
        reader = reader.option("password", password)
    if src.partition_column:
        if src.lower_bound is None or src.upper_bound is None:
            raise MappingError(f"source {src.name!r}: partition_column needs lower_bound and "
                               "upper_bound")
        reader = (reader.option("partitionColumn", src.partition_column)
                  .option("lowerBound", src.lower_bound).option("upperBound", src.upper_bound)
                  .option("numPartitions", src.num_partitions or 4))
    for k, v in src.options.items():
        reader = reader.option(k, v)
    try:
        return reader.load()  # connects: reads the table's schema
    except Exception as exc:
        raise InputError(jdbc_problem(src, driver, exc)) from None


def jdbc_problem(src: Source, driver: str | None, exc: BaseException) -> str:
    """One line naming the source and what is wrong: no driver, no server, refused login."""
    text = str(exc)
    where = f"source {src.name!r} ({src.url})"
    if "ClassNotFoundException" in text or "No suitable driver" in text:
        return (f"{where}: JDBC driver {driver or '(none named)'} not found; pass its jar, "
                "e.g. --conf spark.jars=/usr/share/java/postgresql.jar")
    for line in text.splitlines():
        line = line.strip().removeprefix(": ")
        if any(k in line for k in ("authentication failed", "Access denied", "Login failed",
                                   "password", "ORA-01017")):
            return f"{where}: the server refused the login: {java_message(line)}"
        if any(k in line for k in ("Connection refused", "UnknownHost", "timed out",
                                   "Connection to ", "No route to host",
                                   "Communications link failure")):
            return f"{where}: cannot connect: {java_message(line)}"
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), type(exc).__name__)
    return f"{where}: JDBC read failed: {java_message(first)}"


def java_message(line: str) -> str:
    """The message without Java class-name prefixes."""
    parts = [p.strip() for p in line.split(": ")]
    while len(parts) > 1 and "." in parts[0] and " " not in parts[0]:
        parts = parts[1:]
    return ": ".join(parts)[:300]


def expr_types(df: DataFrame, texts: Iterable[str | None]) -> dict[str, T.DataType]:
    """The type of every expression of ``texts`` (None left out) on ``df``, from one analysis
    of them all instead of one each; empty when one of them does not compile on its own or
    beside the others (an aggregate beside a column), so that :func:`compile_expr` checks
    each in turn and names the one at fault, as without it."""
    unique = list(dict.fromkeys(t for t in texts if t is not None))
    if not unique:
        return {}
    try:
        with _quiet_query_errors():  # the check of each expression logs and names its own
            fields = df.select(*[F.expr(t).alias(f"_{i}")
                                 for i, t in enumerate(unique)]).schema
    except (AnalysisException, ParseException):
        return {}
    return {t: f.dataType for t, f in zip(unique, fields, strict=True)}


@contextmanager
def _quiet_query_errors() -> Iterator[None]:
    """PySpark's loggers of analysis errors (an ERROR with the JVM's stack trace each) held
    back for a while."""
    # PySpark's own logger class: a plain one created first would refuse PySpark's fields
    loggers = [PySparkLogger.getLogger(n) for n in ("SQLQueryContextLogger",
                                                    "DataFrameQueryContextLogger")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def expr_type(df: DataFrame, text: str, label: str, field: str,
              types: Mapping[str, T.DataType] | None = None) -> T.DataType:
    """The type of a mapping expression on the source, from ``types``
    (:func:`expr_types`) when it holds it, else from an analysis now: an unknown column or a
    syntax error is reported by ``label`` (the activity, object type, ...) and field before
    any data is processed."""
    if types and text in types:
        return types[text]
    try:
        return df.select(F.expr(text).alias("_")).schema["_"].dataType  # analysis only
    except (AnalysisException, ParseException) as exc:
        first = str(exc).strip().splitlines()[0]
        raise MappingError(f"{label}: {field} expression {text!r}: {first}") from None


def compile_expr(df: DataFrame, text: str, label: str, field: str,
                 boolean: bool = False, types: Mapping[str, T.DataType] | None = None
                 ) -> Column:
    """A mapping expression as a column, checked by :func:`expr_type` (``types``: the types
    of :func:`expr_types`, which save an analysis each); ``boolean``: it must give true or
    false (a ``where``)."""
    dtype = expr_type(df, text, label, field, types)
    if boolean and not isinstance(dtype, T.BooleanType):
        raise MappingError(f"{label}: where expression {text!r} gives {dtype.simpleString()}, "
                           "not a boolean")
    return F.expr(text)


Keep = Callable[[DataFrame, str], DataFrame]
"""Applied to every source and view by name as it is made (e.g. kept when several plans read
it); what it returns is what the views and the planners read."""


def source_frames(spark: SparkSession, mapping: Any, keep: Keep | None = None
                  ) -> dict[str, DataFrame]:
    """Every source and SQL view of a mapping (classic or object-centric) by name, each with
    ``__row``: its row order in a source; 0 in a view (a join has no stable row order, so ties
    inside a view are broken by activity name)."""
    return with_views(spark, {name: read_source(spark, s)
                              for name, s in mapping.sources.items()}, mapping, keep)


def given_frames(frames: Mapping[str, DataFrame], mapping: Any, keep: Keep | None = None
                 ) -> dict[str, DataFrame]:
    """:func:`source_frames` of a mapping of frames: the frames given for its sources (by
    name, in their row order), and its views over them."""
    for name in mapping.sources:
        if name not in frames:  # the mapping was parsed for other frames
            raise MappingError(f"no frame given for source {name!r} "
                               f"(frames: {', '.join(frames) or 'none'})")
        if not isinstance(frames[name], DataFrame):
            raise ConfigError(f"frame {name!r}: expected a DataFrame, got "
                              f"{type(frames[name]).__name__}")
    spark = frames[next(iter(mapping.sources))].sparkSession
    return with_views(spark, {name: with_row_order(frames[name]) for name in mapping.sources},
                      mapping, keep)


def with_views(spark: SparkSession, frames: dict[str, DataFrame], mapping: Any,
               keep: Keep | None = None) -> dict[str, DataFrame]:
    """The sources (with ``__row``) and the mapping's views. Each source is registered as a
    temporary view of its name, so that views and expressions may query it; views are
    registered in mapping order: a view may select from the sources and the views before
    it. ``keep`` is applied to each source and view before anything reads it."""
    keep = keep or (lambda df, name: df)
    frames = {name: keep(df, name) for name, df in frames.items()}
    for name, df in frames.items():
        df.drop(ROW_COL).createOrReplaceTempView(name)
    for name, query in mapping.views.items():
        try:
            view = spark.sql(query)
        except (AnalysisException, ParseException) as exc:
            first = str(exc).strip().splitlines()[0]
            raise MappingError(f"view {name!r}: {first}") from None
        frames[name] = keep(view.withColumn(ROW_COL, F.lit(0).cast("long")), name)
        frames[name].drop(ROW_COL).createOrReplaceTempView(name)
    return frames
