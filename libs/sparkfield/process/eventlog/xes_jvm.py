"""XES trace records of the common shape parsed in the JVM, where they are read: the rows of
the Python reader (:mod:`sparkfield.process.eventlog.xes_split`) with no Python worker in the
read, about twice its speed.

The parse is the library's Java function ``sparkfield.xes.TraceEvents`` (``libs/jvm``), which
follows :func:`sparkfield.process.eventlog.xes_fast.trace_events` character for character:
the same grammar, the same case, the same "a later key wins", and the instants of
:func:`sparkfield.process.eventlog.iso_instants.iso_instants`. It reads a record of that shape
only. A log holding any other record (a comment, an entity, a nested attribute, ...) is the
Python reader's: the first such record fails the action with an error
:func:`needs_python_reader` recognises, and the caller reads the log again with it. The first
records are tried in Python before the read, so a log written otherwise throughout never
starts a JVM read.

The events' order is kept in ``row_order``: the rows are numbered as they come out of each
byte range (``monotonically_increasing_id``: the range's index in the high bits), which is
the file's order, as the ranges are read in file order."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sparkfield.core.connect import is_connect
from sparkfield.core.java_functions import java_function
from sparkfield.process.eventlog.events import RAW_TS
from sparkfield.process.eventlog.schema import (
    ACTIVITY,
    ATTRIBUTES,
    CASE,
    LIFECYCLE,
    RESOURCE,
    ROW_ORDER,
)
from sparkfield.process.eventlog.xes_fast import trace_events, without_log_end

FUNCTION = "sparkfield_xes_trace_events"
_CLASS = "sparkfield.xes.TraceEvents"
_RETURN_TYPE = ("struct<case: string, events: array<struct<activity: string, time: string, "
                "resource: string, lifecycle: string, attributes: map<string, string>, "
                "instant: bigint>>>")
NOT_OF_THE_SHAPE = "XES trace record not of the common shape for the JVM reader"


def needs_python_reader(exc: BaseException) -> bool:
    """Whether ``exc``, raised by an action on :func:`jvm_rows`, is a record the JVM reader
    does not read: read the log again with the Python reader."""
    seen: BaseException | None = exc
    while seen is not None:
        if NOT_OF_THE_SHAPE in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def parsed_in_jvm(rows: DataFrame) -> bool:
    """Whether rows of :func:`~sparkfield.process.eventlog.xes_split.read_xes` are parsed in
    the JVM (a classic session's plan holds the Java function)."""
    if is_connect(rows.sparkSession):
        return False
    return FUNCTION in rows._jdf.queryExecution().logical().toString()


def common_shape(records: list[str]) -> bool:
    """Whether trace records (the text after ``<trace``; the log's end tag cut as the
    readers cut it) are all of the shape the JVM reader reads."""
    return all(trace_events(without_log_end(r)) is not None for r in records)


def jvm_rows(spark: SparkSession, text: DataFrame, instants: str | None) -> DataFrame | None:
    """The event rows of a plain file's records (``text``: Spark's text source cut at
    ``<trace``, the log's header its first record), with the instants in a column named
    ``instants`` when given; None where the session cannot load the Java function."""
    if not java_function(spark, FUNCTION, _CLASS, _RETURN_TYPE):
        return None
    header = F.monotonically_increasing_id() == 0  # the text before the first <trace
    parsed = text.select(header.alias("header"),
                         F.call_function(FUNCTION, F.col("value")).alias("trace"))
    traces = parsed.where(~F.col("header")).select(
        F.when(F.col("trace").isNull(), F.raise_error(F.lit(NOT_OF_THE_SHAPE)))
        .otherwise(F.col("trace")).alias("trace"))
    rows = traces.select(F.col("trace.case").alias(CASE), F.inline("trace.events"))
    columns = [CASE, F.col("activity").alias(ACTIVITY), F.col("time").alias(RAW_TS),
               F.col("resource").alias(RESOURCE), F.col("lifecycle").alias(LIFECYCLE),
               F.col("attributes").alias(ATTRIBUTES),
               F.monotonically_increasing_id().alias(ROW_ORDER)]
    if instants:
        columns.append(F.timestamp_micros("instant").alias(instants))
    return rows.select(*columns)
