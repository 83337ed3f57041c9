"""Turning raw rows into events: timestamp parsing, validation with reasons, duplicates,
whole-case sampling. Shared by extraction and by logs read from files."""

from __future__ import annotations

import re

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.window import Window

from sparkfield.core.columns import column
from sparkfield.process.eventlog.schema import (
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

RAW_TS = "timestamp_raw"
REASON = "reject_reason"
# a time's own zone, as Spark's cast reads it after the clock time: Z, an offset (+h, +hh,
# +hhmm, +hh:mm, +hh:mm:ss) or a zone name (UTC, UTC+1, CET, Europe/Paris, with or without a
# space before it)
_ZONE = (r"[0-9]:[0-9]{1,2}(:[0-9]{1,2}(\.[0-9]*)?)?\s*([+-][0-9]{1,2}(:?[0-9]{2}){0,2}"
         r"|[A-Za-z][A-Za-z0-9/_+:-]*)$")
# a datetime pattern's letters for a zone or an offset, outside its quoted text
_PATTERN_ZONE = re.compile(r"[VvzOXxZ]")


NONEXISTENT = "nonexistent local time"  # a wall-clock time the zone skips (spring forward)
AMBIGUOUS = "ambiguous local time"  # one it shows twice (fall back)
LOCAL_PROBLEM = "local_time_problem"  # optional column of raw rows: one of the two, or null

_FIXED_ZONE = re.compile(r"(?i)(Z|(Etc/)?(UTC|GMT|UCT|UT|Universal|Zulu|Greenwich)0?"
                         r"([+-][0-9:]+)?|[+-][0-9:]+)")
_SPAN_MICROS = 15 * 3600 * 1_000_000  # beyond the widest offset (-12:00 .. +14:00)


def clock_changes(timezone: str) -> bool:
    """Whether ``timezone`` may change its offset (a region), so that some wall-clock times
    are skipped or shown twice; False for UTC and fixed offsets."""
    return not _FIXED_ZONE.fullmatch(timezone.strip())


def wall_clock_columns(col: Column, dtype: T.DataType, fmt: str | None
                       ) -> tuple[Column, Column]:
    """A string, date or timestamp column as a timestamp, and whether that is a wall-clock
    time (no offset of its own, shown as the same clock time in UTC, the session's zone): the
    two columns that :func:`zoned_time_columns` reads. Selected on each side of a union of
    sources with timestamps of different types or formats, they let the union be zoned
    once."""
    if isinstance(dtype, T.TimestampType):
        return col, F.lit(False)
    if isinstance(dtype, (T.TimestampNTZType, T.DateType)):
        return col.cast("timestamp"), F.lit(True)
    s = F.trim(col.cast("string"))
    s = F.when(s.rlike(r"^\d{4}-\d{2}-\d{2} \d"),  # the date's separator only, not a zone's
               F.regexp_replace(s, r"^(\d{4}-\d{2}-\d{2}) ", "$1T")).otherwise(s) \
        if fmt is None else s
    parsed = F.try_to_timestamp(s, F.lit(fmt)) if fmt else s.try_cast("timestamp")
    zoned = pattern_zone(fmt) if fmt else None
    return parsed, (~s.rlike(_ZONE) if zoned is None else F.lit(not zoned))


def pattern_zone(fmt: str) -> bool | None:
    """Whether every time a datetime pattern reads carries its own zone (True), none does
    (False), or some may (None: a zone in an optional section). The pattern says it, not the
    text: ``dd-MM-yyyy`` reads ``15-01-2024``, which ends like an offset."""
    letters = re.sub(r"'[^']*'", "", fmt)
    if not _PATTERN_ZONE.search(letters):
        return False
    return None if "[" in letters else True


def _zone_problem(local: Column, timezone: str) -> Column:
    """:data:`NONEXISTENT` or :data:`AMBIGUOUS` for a wall-clock time (as UTC) in
    ``timezone``, else null. The instants that show as ``local`` carry the offset in force
    15 hours before or after it (at most one change in between): a time none of the two
    candidates maps back to is skipped, one both map back to with different offsets is
    repeated. Spark's built-ins only, the zone rules Spark converts with."""
    if not clock_changes(timezone):
        return F.lit(None).cast("string")
    wall = F.unix_micros(local)
    return _problem_of(local, wall, _offset_at(wall - _SPAN_MICROS, timezone),
                       _offset_at(wall + _SPAN_MICROS, timezone), timezone)


def _offset_at(micros: Column, timezone: str) -> Column:
    """The offset of ``timezone`` (microseconds) at the instant ``micros``."""
    return F.unix_micros(F.from_utc_timestamp(F.timestamp_micros(micros), timezone)) - micros


def _problem_of(local: Column, wall: Column, before: Column, after: Column,
                timezone: str) -> Column:
    """:func:`_zone_problem` of ``local`` (``wall``: its microseconds) from the offsets in
    force 15 hours before and after it."""
    def shows_as_local(offset: Column) -> Column:
        return F.from_utc_timestamp(F.timestamp_micros(wall - offset), timezone) == local

    first, second = shows_as_local(before), shows_as_local(after)
    return (F.when(~first & ~second, NONEXISTENT)
            .when(first & second & (before != after), AMBIGUOUS))


def parse_timestamp(col: Column, dtype: T.DataType, timezone: str, fmt: str | None) -> Column:
    """A timestamp from a string, date or timestamp column. Strings with an explicit offset
    keep it; naive strings and dates are wall-clock times in ``timezone``: null when the zone
    skips that time or shows it twice (:func:`local_time_problem` says which), never an
    instant guessed for it."""
    if isinstance(dtype, T.TimestampType):
        return col
    parsed, naive = wall_clock_columns(col, dtype, fmt)
    utc = F.when(_zone_problem(parsed, timezone).isNull(), F.to_utc_timestamp(parsed, timezone))
    return F.when(naive, utc).otherwise(parsed)


def local_time_problem(col: Column, dtype: T.DataType, timezone: str,
                       fmt: str | None) -> Column:
    """Why :func:`parse_timestamp` gives no instant for a wall-clock value in ``timezone``:
    :data:`NONEXISTENT` (in a spring-forward gap) or :data:`AMBIGUOUS` (in the repeated hour
    of the autumn change); null for every other value."""
    if isinstance(dtype, T.TimestampType):
        return F.lit(None).cast("string")
    parsed, naive = wall_clock_columns(col, dtype, fmt)
    return F.when(naive, _zone_problem(parsed, timezone))


_STAGED = "__sparkfield_time_"  # prefix of with_time_columns' passing columns


def with_time_columns(df: DataFrame, col: Column, dtype: T.DataType, timezone: str,
                      fmt: str | None, timestamp: str, problem: str) -> DataFrame:
    """``df`` with :func:`parse_timestamp` of ``col`` as column ``timestamp`` and
    :func:`local_time_problem` as ``problem``: :func:`wall_clock_columns`, then
    :func:`zoned_time_columns`."""
    wall, naive = wall_clock_columns(col, dtype, fmt)
    staged = df.withColumns({f"{_STAGED}wall": wall, f"{_STAGED}naive": naive})
    return zoned_time_columns(staged, f"{_STAGED}wall", f"{_STAGED}naive", timezone,
                              timestamp, problem)


def zoned_time_columns(df: DataFrame, wall: str, naive: str, timezone: str, timestamp: str,
                       problem: str) -> DataFrame:
    """``df`` whose columns ``wall`` and ``naive`` are :func:`wall_clock_columns` of a value,
    with :func:`parse_timestamp` of it as column ``timestamp`` and :func:`local_time_problem`
    as ``problem`` in their place, the same values computed in steps: the two offsets once
    each, then the problem, instead of each written out a dozen times inside one expression.
    Spark keeps such steps apart (it does not inline an expression that a later one reads
    several times), so the generated code stays small: on a small input compiling it cost
    more than the rows."""
    local, is_naive, passing = F.col(wall), F.col(naive), [wall, naive]
    staged, found = df, F.lit(None).cast("string")
    if clock_changes(timezone):
        before, after = f"{_STAGED}before", f"{_STAGED}after"
        micros = F.unix_micros(local)  # cheap: read thrice rather than staged
        staged = staged.withColumns({  # wall clocks only
            before: F.when(is_naive, _offset_at(micros - _SPAN_MICROS, timezone)),
            after: F.when(is_naive, _offset_at(micros + _SPAN_MICROS, timezone))})
        found = F.when(is_naive, _problem_of(
            local, micros, F.col(before), F.col(after), timezone))
        passing += [before, after]
    staged = staged.withColumn(problem, found)
    utc = F.when(F.col(problem).isNull(), F.to_utc_timestamp(local, timezone))
    stamp = F.when(is_naive, utc).otherwise(local).alias(timestamp)
    names = [n for n in df.columns if n not in passing]
    names += [] if problem in names else [problem]
    # one projection that sets the timestamp and leaves the passing columns out
    return staged.select(*[stamp if n == timestamp else column(n) for n in names],
                         *([] if timestamp in names else [stamp]))


def wall_clock_problem(spark: SparkSession, text: str, timezone: str) -> str | None:
    """What is wrong with one ISO time ``text`` read in ``timezone`` (a bound a user gives):
    "does not exist in ZONE ..." or "is ambiguous in ZONE ...", None when it names one
    instant. Runs a Spark job (of one row), and only for a naive time in a zone that changes
    its offset, so a bound is read by the same rules as the events."""
    if not clock_changes(timezone) or re.search(_ZONE, text.strip()):
        return None
    value = F.lit(text.strip())
    problem = spark.range(1).select(
        local_time_problem(value, T.StringType(), timezone, None)).first()[0]
    if problem == NONEXISTENT:
        return (f"does not exist in {timezone} (its clocks skip it): give it with its offset "
                "or pick a time outside the gap")
    if problem == AMBIGUOUS:
        return (f"is ambiguous in {timezone} (its clocks show it twice): give it with its "
                "offset")
    return None


def sample_cases(df: DataFrame, fraction: float | None, seed: int) -> DataFrame:
    """Whole cases, never single events: a case is in or out by a seeded hash of its id, so
    every source and activity agrees."""
    if fraction is None or fraction >= 1:
        return df
    bucket = F.pmod(F.xxhash64(F.lit(seed), F.col(CASE)), F.lit(1_000_000))
    return df.where(bucket < int(fraction * 1_000_000))


def classify(df: DataFrame, min_ts: str | None, max_ts: str | None,
             dedupe: bool = True) -> DataFrame:
    """Adds ``reject_reason`` (null for a good event). Input columns: the event columns plus
    ``timestamp_raw`` (what the source said) and optionally ``_corrupt_record`` and
    ``local_time_problem`` (:func:`local_time_problem`). A bound that is None rejects nothing
    on that side."""
    blank_case = F.col(CASE).isNull() | (F.trim(F.col(CASE)) == "")
    blank_raw = F.col(RAW_TS).isNull() | (F.trim(F.col(RAW_TS).cast("string")) == "")
    out_of_range = F.lit(False)
    if min_ts:
        out_of_range = out_of_range | (F.col(TIMESTAMP) < F.lit(min_ts).cast("timestamp"))
    if max_ts:
        out_of_range = out_of_range | (F.col(TIMESTAMP) > F.lit(max_ts).cast("timestamp"))
    reason = F.when(blank_case, "null case id")
    if "_corrupt_record" in df.columns:
        reason = F.when(F.col("_corrupt_record").isNotNull(), "malformed row").when(
            blank_case, "null case id")
    reason = (
        reason.when(F.col(ACTIVITY).isNull() | (F.trim(F.col(ACTIVITY)) == ""), "null activity")
        .when(blank_raw, "null timestamp")
    )
    if LOCAL_PROBLEM in df.columns:
        reason = reason.when(F.col(LOCAL_PROBLEM).isNotNull(), F.col(LOCAL_PROBLEM))
    reason = (
        reason.when(F.col(TIMESTAMP).isNull(), "unparseable timestamp")
        .when(out_of_range, "timestamp out of range")
    )
    out = df.withColumn(REASON, reason)
    if not dedupe:
        return out
    # an exact repeat: every field equal, attributes included
    key = [CASE, ACTIVITY, TIMESTAMP, F.coalesce(F.col(RESOURCE), F.lit("\u0000")),
           F.coalesce(F.col(LIFECYCLE), F.lit("\u0000")),
           F.coalesce(F.to_json(F.col(ATTRIBUTES)), F.lit("\u0000"))]
    w = Window.partitionBy(F.col(REASON).isNull(), *key).orderBy(SRC_ORDER, ROW_ORDER)
    dup = F.col(REASON).isNull() & (F.row_number().over(w) > 1)
    return out.withColumn(REASON, F.when(dup, "duplicate event").otherwise(F.col(REASON)))


def date_tallies(before: str, after: str) -> list[Column]:
    """Aggregates of the good rows' dates (no ``reject_reason``) for a pass that reads every
    row anyway (the job's validation): ``odd``, how many are dated outside ``before`` ..
    ``after`` (:func:`suspicious_timestamps` says which), and ``lo`` and ``hi``, the earliest
    and latest date within it."""
    ts = F.col(TIMESTAMP)
    good = F.col(REASON).isNull()
    within = ts.between(F.lit(before).cast("timestamp"), F.lit(after).cast("timestamp"))
    return [F.count_if(good & ~within).alias("odd"),
            F.min(F.when(good & within, ts)).alias("lo"),
            F.max(F.when(good & within, ts)).alias("hi")]


def suspicious_timestamps(events: DataFrame, before: str, after: str,
                          examples: int = 5) -> dict:
    """Events dated before ``before`` or after ``after`` (kept, but likely mistyped): how
    many, their range, how many cases, and a few examples (case, activity, timestamp).

    Timestamps are formatted by Spark, never collected: Python's datetime stops at year 1
    and fails on a time within a day of it (``0001-01-01``, an ERP's empty date)."""
    lo, hi = F.lit(before).cast("timestamp"), F.lit(after).cast("timestamp")
    odd = events.where((F.col(TIMESTAMP) < lo) | (F.col(TIMESTAMP) > hi))
    fmt = "yyyy-MM-dd'T'HH:mm:ssXXX"
    row = odd.agg(F.count(F.lit(1)).alias("n"), F.date_format(F.min(TIMESTAMP), fmt).alias("lo"),
                  F.date_format(F.max(TIMESTAMP), fmt).alias("hi"),
                  F.countDistinct(CASE).alias("cases")).first()
    if not row or not row["n"]:
        return {"events": 0}
    sample = odd.orderBy(TIMESTAMP, CASE).limit(examples).select(
        CASE, ACTIVITY, F.date_format(TIMESTAMP, fmt).alias(TIMESTAMP)).collect()
    return {
        "events": int(row["n"]), "cases": int(row["cases"]),
        "first": row["lo"], "last": row["hi"],
        "outside": [before, after],
        "examples": [{CASE: r[CASE], ACTIVITY: r[ACTIVITY], TIMESTAMP: r[TIMESTAMP]}
                     for r in sample],
    }


def good_events(classified: DataFrame) -> DataFrame:
    return classified.where(F.col(REASON).isNull()).select(*EVENT_COLUMNS)


def with_classifier(events: DataFrame, classifier: str) -> DataFrame:
    """``name`` (concept:name) or ``name+lifecycle`` (concept:name+lifecycle:transition)."""
    if classifier == "name":
        return events
    if classifier == "name+lifecycle":
        return events.withColumn(ACTIVITY, F.when(
            F.col(LIFECYCLE).isNotNull(), F.concat_ws("+", ACTIVITY, LIFECYCLE)
        ).otherwise(F.col(ACTIVITY)))
    raise ValueError(f"unknown classifier {classifier!r} (name, name+lifecycle)")


EVENT_ORDER = "__event_order"  # the tie-break of equal timestamps as one column
_ROW_BITS = 50


def with_event_order(events: DataFrame) -> DataFrame:
    """Canonical ``events`` with :data:`EVENT_ORDER`: ``src_order`` then ``row_order`` as one
    long, the ``order_col`` column the functions of :mod:`~sparkfield.process.analysis.filters` and
    :mod:`~sparkfield.process.analysis.statistics` take, so they order equal timestamps as the views
    do. Exact while a row order is below 2**50 (Spark's row ids hold the partition above bit
    33: up to 131,072 partitions a source) and a mapping has fewer than 8,192 activities."""
    return events.withColumn(EVENT_ORDER, F.col(SRC_ORDER).cast("long") * F.lit(1 << _ROW_BITS)
                             + F.col(ROW_ORDER))
