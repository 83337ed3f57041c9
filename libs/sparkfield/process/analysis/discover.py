"""The process views on any DataFrame with a case, an activity and a timestamp column, for
notebooks: ``discover_dfg(df, case="order_id", activity="step", timestamp="at")``.

Events of a case are ordered by timestamp; equal timestamps keep the DataFrame's row order (a
stable sort, as pm4py does), or the order of the ``order`` column when one is given. A row with
a null case, activity or timestamp (or a timestamp string that does not parse) is an error that
names the column, never dropped silently; the jobs keep such rows as rejects instead.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.core.columns import column
from sparkfield.process.analysis import views as _views
from sparkfield.process.eventlog.events import clock_changes, parse_timestamp
from sparkfield.process.eventlog.schema import ACTIVITY, CASE, ROW_ORDER, SRC_ORDER, TIMESTAMP

__all__ = ["activities", "all_views", "case_durations", "discover_dfg", "end_activities",
           "event_frame", "start_activities", "variants"]


def event_frame(df: DataFrame, case: str = CASE, activity: str = ACTIVITY,
                timestamp: str = TIMESTAMP, order: str | None = None,
                timezone: str = "UTC", checked: bool = False) -> DataFrame:
    """``df`` as canonical events (case_id, activity, timestamp, src_order, row_order).

    Timestamp strings without an offset, and dates, are wall-clock times in ``timezone``
    (one the zone skips or shows twice, at a change of its clocks, names no instant).
    Raises ``ValueError`` naming the column when a row has no case, activity or timestamp
    (a pass over the data that ``checked=True`` skips, for events known to have none)."""
    for name in (case, activity, timestamp, order):
        if name is not None and name not in df.columns:
            raise ValueError(f"column {name!r} not found; columns are {df.columns}")
    raw_ts = df.schema[timestamp].dataType
    events = df.select(
        column(case).cast("string").alias(CASE),
        column(activity).cast("string").alias(ACTIVITY),
        parse_timestamp(column(timestamp), raw_ts, timezone, None).alias(TIMESTAMP),
        F.lit(0).cast(T.IntegerType()).alias(SRC_ORDER),
        (column(order) if order else F.monotonically_increasing_id()).cast("long")
        .alias(ROW_ORDER),
    )
    if checked:
        return events
    bad = events.select(*[F.sum(F.col(c).isNull().cast("long")).alias(c)
                          for c in (CASE, ACTIVITY, TIMESTAMP)]).first()
    names = {CASE: case, ACTIVITY: activity, TIMESTAMP: timestamp}
    problems = [f"{bad[c]} rows with a null or unparseable {names[c]!r}"
                for c in (CASE, ACTIVITY, TIMESTAMP) if bad[c]]
    if bad[TIMESTAMP] and clock_changes(timezone):
        problems[-1] += f" (or a wall-clock time that {timezone} skips or shows twice)"
    if problems:
        raise ValueError("; ".join(problems))
    return events


def _seqs(df: DataFrame, case: str, activity: str, timestamp: str, order: str | None,
          timezone: str) -> DataFrame:
    return _views.case_sequences(event_frame(df, case, activity, timestamp, order, timezone))


def discover_dfg(df: DataFrame, case: str = CASE, activity: str = ACTIVITY,
                 timestamp: str = TIMESTAMP, order: str | None = None,
                 timezone: str = "UTC") -> DataFrame:
    """Directly-follows arcs: source, target, frequency, mean_s, median_s."""
    return _views.dfg(_seqs(df, case, activity, timestamp, order, timezone))


def start_activities(df: DataFrame, case: str = CASE, activity: str = ACTIVITY,
                     timestamp: str = TIMESTAMP, order: str | None = None,
                     timezone: str = "UTC") -> DataFrame:
    """activity, cases: the first activity of each case, counted."""
    return _views.endpoint_activities(_seqs(df, case, activity, timestamp, order, timezone),
                                      "start")


def end_activities(df: DataFrame, case: str = CASE, activity: str = ACTIVITY,
                   timestamp: str = TIMESTAMP, order: str | None = None,
                   timezone: str = "UTC") -> DataFrame:
    """activity, cases: the last activity of each case, counted."""
    return _views.endpoint_activities(_seqs(df, case, activity, timestamp, order, timezone),
                                      "end")


def case_durations(df: DataFrame, case: str = CASE, activity: str = ACTIVITY,
                   timestamp: str = TIMESTAMP, order: str | None = None,
                   timezone: str = "UTC") -> DataFrame:
    """case_id, start, end, duration_s, events, variant (JSON array of activities)."""
    return _views.cases(_seqs(df, case, activity, timestamp, order, timezone))


def variants(df: DataFrame, case: str = CASE, activity: str = ACTIVITY,
             timestamp: str = TIMESTAMP, order: str | None = None,
             timezone: str = "UTC") -> DataFrame:
    """variant (JSON array of activities), cases, mean_duration_s, share."""
    table = case_durations(df, case, activity, timestamp, order, timezone)
    return _views.variants(table, table.count())


def activities(df: DataFrame, case: str = CASE, activity: str = ACTIVITY,
               timestamp: str = TIMESTAMP, order: str | None = None,
               timezone: str = "UTC") -> DataFrame:
    """activity, events, cases."""
    return _views.activities(event_frame(df, case, activity, timestamp, order, timezone))


def all_views(df: DataFrame, case: str = CASE, activity: str = ACTIVITY,
              timestamp: str = TIMESTAMP, order: str | None = None,
              timezone: str = "UTC") -> _views.Views:
    """Every view from one per-case table (cache the input when it is expensive to read)."""
    events = event_frame(df, case, activity, timestamp, order, timezone)
    seqs = _views.case_sequences(events)
    return _views.compute_views(events, seqs, seqs.count())
