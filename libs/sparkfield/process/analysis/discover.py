"""The process views on any DataFrame with a case, an activity and a timestamp column, for
notebooks: ``discover_dfg(df, case_col="order_id", activity_col="step", timestamp_col="at")``.

Events of a case are ordered by timestamp; equal timestamps keep the DataFrame's row order (a
stable sort, as pm4py does), or the order of the ``order_col`` column when one is given. A
column that is not there is a :class:`~sparkfield.core.errors.ColumnError` when a function is
called. A row with a null case, activity or timestamp (or a timestamp string that does not
parse) fails the query that reads it, with an error that names the column: never dropped
silently; the jobs keep such rows as rejects instead. The functions are lazy: no Spark job
runs until a result is read.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.core.columns import column, column_type, require_columns
from sparkfield.process.analysis import views as _views
from sparkfield.process.eventlog.events import clock_changes, parse_timestamp
from sparkfield.process.eventlog.schema import ACTIVITY, CASE, ROW_ORDER, SRC_ORDER, TIMESTAMP

__all__ = ["activities", "all_views", "case_durations", "discover_dfg", "end_activities",
           "event_frame", "start_activities", "variants"]


def event_columns(df: DataFrame, case_col: str, activity_col: str, timestamp_col: str,
                  order_col: str | None, *more: str | None) -> T.DataType:
    """The type of ``timestamp_col``, once every column named (``more``: others a function
    reads, None for one not asked for) is in ``df``; else :class:`ColumnError`."""
    require_columns(df, [case_col, activity_col, timestamp_col, order_col, *more])
    return column_type(df, timestamp_col)


def values_present(case: Column, activity: Column, timestamp: Column,
                   names: tuple[str, str, str], timezone: str) -> Column:
    """True for an event with a case, an activity and a timestamp (``names``: the columns
    they come from); for any other the query fails (``F.raise_error``) naming the column, so
    the check costs no pass of its own over the data. Used as a filter, the predicate keeps
    all three columns in the plan, so no view can prune a column unchecked."""
    case_col, activity_col, timestamp_col = names
    where = F.concat(F.lit(" (case "), case.cast("string"), F.lit(")"))
    hint = (f" (or a wall-clock time that {timezone} skips or shows twice)"
            if clock_changes(timezone) else "")
    return (F.when(case.isNull(),
                   F.raise_error(F.lit(f"a row with a null or unparseable {case_col!r}")))
            .when(activity.isNull(), F.raise_error(F.concat(
                F.lit(f"a row with a null or unparseable {activity_col!r}"), where)))
            .when(timestamp.isNull(), F.raise_error(F.concat(
                F.lit(f"a row with a null or unparseable {timestamp_col!r}{hint}"), where)))
            .otherwise(F.lit(True)))


def event_frame(df: DataFrame, case_col: str = CASE, activity_col: str = ACTIVITY,
                timestamp_col: str = TIMESTAMP, order_col: str | None = None,
                timezone: str = "UTC", checked: bool = False) -> DataFrame:
    """``df`` as canonical events (case_id, activity, timestamp, src_order, row_order).

    Timestamp strings without an offset, and dates, are wall-clock times in ``timezone``
    (one the zone skips or shows twice, at a change of its clocks, names no instant).
    A missing column is a :class:`ColumnError` here; a row with no case, activity or
    timestamp fails the query that reads the events, naming the column (``checked=True``
    leaves that check out, for events known to have none)."""
    raw_ts = event_columns(df, case_col, activity_col, timestamp_col, order_col)
    events = df.select(
        column(case_col).cast("string").alias(CASE),
        column(activity_col).cast("string").alias(ACTIVITY),
        parse_timestamp(column(timestamp_col), raw_ts, timezone, None).alias(TIMESTAMP),
        F.lit(0).cast(T.IntegerType()).alias(SRC_ORDER),
        (column(order_col) if order_col else F.monotonically_increasing_id()).cast("long")
        .alias(ROW_ORDER),
    )
    if checked:
        return events
    return events.where(values_present(F.col(CASE), F.col(ACTIVITY), F.col(TIMESTAMP),
                                       (case_col, activity_col, timestamp_col), timezone))


def _seqs(df: DataFrame, case_col: str, activity_col: str, timestamp_col: str,
          order_col: str | None, timezone: str) -> DataFrame:
    return _views.case_sequences(event_frame(df, case_col, activity_col, timestamp_col,
                                             order_col, timezone))


def discover_dfg(df: DataFrame, case_col: str = CASE, activity_col: str = ACTIVITY,
                 timestamp_col: str = TIMESTAMP, order_col: str | None = None,
                 timezone: str = "UTC") -> DataFrame:
    """Directly-follows arcs: source, target, frequency, mean_s, median_s."""
    return _views.dfg(_seqs(df, case_col, activity_col, timestamp_col, order_col, timezone))


def start_activities(df: DataFrame, case_col: str = CASE, activity_col: str = ACTIVITY,
                     timestamp_col: str = TIMESTAMP, order_col: str | None = None,
                     timezone: str = "UTC") -> DataFrame:
    """activity, cases: the first activity of each case, counted."""
    seqs = _seqs(df, case_col, activity_col, timestamp_col, order_col, timezone)
    return _views.endpoint_activities(seqs, "start")


def end_activities(df: DataFrame, case_col: str = CASE, activity_col: str = ACTIVITY,
                   timestamp_col: str = TIMESTAMP, order_col: str | None = None,
                   timezone: str = "UTC") -> DataFrame:
    """activity, cases: the last activity of each case, counted."""
    seqs = _seqs(df, case_col, activity_col, timestamp_col, order_col, timezone)
    return _views.endpoint_activities(seqs, "end")


def case_durations(df: DataFrame, case_col: str = CASE, activity_col: str = ACTIVITY,
                   timestamp_col: str = TIMESTAMP, order_col: str | None = None,
                   timezone: str = "UTC") -> DataFrame:
    """case_id, start, end, duration_s, events, variant (JSON array of activities)."""
    return _views.cases(_seqs(df, case_col, activity_col, timestamp_col, order_col, timezone))


def variants(df: DataFrame, case_col: str = CASE, activity_col: str = ACTIVITY,
             timestamp_col: str = TIMESTAMP, order_col: str | None = None,
             timezone: str = "UTC") -> DataFrame:
    """variant (JSON array of activities), cases, mean_duration_s, share (of all cases,
    summed over the variants in the query itself)."""
    table = case_durations(df, case_col, activity_col, timestamp_col, order_col, timezone)
    return _views.variants(table)


def activities(df: DataFrame, case_col: str = CASE, activity_col: str = ACTIVITY,
               timestamp_col: str = TIMESTAMP, order_col: str | None = None,
               timezone: str = "UTC") -> DataFrame:
    """activity, events, cases."""
    return _views.activities(event_frame(df, case_col, activity_col, timestamp_col, order_col,
                                         timezone))


def all_views(df: DataFrame, case_col: str = CASE, activity_col: str = ACTIVITY,
              timestamp_col: str = TIMESTAMP, order_col: str | None = None,
              timezone: str = "UTC") -> _views.Views:
    """Every view from one per-case table (cache the input when it is expensive to read)."""
    events = event_frame(df, case_col, activity_col, timestamp_col, order_col, timezone)
    seqs = _views.case_sequences(events)
    return _views.compute_views(events, seqs)
