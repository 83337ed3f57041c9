"""Process-log filters on any DataFrame of events, named and parameterised as pm4py's:
``filter_variants_top_k(df, 5, case_col="order_id", activity_col="step", timestamp_col="at")``.

Every filter returns the input's rows that it keeps, with the input's columns untouched, so
filters chain with ``df.transform`` and feed the views of
:mod:`sparkfield.process.analysis.discover`.
Events of a case are ordered as the views order them: by timestamp, then the DataFrame's row
order (or the ``order_col`` column when one is given), then the activity. A column that is
not there is a :class:`~sparkfield.core.errors.ColumnError` when a filter is called; a row
with a null case, activity or timestamp (or a timestamp string that does not parse) fails the
query that reads the filter's result, naming the column, as in the views: a filter never
drops such a row silently. The filters are lazy (only :func:`filter_time_range` may run a
one-row job, to check its bounds). Only Spark's built-in and window functions are used, so
the filters also run over Spark Connect.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import date, datetime

from pyspark.sql import Column, DataFrame, Window, WindowSpec
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.core.columns import column
from sparkfield.process.analysis.discover import event_columns, values_present
from sparkfield.process.analysis.views import seconds_between
from sparkfield.process.eventlog.events import parse_timestamp, wall_clock_problem
from sparkfield.process.eventlog.schema import ACTIVITY, CASE, TIMESTAMP

__all__ = ["TIME_RANGE_MODES", "filter_activities_rework", "filter_case_performance",
           "filter_case_size", "filter_directly_follows_relation", "filter_end_activities",
           "filter_event_attribute_values", "filter_eventually_follows_relation",
           "filter_start_activities", "filter_time_range",
           "filter_variants_by_coverage_percentage", "filter_variants_top_k"]

TIME_RANGE_MODES = ("events", "traces_contained", "traces_intersecting", "traces_starting_in",
                    "traces_starting_in_exclude", "traces_completing_in",
                    "traces_completing_in_exclude")
ATTRIBUTE_LEVELS = ("event", "case")

# helper columns, dropped before a filter returns
_TS, _ORD, _ACT, _CASE, _HIT = "__sf_ts", "__sf_ord", "__sf_act", "__sf_case", "__sf_hit"

Instant = str | datetime | date


class _Events:
    """A frame of events with its ordering keys as helper columns and the case windows."""

    def __init__(self, df: DataFrame, case_col: str, activity_col: str, timestamp_col: str,
                 order_col: str | None, timezone: str, *more: str | None):
        raw_ts = event_columns(df, case_col, activity_col, timestamp_col, order_col, *more)
        self.columns = df.columns
        frame = df.select(
            "*",
            parse_timestamp(column(timestamp_col), raw_ts, timezone, None).alias(_TS),
            (column(order_col) if order_col else F.monotonically_increasing_id()).cast("long")
            .alias(_ORD),
            column(activity_col).cast("string").alias(_ACT),
            column(case_col).alias(_CASE),
        )
        self.frame = frame.where(values_present(F.col(_CASE), F.col(_ACT), F.col(_TS),
                                                (case_col, activity_col, timestamp_col),
                                                timezone))
        self.ordered: WindowSpec = Window.partitionBy(_CASE).orderBy(_TS, _ORD, _ACT)
        self.whole: WindowSpec = self.ordered.rowsBetween(Window.unboundedPreceding,
                                                          Window.unboundedFollowing)

    def rows_where(self, keep: Column) -> DataFrame:
        """The input's rows where ``keep`` is true (a window value is the same for every
        event of a case, so a case-level condition keeps or drops whole cases)."""
        marked = self.frame.withColumn(_HIT, F.coalesce(keep, F.lit(False)))
        return marked.where(F.col(_HIT)).select(*map(column, self.columns))

    def cases_with(self, hit: Column, retain: bool) -> DataFrame:
        """Whole cases where some event has ``hit`` (``retain``), or where none has."""
        marked = self.frame.withColumn(_HIT, F.coalesce(hit, F.lit(False)))
        any_hit = F.max(F.col(_HIT).cast("int")).over(self.whole) == 1
        flagged = marked.withColumn(_HIT, any_hit)
        keep = F.col(_HIT) if retain else ~F.col(_HIT)
        return flagged.where(keep).select(*map(column, self.columns))

    def cases_in(self, cases: DataFrame) -> DataFrame:
        """The events of the cases listed in ``cases`` (one column, ``_CASE``)."""
        kept = self.frame.join(cases, on=_CASE, how="left_semi")
        return kept.select(*map(column, self.columns))

    def case_variants(self) -> DataFrame:
        """_CASE, variant: each case's activities in event order."""
        seq = F.sort_array(F.collect_list(F.struct(_TS, _ORD, _ACT)))
        return self.frame.groupBy(_CASE).agg(seq.getField(_ACT).alias("variant"))


def _instant(df: DataFrame, value: Instant, timezone: str, name: str) -> Column:
    """A bound as a timestamp column, read as the events' timestamps are read: a naive time
    or a date is wall-clock time in ``timezone``, refused when the zone skips it or shows it
    twice."""
    if isinstance(value, (datetime, date)):
        text = value.isoformat()
    elif isinstance(value, str):
        text = value.strip()
    else:
        raise ValueError(f"{name} must be a date, datetime or ISO string, got {value!r}")
    try:
        datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{name} is not an ISO date or timestamp: {value!r}") from None
    problem = wall_clock_problem(df.sparkSession, text, timezone)
    if problem:
        raise ValueError(f"{name} {text!r} {problem}")
    return parse_timestamp(F.lit(text), T.StringType(), timezone, None)


def _names(values: Iterable[str] | str, name: str) -> list[str]:
    """A collection of activity names; a lone string is refused rather than read as letters."""
    if isinstance(values, str):
        raise ValueError(f"{name} must be a list of activities, got the string {values!r}")
    return [str(v) for v in values]


def _pairs(pairs: Iterable[Sequence[str]]) -> list[tuple[str, str]]:
    out = []
    for pair in pairs:
        if isinstance(pair, str) or len(pair) != 2:
            raise ValueError(f"pairs must hold (source, target) activity pairs, got {pair!r}")
        out.append((str(pair[0]), str(pair[1])))
    return out


def filter_time_range(df: DataFrame, start: Instant, end: Instant, mode: str = "events",
                      case_col: str = CASE, activity_col: str = ACTIVITY,
                      timestamp_col: str = TIMESTAMP, order_col: str | None = None,
                      timezone: str = "UTC") -> DataFrame:
    """pm4py's time-range filter, bounds included: ``events`` keeps the events in
    [start, end]; ``traces_contained`` the cases wholly inside; ``traces_intersecting`` the
    cases that overlap it (first event before ``end`` and last after ``start``, strictly, as in
    pm4py); ``traces_starting_in`` / ``traces_completing_in`` the cases whose first / last
    event is inside, and their ``_exclude`` forms the other cases. A naive bound is read in
    ``timezone``; one that zone skips or shows twice is a ``ValueError``.

    Runs a Spark job (of one row) for a naive bound in a zone that changes its clocks, to
    read the bound by the zone rules Spark reads the events with, before the filter is
    built."""
    if mode not in TIME_RANGE_MODES:
        raise ValueError(f"mode must be one of {', '.join(TIME_RANGE_MODES)}; got {mode!r}")
    ev = _Events(df, case_col, activity_col, timestamp_col, order_col, timezone)
    lo, hi = _instant(df, start, timezone, "start"), _instant(df, end, timezone, "end")
    ts = F.col(_TS)
    first, last = F.min(ts).over(ev.whole), F.max(ts).over(ev.whole)
    keep = {
        "events": ts.between(lo, hi),
        "traces_contained": (first >= lo) & (last <= hi),
        "traces_intersecting": (first < hi) & (last > lo),
        "traces_starting_in": first.between(lo, hi),
        "traces_starting_in_exclude": ~first.between(lo, hi),
        "traces_completing_in": last.between(lo, hi),
        "traces_completing_in_exclude": ~last.between(lo, hi),
    }[mode]
    return ev.rows_where(keep)


def filter_variants_top_k(df: DataFrame, k: int, case_col: str = CASE, activity_col: str = ACTIVITY,
                          timestamp_col: str = TIMESTAMP, order_col: str | None = None,
                          timezone: str = "UTC") -> DataFrame:
    """The cases of the ``k`` most frequent variants. Variants with as many cases are ranked as
    pm4py ranks them: the greater sequence of activities first (compared name by name).
    Its plan reads ``df`` three times: checkpoint the result before chaining another variant
    filter, or each copy is copied again (the jobs do)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValueError(f"k must be a whole number >= 0, got {k!r}")
    ev = _Events(df, case_col, activity_col, timestamp_col, order_col, timezone)
    per_case = ev.case_variants()
    top = (per_case.groupBy("variant").agg(F.count(F.lit(1)).alias("cases"))
           .orderBy(F.desc("cases"), F.desc("variant")).limit(k))
    return ev.cases_in(per_case.join(top, on="variant", how="left_semi").select(_CASE))


def filter_variants_by_coverage_percentage(df: DataFrame, min_coverage_percentage: float,
                                           case_col: str = CASE, activity_col: str = ACTIVITY,
                                           timestamp_col: str = TIMESTAMP,
                                           order_col: str | None = None,
                                           timezone: str = "UTC") -> DataFrame:
    """The cases of every variant that alone holds at least ``min_coverage_percentage`` (a
    fraction, 0.1 = 10 %) of all cases. As in pm4py, each variant's own share is compared,
    not a running total: 0.4 on variants of 50 %, 40 % and 10 % of cases keeps the first two.
    Its plan reads ``df`` three times, as :func:`filter_variants_top_k`'s does."""
    if isinstance(min_coverage_percentage, bool) or not 0 <= min_coverage_percentage <= 1:
        raise ValueError("min_coverage_percentage must be a fraction in [0, 1], got "
                         f"{min_coverage_percentage!r}")
    ev = _Events(df, case_col, activity_col, timestamp_col, order_col, timezone)
    per_case = ev.case_variants()
    counts = per_case.groupBy("variant").agg(F.count(F.lit(1)).alias("cases"))
    with_total = counts.withColumn("total", F.sum("cases").over(Window.partitionBy()))
    kept = with_total.where(F.col("cases")
                            >= F.lit(float(min_coverage_percentage)) * F.col("total"))
    return ev.cases_in(per_case.join(kept, on="variant", how="left_semi").select(_CASE))


def filter_case_performance(df: DataFrame, min_performance: float, max_performance: float,
                            case_col: str = CASE, activity_col: str = ACTIVITY,
                            timestamp_col: str = TIMESTAMP, order_col: str | None = None,
                            timezone: str = "UTC") -> DataFrame:
    """The cases whose duration (seconds from the first event to the last) is in
    [min_performance, max_performance]."""
    ev = _Events(df, case_col, activity_col, timestamp_col, order_col, timezone)
    ts = F.col(_TS)
    duration = seconds_between(F.min(ts).over(ev.whole), F.max(ts).over(ev.whole))
    return ev.rows_where(duration.between(float(min_performance), float(max_performance)))


def filter_case_size(df: DataFrame, min_size: int, max_size: int | None = None,
                     case_col: str = CASE, activity_col: str = ACTIVITY,
                     timestamp_col: str = TIMESTAMP, order_col: str | None = None,
                     timezone: str = "UTC") -> DataFrame:
    """The cases with ``min_size`` to ``max_size`` events, both included (None: no upper
    bound)."""
    ev = _Events(df, case_col, activity_col, timestamp_col, order_col, timezone)
    size = F.count(F.lit(1)).over(ev.whole)
    keep = size >= int(min_size)
    if max_size is not None:
        keep = keep & (size <= int(max_size))
    return ev.rows_where(keep)


def _endpoint_filter(which: str) -> Callable[..., DataFrame]:
    """``filter_start_activities`` (``which`` "start") or ``filter_end_activities`` ("end"):
    one filter on the activity at either end of each case."""
    pick, position = (F.first, "first") if which == "start" else (F.last, "last")

    def endpoint_filter(df: DataFrame, activities: Iterable[str], retain: bool = True,
                        case_col: str = CASE, activity_col: str = ACTIVITY,
                        timestamp_col: str = TIMESTAMP, order_col: str | None = None,
                        timezone: str = "UTC") -> DataFrame:
        names = _names(activities, "activities")
        ev = _Events(df, case_col, activity_col, timestamp_col, order_col, timezone)
        endpoint = pick(F.col(_ACT)).over(ev.whole).isin(names)
        return ev.rows_where(endpoint if retain else ~endpoint)

    endpoint_filter.__name__ = endpoint_filter.__qualname__ = f"filter_{which}_activities"
    endpoint_filter.__doc__ = (f"The cases whose {position} activity is one of ``activities`` "
                               "(``retain=False``: the others).")
    return endpoint_filter


filter_start_activities = _endpoint_filter("start")
filter_end_activities = _endpoint_filter("end")


def filter_event_attribute_values(df: DataFrame, attribute_col: str, values: Iterable[object],
                                  level: str = "case", retain: bool = True,
                                  case_col: str = CASE, activity_col: str = ACTIVITY,
                                  timestamp_col: str = TIMESTAMP, order_col: str | None = None,
                                  timezone: str = "UTC") -> DataFrame:
    """By the values of the event column ``attribute_col``. ``level="event"`` keeps the events
    whose value is in ``values`` (``retain=False``: the others, those without a value
    included); ``"case"`` keeps the whole cases with at least one such event
    (``retain=False``: the cases with none). A missing value never matches, as in pm4py."""
    if level not in ATTRIBUTE_LEVELS:
        raise ValueError(f"level must be 'event' or 'case', got {level!r}")
    if isinstance(values, str):
        raise ValueError(f"values must be a list, got the string {values!r}")
    wanted = list(values)
    ev = _Events(df, case_col, activity_col, timestamp_col, order_col, timezone, attribute_col)
    hit = F.coalesce(column(attribute_col).isin(wanted), F.lit(False)) if wanted else F.lit(False)
    if level == "event":
        return ev.rows_where(hit if retain else ~hit)
    return ev.cases_with(hit, retain)


def filter_directly_follows_relation(df: DataFrame, pairs: Iterable[Sequence[str]],
                                     retain: bool = True, case_col: str = CASE,
                                     activity_col: str = ACTIVITY, timestamp_col: str = TIMESTAMP,
                                     order_col: str | None = None, timezone: str = "UTC"
                                     ) -> DataFrame:
    """The cases where some pair (a, b) occurs with b right after a (``retain=False``: the
    cases where none does)."""
    wanted = _pairs(pairs)
    ev = _Events(df, case_col, activity_col, timestamp_col, order_col, timezone)
    act, prev = F.col(_ACT), F.lag(_ACT).over(ev.ordered)
    hit = F.lit(False)
    for a, b in wanted:
        hit = hit | ((prev == a) & (act == b))
    return ev.cases_with(hit, retain)


def filter_eventually_follows_relation(df: DataFrame, pairs: Iterable[Sequence[str]],
                                       retain: bool = True, case_col: str = CASE,
                                       activity_col: str = ACTIVITY, timestamp_col: str = TIMESTAMP,
                                       order_col: str | None = None, timezone: str = "UTC"
                                       ) -> DataFrame:
    """The cases where some pair (a, b) occurs with b anywhere after a (``retain=False``: the
    cases where none does); (a, a) needs a to occur twice."""
    wanted = _pairs(pairs)
    ev = _Events(df, case_col, activity_col, timestamp_col, order_col, timezone)
    before = ev.ordered.rowsBetween(Window.unboundedPreceding, -1)
    act = F.col(_ACT)
    hit = F.lit(False)
    for a, b in wanted:
        seen_a = F.max((act == a).cast("int")).over(before) == 1
        hit = hit | ((act == b) & seen_a)
    return ev.cases_with(hit, retain)


def filter_activities_rework(df: DataFrame, activity_name: str, min_occurrences: int = 2,
                             case_col: str = CASE, activity_col: str = ACTIVITY,
                             timestamp_col: str = TIMESTAMP, order_col: str | None = None,
                             timezone: str = "UTC") -> DataFrame:
    """The cases where ``activity_name`` occurs at least ``min_occurrences`` times (rework)."""
    if isinstance(min_occurrences, bool) or not isinstance(min_occurrences, int) \
            or min_occurrences < 1:
        raise ValueError(f"min_occurrences must be a whole number >= 1, got {min_occurrences!r}")
    ev = _Events(df, case_col, activity_col, timestamp_col, order_col, timezone)
    times = F.sum((F.col(_ACT) == str(activity_name)).cast("int")).over(ev.whole)
    return ev.rows_where(times >= min_occurrences)
