"""Log statistics, as a process-mining tool's statistics tab shows them, on any DataFrame of
events: ``activity_frequencies(df, case_col="order_id", activity_col="step",
timestamp_col="at")``.

Events are read and ordered as the views of :mod:`sparkfield.process.analysis.discover` read
them: a column that is not there is a :class:`~sparkfield.core.errors.ColumnError` when a
function is called, a row with a null case, activity or timestamp fails the query that reads
it, naming the column; equal timestamps keep the DataFrame's row order, or the ``order_col``
column's. Periods (hours, days, weeks starting on Monday, months) are wall-clock periods in
``timezone``, so a day is a calendar day where the work happened, whatever the session's time
zone (the hour a clock repeats when summer time ends is one period). A null resource is
dropped from the resource statistics, as pm4py skips a missing attribute value; the shares
stay relative to the whole log, so they show how much work has no resource. Only Spark's
built-in and window functions are used, so every statistic also runs over Spark Connect, and
every function that returns a DataFrame is lazy. ``checked=True`` leaves out the check for a
null case, activity or timestamp, for events known to have none (the jobs' validated events).

The ``*_figure`` functions draw the collected (small) frames as matplotlib figures through the
object API, so they never touch a global backend.

Why one module: each table of a statistics tab comes with its figure, and both read the same
event frame and period rules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from sparkfield.core.columns import column, require_columns
from sparkfield.process.analysis.discover import case_durations, event_columns, values_present
from sparkfield.process.eventlog.events import parse_timestamp
from sparkfield.process.eventlog.schema import ACTIVITY, CASE, RESOURCE, ROW_ORDER, TIMESTAMP

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["FREQS", "CaseDurationDistribution", "activities_figure", "activity_frequencies",
           "active_cases_from_cases", "active_cases_over_time", "case_duration_distribution",
           "case_duration_figure", "case_duration_histogram", "case_duration_summary",
           "events_over_time",
           "handover_of_work", "over_time_figure", "resource_activity_figure",
           "resource_activity_matrix", "resource_frequencies", "resources_figure"]

FREQS = ("hour", "day", "week", "month")
XES_RESOURCE = "org:resource"
_US_HOUR, _US_DAY = 3_600_000_000, 86_400_000_000
_IDX, _DELTA = "__sf_period", "__sf_delta"


def _events(df: DataFrame, case_col: str, activity_col: str, timestamp_col: str,
            order_col: str | None, timezone: str, resource_col: str | None = None,
            checked: bool = False) -> DataFrame:
    """case_id, activity, timestamp, row_order (and resource): the events, checked as the
    views check them (the query fails naming a null case, activity or timestamp; ``checked``
    leaves that out, not the check that the columns exist)."""
    raw_ts = event_columns(df, case_col, activity_col, timestamp_col, order_col, resource_col)
    cols = [
        column(case_col).cast("string").alias(CASE),
        column(activity_col).cast("string").alias(ACTIVITY),
        parse_timestamp(column(timestamp_col), raw_ts, timezone, None).alias(TIMESTAMP),
        (column(order_col) if order_col else F.monotonically_increasing_id()).cast("long")
        .alias(ROW_ORDER),
    ]
    if resource_col is not None:
        cols.append(column(resource_col).cast("string").alias(RESOURCE))
    events = df.select(*cols)
    if checked:
        return events
    return events.where(values_present(F.col(CASE), F.col(ACTIVITY), F.col(TIMESTAMP),
                                       (case_col, activity_col, timestamp_col), timezone))


# -- periods --------------------------------------------------------------------------------

# zones whose wall clock is UTC's: no conversion (Spark's goes through java.time per row)
_UTC = ("UTC", "Etc/UTC")


def _floor_div(value: Column, step: int) -> Column:
    """``value // step`` in whole numbers (exact: no detour through a rounded quotient)."""
    return ((value - F.pmod(value, F.lit(step))) / F.lit(step)).cast("long")


def _period_index(ts: Column, freq: str, timezone: str) -> Column:
    """The period holding ``ts`` as a whole number counted from 1970 (hours, days, weeks or
    months of wall-clock time in ``timezone``); consecutive periods have consecutive numbers."""
    wall = F.unix_micros(ts if timezone in _UTC else F.from_utc_timestamp(ts, timezone))
    if freq == "hour":
        return _floor_div(wall, _US_HOUR)
    day = _floor_div(wall, _US_DAY)
    if freq == "day":
        return day
    if freq == "week":  # 1970-01-01 was a Thursday: weeks start 3 days earlier
        return _floor_div(day + F.lit(3), 7)
    date = F.date_from_unix_date(day.cast("int"))
    return (F.year(date) * 12 + F.month(date) - 1).cast("long")


def _period_start(index: Column, freq: str, timezone: str) -> Column:
    """The instant a period starts (its first wall-clock moment in ``timezone``)."""
    if freq == "hour":
        wall = index * F.lit(_US_HOUR)
    elif freq == "day":
        wall = index * F.lit(_US_DAY)
    elif freq == "week":
        wall = (index * 7 - 3) * F.lit(_US_DAY)
    else:
        year = _floor_div(index, 12).cast("int")
        month = (F.pmod(index, F.lit(12)) + 1).cast("int")
        wall = F.unix_date(F.make_date(year, month, F.lit(1))).cast("long") * F.lit(_US_DAY)
    start = F.timestamp_micros(wall)
    return start if timezone in _UTC else F.to_utc_timestamp(start, timezone)


def _check_freq(freq: str) -> None:
    if freq not in FREQS:
        raise ValueError(f"freq must be one of {', '.join(FREQS)}; got {freq!r}")


def events_over_time(df: DataFrame, freq: str = "day", case_col: str = CASE,
                     activity_col: str = ACTIVITY, timestamp_col: str = TIMESTAMP,
                     order_col: str | None = None, timezone: str = "UTC",
                     checked: bool = False) -> DataFrame:
    """period_start, events: the events in each period from the first event's to the last's,
    quiet periods included with 0. A period holds [period_start, next period_start)."""
    _check_freq(freq)
    ev = _events(df, case_col, activity_col, timestamp_col, order_col, timezone,
                 checked=checked)
    per = ev.select(_period_index(F.col(TIMESTAMP), freq, timezone).alias(_IDX))
    counts = per.groupBy(_IDX).agg(F.count(F.lit(1)).alias("events"))
    # the periods' counts in one row with their bounds, and the spine made from that row:
    # one pass over the events (a spine from the events' bounds is a second pass; Spark
    # takes a minimum over the counts from the events themselves)
    packed = counts.agg(F.min(_IDX).alias("lo"), F.max(_IDX).alias("hi"), F.map_from_entries(
        F.collect_list(F.struct(_IDX, "events"))).alias("counts"))
    return (packed.where(F.col("lo").isNotNull())
            .select(F.explode(F.sequence("lo", "hi")).alias(_IDX), "counts")
            .select(_period_start(F.col(_IDX), freq, timezone).alias("period_start"),
                    F.coalesce(F.element_at("counts", F.col(_IDX)), F.lit(0)).cast("long")
                    .alias("events"))
            .orderBy("period_start"))


def active_cases_over_time(df: DataFrame, freq: str = "day", case_col: str = CASE,
                           activity_col: str = ACTIVITY, timestamp_col: str = TIMESTAMP,
                           order_col: str | None = None, timezone: str = "UTC",
                           checked: bool = False) -> DataFrame:
    """period_start, cases: the cases active in each period, those whose first event is
    before the period ends and whose last event is at or after it starts (a case counts in
    every period from its first event's to its last's). Each case adds +1 where it starts and
    -1 after it ends, and a running sum over the periods counts, so the cost follows the
    number of cases plus the number of periods, not cases times periods."""
    _check_freq(freq)
    ev = _events(df, case_col, activity_col, timestamp_col, order_col, timezone,
                 checked=checked)
    spans = ev.groupBy(CASE).agg(F.min(TIMESTAMP).alias("start"),
                                 F.max(TIMESTAMP).alias("end"))
    return active_cases_from_cases(spans, freq, timezone=timezone)


def active_cases_from_cases(cases: DataFrame, freq: str = "day", start_col: str = "start",
                            end_col: str = "end", timezone: str = "UTC") -> DataFrame:
    """:func:`active_cases_over_time` from a per-case table with each case's first and last
    event time in ``start_col`` and ``end_col`` (``case_durations``' ``start`` and ``end``):
    no pass over the events."""
    _check_freq(freq)
    require_columns(cases, [start_col, end_col])
    first = _period_index(column(start_col), freq, timezone)
    last = _period_index(column(end_col), freq, timezone)
    # one pass over the cases: each gives +1 to the period it starts in and -1 to the one
    # after it ends; the spine's bounds are the first and last periods themselves
    no = F.lit(None).cast("long")
    deltas = cases.select(F.inline(F.array(
        F.struct(first.alias(_IDX), F.lit(1).alias(_DELTA), first.alias("lo"), no.alias("hi")),
        F.struct((last + 1).alias(_IDX), F.lit(-1).alias(_DELTA), no.alias("lo"),
                 last.alias("hi"))))).where(F.col(_IDX).isNotNull())
    per_period = deltas.groupBy(_IDX).agg(F.sum(_DELTA).alias(_DELTA), F.min("lo").alias("lo"),
                                          F.max("hi").alias("hi"))
    # the periods' deltas in one row with the bounds, and the spine made from that row (as
    # events_over_time does): each stage after the pass over the cases holds a few rows
    packed = per_period.agg(F.min("lo").alias("lo"), F.max("hi").alias("hi"), F.map_from_entries(
        F.collect_list(F.struct(_IDX, _DELTA))).alias("deltas"))
    # the periods are few: one window partition on purpose (a literal key, so Spark does not
    # warn about a window without one)
    running = (Window.partitionBy(F.lit(0)).orderBy(_IDX)
               .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    return (packed.where(F.col("lo").isNotNull() & F.col("hi").isNotNull())
            .select(F.explode(F.sequence("lo", "hi")).alias(_IDX), "deltas")
            .select(_IDX, F.sum(F.coalesce(F.element_at("deltas", F.col(_IDX)), F.lit(0)))
                    .over(running).cast("long").alias("cases"))
            .select(_period_start(F.col(_IDX), freq, timezone).alias("period_start"), "cases")
            .orderBy("period_start"))


# -- case durations -------------------------------------------------------------------------

@dataclass(frozen=True)
class CaseDurationDistribution:
    """The case durations three ways: ``cases`` (case_id, start, end, duration_s, events,
    variant), ``histogram`` (bin, bin_start_s, bin_end_s, cases) and ``summary`` (one row:
    cases, min_s, median_s, mean_s, max_s)."""

    cases: DataFrame
    histogram: DataFrame
    summary: DataFrame


def case_duration_summary(cases: DataFrame, duration_col: str = "duration_s") -> DataFrame:
    """One row: cases, min_s, median_s (exact, halfway between the middle two for an even
    count), mean_s, max_s of a per-case table such as ``case_durations``."""
    require_columns(cases, [duration_col])
    d = column(duration_col)
    return cases.agg(F.count(d).alias("cases"), F.min(d).alias("min_s"),
                     F.percentile(d, 0.5).alias("median_s"), F.avg(d).alias("mean_s"),
                     F.max(d).alias("max_s"))


def case_duration_histogram(cases: DataFrame, bins: int = 20,
                            duration_col: str = "duration_s") -> DataFrame:
    """bin, bin_start_s, bin_end_s, cases: ``bins`` bins of equal width from the shortest
    case to the longest (the last bin holds the longest), empty bins included; as numpy's
    ``histogram``. When every case lasts as long, all of them fall in the first bin."""
    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:
        raise ValueError(f"bins must be a whole number >= 1, got {bins!r}")
    require_columns(cases, [duration_col])
    d = column(duration_col).cast("double")
    span = cases.agg(F.min(d).alias("lo"), F.max(d).alias("hi"))
    width = (F.col("hi") - F.col("lo")) / F.lit(bins)
    scaled = F.floor((d - F.col("lo")) * F.lit(bins) / (F.col("hi") - F.col("lo")))
    index = F.when(F.col("hi") > F.col("lo"), F.least(scaled, F.lit(bins - 1))).otherwise(0)
    counts = (cases.where(d.isNotNull()).crossJoin(span)
              .groupBy(index.cast("int").alias("bin")).agg(F.count(F.lit(1)).alias("cases")))
    grid = span.where(F.col("lo").isNotNull()).select(
        "lo", width.alias("w"), F.explode(F.sequence(F.lit(0), F.lit(bins - 1))).alias("bin"))
    return (grid.join(counts, on="bin", how="left")
            .select("bin", (F.col("lo") + F.col("bin") * F.col("w")).alias("bin_start_s"),
                    (F.col("lo") + (F.col("bin") + 1) * F.col("w")).alias("bin_end_s"),
                    F.coalesce(F.col("cases"), F.lit(0)).cast("long").alias("cases"))
            .orderBy("bin"))


def case_duration_distribution(df: DataFrame, bins: int = 20, case_col: str = CASE,
                               activity_col: str = ACTIVITY, timestamp_col: str = TIMESTAMP,
                               order_col: str | None = None,
                               timezone: str = "UTC") -> CaseDurationDistribution:
    """Each case's duration (seconds from its first event to its last, as pm4py's
    ``get_all_case_durations``), their histogram and their summary. The three frames share
    one per-case table: cache ``result.cases`` when the input is expensive to read."""
    table = case_durations(df, case_col, activity_col, timestamp_col, order_col, timezone)
    return CaseDurationDistribution(table, case_duration_histogram(table, bins),
                                    case_duration_summary(table))


# -- frequencies and resources --------------------------------------------------------------

def _frequencies(events: DataFrame, key: str) -> DataFrame:
    """key, events, cases, event_share, case_share; the shares of the whole log, events with a
    null ``key`` included. One aggregation per (key, case) serves all four numbers, instead of
    a distinct count per key and another over the log."""
    per_case = events.groupBy(key, CASE).agg(F.count(F.lit(1)).alias("n"))
    counts = (per_case.where(F.col(key).isNotNull()).groupBy(key)
              .agg(F.sum("n").alias("events"), F.count(F.lit(1)).alias("cases")))
    totals = per_case.agg(F.sum("n").alias("__sf_events"),
                          F.countDistinct(CASE).alias("__sf_cases"))
    return (counts.crossJoin(totals)
            .withColumn("event_share", F.col("events") / F.col("__sf_events"))
            .withColumn("case_share", F.col("cases") / F.col("__sf_cases"))
            .drop("__sf_events", "__sf_cases").orderBy(F.desc("events"), key))


def activity_frequencies(df: DataFrame, case_col: str = CASE, activity_col: str = ACTIVITY,
                         timestamp_col: str = TIMESTAMP, order_col: str | None = None,
                         timezone: str = "UTC", checked: bool = False) -> DataFrame:
    """activity, events, cases, event_share, case_share: how often each activity happens and
    in how many cases (pm4py's ``get_event_attribute_values``, without and with
    ``count_once_per_case``), most frequent first."""
    ev = _events(df, case_col, activity_col, timestamp_col, order_col, timezone,
                 checked=checked)
    return _frequencies(ev, ACTIVITY)


def resource_frequencies(df: DataFrame, resource_col: str = XES_RESOURCE, case_col: str = CASE,
                         activity_col: str = ACTIVITY, timestamp_col: str = TIMESTAMP,
                         order_col: str | None = None, timezone: str = "UTC",
                         checked: bool = False) -> DataFrame:
    """resource, events, cases, event_share, case_share: the work of each resource. Events
    without a resource are left out of the rows but not out of the totals, so the event
    shares add up to the part of the log that names a resource."""
    ev = _events(df, case_col, activity_col, timestamp_col, order_col, timezone, resource_col,
                 checked)
    return _frequencies(ev, RESOURCE)


def resource_activity_matrix(df: DataFrame, resource_col: str = XES_RESOURCE, case_col: str = CASE,
                             activity_col: str = ACTIVITY, timestamp_col: str = TIMESTAMP,
                             order_col: str | None = None, timezone: str = "UTC",
                             checked: bool = False) -> DataFrame:
    """resource, activity, events (long form, only the pairs that occur): who does what.
    Events without a resource are left out."""
    ev = _events(df, case_col, activity_col, timestamp_col, order_col, timezone, resource_col,
                 checked)
    return (ev.where(F.col(RESOURCE).isNotNull()).groupBy(RESOURCE, ACTIVITY)
            .agg(F.count(F.lit(1)).alias("events")).orderBy(RESOURCE, ACTIVITY))


def handover_of_work(df: DataFrame, resource_col: str = XES_RESOURCE,
                     include_self: bool = True, case_col: str = CASE,
                     activity_col: str = ACTIVITY, timestamp_col: str = TIMESTAMP,
                     order_col: str | None = None, timezone: str = "UTC",
                     checked: bool = False) -> DataFrame:
    """source_resource, target_resource, handovers, share: how often an event of a case done
    by one resource is directly followed by the case's next event done by another; the
    directly-follows graph of resources (pm4py's ``discover_handover_of_work_network`` with
    ``beta=0``, whose values are the ``share`` column: handovers over all handovers).

    As in pm4py, a resource followed by itself counts (a self-handover, source equal to
    target); ``include_self=False`` leaves those out, shares then taken over the rest. A pair
    with a null resource on either side is left out: the work did not pass directly between
    the two named resources, so it is not bridged either."""
    ev = _events(df, case_col, activity_col, timestamp_col, order_col, timezone, resource_col,
                 checked)
    ordered = Window.partitionBy(CASE).orderBy(TIMESTAMP, ROW_ORDER, ACTIVITY)
    pairs = ev.select(F.lag(RESOURCE).over(ordered).alias("source_resource"),
                      F.col(RESOURCE).alias("target_resource"))
    keep = F.col("source_resource").isNotNull() & F.col("target_resource").isNotNull()
    if not include_self:
        keep = keep & (F.col("source_resource") != F.col("target_resource"))
    counts = (pairs.where(keep).groupBy("source_resource", "target_resource")
              .agg(F.count(F.lit(1)).alias("handovers")))
    total = counts.agg(F.sum("handovers").alias("__sf_total"))
    return (counts.crossJoin(total)
            .withColumn("share", F.col("handovers") / F.col("__sf_total")).drop("__sf_total")
            .orderBy(F.desc("handovers"), "source_resource", "target_resource"))


# -- figures ----------------------------------------------------------------------------------

def _figure(width: float, height: float) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _no_data(ax: Axes) -> None:
    ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)


def over_time_figure(events: pd.DataFrame, active: pd.DataFrame, freq: str = "day",
                     title: str = "Events and active cases over time") -> Figure:
    """Two panels on one time axis: events per period (``events_over_time``) above, active
    cases per period (``active_cases_over_time``) below."""
    fig = _figure(10, 6)
    top, bottom = fig.subplots(2, 1, sharex=True)
    for ax, frame, count, color in ((top, events, "events", "#1f77b4"),
                                    (bottom, active, "cases", "#ff7f0e")):
        if frame.empty:
            _no_data(ax)
        else:
            ax.step(frame["period_start"], frame[count], where="post", color=color)
            ax.fill_between(frame["period_start"], frame[count], step="post", alpha=0.3,
                            color=color)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    top.set_ylabel(f"events per {freq}")
    bottom.set_ylabel(f"active cases per {freq}")
    bottom.set_xlabel(f"{freq} (period start)")
    top.set_title(title)
    return fig


_UNITS = ((86_400.0, "days"), (3_600.0, "hours"), (60.0, "minutes"), (1.0, "seconds"))


def _duration_unit(longest: float) -> tuple[float, str]:
    """The largest unit in which the longest duration is at least 2, for readable ticks."""
    return next(((s, n) for s, n in _UNITS if longest >= 2 * s), _UNITS[-1])


def case_duration_figure(histogram: pd.DataFrame,
                         title: str = "Case durations") -> Figure:
    """The histogram of ``case_duration_histogram`` as bars, in days, hours, minutes or
    seconds, whichever suits the longest case."""
    fig = _figure(8, 4.5)
    ax = fig.subplots()
    longest = float(histogram["bin_end_s"].max()) if not histogram.empty else 0.0
    scale, unit = _duration_unit(longest)
    if histogram.empty:
        _no_data(ax)
    else:
        widths = (histogram["bin_end_s"] - histogram["bin_start_s"]) / scale
        ax.bar(histogram["bin_start_s"] / scale, histogram["cases"],
               width=widths.where(widths > 0, 1.0 / scale), align="edge",
               edgecolor="white", color="#1f77b4")
    ax.set_xlabel(f"case duration ({unit})")
    ax.set_ylabel("cases")
    ax.set_title(title)
    return fig


def _top_bars(frame: pd.DataFrame, name: str, top: int, title: str) -> Figure:
    """Horizontal bars of the ``top`` names by events, the largest at the top."""
    rows = frame.sort_values(["events", name], ascending=[False, True]).head(top)
    fig = _figure(8, 1.5 + 0.3 * max(len(rows), 1))
    ax = fig.subplots()
    if rows.empty:
        _no_data(ax)
    else:
        labels = rows[name].astype(str).tolist()[::-1]
        ax.barh(labels, rows["events"].tolist()[::-1], color="#1f77b4")
    ax.set_xlabel("events")
    ax.set_ylabel(name)
    ax.set_title(title)
    return fig


def activities_figure(frequencies: pd.DataFrame, top: int = 20,
                      title: str = "Most frequent activities") -> Figure:
    """The ``top`` activities of ``activity_frequencies`` by events."""
    return _top_bars(frequencies, ACTIVITY, top, title)


def resources_figure(frequencies: pd.DataFrame, top: int = 20,
                     title: str = "Busiest resources") -> Figure:
    """The ``top`` resources of ``resource_frequencies`` by events."""
    return _top_bars(frequencies, RESOURCE, top, title)


def resource_activity_figure(matrix: pd.DataFrame, top_resources: int = 20,
                             top_activities: int = 20,
                             title: str = "Events by resource and activity") -> Figure:
    """A heat map of ``resource_activity_matrix``: the busiest resources (rows) by the most
    frequent activities (columns), each cell's count written in it when the grid is small."""
    names = {}
    for key, top in ((RESOURCE, top_resources), (ACTIVITY, top_activities)):
        totals = matrix.groupby(key)["events"].sum().reset_index()
        names[key] = totals.sort_values(["events", key], ascending=[False, True]) \
            .head(top)[key].tolist()
    grid = (matrix.pivot_table(index=RESOURCE, columns=ACTIVITY, values="events",
                               aggfunc="sum", fill_value=0)
            .reindex(index=names[RESOURCE], columns=names[ACTIVITY], fill_value=0))
    fig = _figure(2.5 + 0.45 * max(len(grid.columns), 1), 2 + 0.35 * max(len(grid), 1))
    ax = fig.subplots()
    if grid.empty:
        _no_data(ax)
    else:
        image = ax.imshow(grid.to_numpy(), aspect="auto", cmap="Blues")
        fig.colorbar(image, ax=ax, label="events")
        ax.set_xticks(range(len(grid.columns)), [str(c) for c in grid.columns], rotation=45,
                      ha="right")
        ax.set_yticks(range(len(grid.index)), [str(r) for r in grid.index])
        if grid.size <= 400:
            _cell_labels(ax, grid)
    ax.set_xlabel("activity")
    ax.set_ylabel("resource")
    ax.set_title(title)
    return fig


def _cell_labels(ax: Axes, grid: pd.DataFrame) -> None:
    values = grid.to_numpy()
    high = values.max()
    for (i, j), value in _cells(values):
        ax.text(j, i, str(int(value)), ha="center", va="center", fontsize=7,
                color="white" if value > high / 2 else "black")


def _cells(values) -> list[tuple[tuple[int, int], float]]:
    return [((i, j), v) for i, row in enumerate(values) for j, v in enumerate(row) if v]
