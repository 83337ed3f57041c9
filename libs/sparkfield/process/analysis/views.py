"""The views a process miner expects, computed on the event log in Spark.

Events of a case are ordered by timestamp, then the source order (``src_order``,
``row_order``): a stable sort, as pm4py does it. One shuffle builds every case's ordered event
sequence; every view is then derived from that per-case table (cache it when several views
are needed).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from sparkfield.process.eventlog.schema import ACTIVITY, CASE, ORDER, RESOURCE, TIMESTAMP


def micros_between(start: Column, end: Column) -> Column:
    """The whole microseconds from ``start`` to ``end`` (exact, a long)."""
    return F.unix_micros(end) - F.unix_micros(start)


def seconds_between(start: Column, end: Column) -> Column:
    """The seconds from ``start`` to ``end``: their microseconds subtracted, then divided, so
    the double is the nearest to the exact span (as Python's ``total_seconds()`` gives it),
    not the difference of two rounded epoch seconds (1072732.480000019 for 1072732.48). The
    case table's durations and the case performance filter both use it."""
    return micros_between(start, end) / F.lit(1_000_000.0)


def case_sequences(events: DataFrame, resource: bool = False) -> DataFrame:
    """One row per case: ``seq``, its events in order as (a, t), with the resource ``r``
    last when ``resource=True`` (for the resource statistics). The ordering keys sort the
    events and are then dropped: every view reads the cached sequences, so each byte kept
    in them is read again by each view."""
    extra = [F.col(RESOURCE).alias("r")] if resource else []
    # the activity and the time are ordering keys themselves: each event carries them once
    key = {c: f"k{i}" for i, c in enumerate(ORDER)}
    kept = {"a": key[ACTIVITY], "t": key[TIMESTAMP], **({"r": "r"} if resource else {})}
    ordered = F.sort_array(F.collect_list(F.struct(
        *[F.col(c).alias(k) for c, k in key.items()], *extra)))
    return events.groupBy(CASE).agg(F.transform(
        ordered, lambda e: F.struct(*[e[k].alias(name) for name, k in kept.items()]))
        .alias("seq"))


def cases(seqs: DataFrame) -> DataFrame:
    """case_id, start, end, duration_s, events, variant (JSON array of activities)."""
    start, end = F.element_at("seq", 1)["t"], F.element_at("seq", -1)["t"]
    return seqs.select(
        CASE, start.alias("start"), end.alias("end"),
        seconds_between(start, end).alias("duration_s"),
        F.size("seq").alias("events"), F.to_json(F.col("seq.a")).alias("variant"),
    )


_PAIRS_OF = "greatest(size(seq) - 1, 0)"  # directly-follows pairs in a case's sequence


def pairs(seqs: DataFrame, *keep: str) -> DataFrame:
    """The directly-follows pairs of every case's sequence: ``keep`` (columns of ``seqs``),
    source, target, us (the microseconds between the two events) and d (the same as decimal
    seconds). Built from slices of the sequence zipped together, not a lambda over its
    indices: Spark runs lambda functions (``transform``, ``filter``) outside its generated
    code, which made this 1.5x slower."""
    m = _PAIRS_OF
    zipped = F.expr(f"arrays_zip(slice(_a, 1, {m}), slice(_a, 2, {m}), "
                    f"slice(_t, 1, {m}), slice(_t, 2, {m}))")
    # the activities' and times' arrays taken out of the sequence once, in a projection of
    # their own: Spark evaluates the generator's input expression as written, each
    # ``seq.a`` a new array
    fields = seqs.select(*keep, "seq", F.col("seq.a").alias("_a"), F.col("seq.t").alias("_t"))
    return fields.select(*keep, F.inline(zipped).alias("source", "target", "t1", "t2")).select(
        *keep, "source", "target", micros_between(F.col("t1"), F.col("t2")).alias("us")
    ).withColumn("d", F.col("us") / F.lit(1_000_000.0).cast("decimal(8,1)"))


def arc_times(us: str = "us") -> list[Column]:
    """mean_s and median_s of the microseconds ``us`` between an arc's two events: the
    numbers ``avg`` and ``percentile`` of the decimal seconds ``d`` give (mean_s the same
    decimal(34,13), the exact mean to 13 places) without a decimal sum per pair: whole
    seconds and the microseconds left summed apart as longs (neither sum overflows before
    billions of pairs of a century each), divided once per arc in decimals; the median over
    the seconds as doubles (each the nearest double to its exact value, as the decimal's
    cast gives)."""
    col, rest = F.col(us), F.expr(f"pmod({us}, 1000000)")
    whole = F.sum(F.expr(f"({us} - pmod({us}, 1000000)) div 1000000"))
    total = (whole.cast("decimal(38,0)") * F.lit(1_000_000).cast("decimal(38,0)")
             + F.sum(rest).cast("decimal(38,0)"))
    seconds = (total / F.lit(1_000_000).cast("decimal(7,0)")).cast("decimal(29,9)")
    mean = (seconds / F.count(col).cast("decimal(20,0)")).cast("decimal(34,13)")
    return [mean.alias("mean_s"),
            F.percentile(col.cast("double") / F.lit(1_000_000.0), 0.5).alias("median_s")]


def dfg(seqs: DataFrame) -> DataFrame:
    """Directly-follows arcs: source, target, frequency, mean_s, median_s (of the time
    between the two events)."""
    arcs = pairs(seqs)
    return (
        arcs.groupBy("source", "target")
        .agg(F.count(F.lit(1)).alias("frequency"), *arc_times())
        .orderBy(F.desc("frequency"), "source", "target")
    )


def variants(case_table: DataFrame, total: int | None = None) -> DataFrame:
    """variant, cases, mean_duration_s, share of a per-case table (:func:`cases`: variant,
    start, end): ``share`` of ``total`` cases, or (None) of the cases summed over the
    variants within the query, so that no count runs first."""
    # the spans summed as whole microseconds (exact, in any order): a rerun, or the same
    # log in other partitions, gives the same means to the last digit
    span = micros_between(F.col("start"), F.col("end")).cast("decimal(38,0)")
    counted = case_table.groupBy("variant").agg(
        F.count(F.lit(1)).alias("cases"),
        ((F.sum(span) / F.count(F.lit(1))).cast("double") / F.lit(1_000_000.0))
        .alias("mean_duration_s"))
    if total is None:  # the variants are few: one window partition on purpose
        whole = F.sum("cases").over(Window.partitionBy(F.lit(0)))
    else:
        whole = F.lit(max(total, 1))
    return counted.withColumn("share", F.col("cases") / whole).orderBy(F.desc("cases"),
                                                                        "variant")


def activities(events: DataFrame) -> DataFrame:
    return (
        events.groupBy(ACTIVITY)
        .agg(F.count(F.lit(1)).alias("events"), F.countDistinct(CASE).alias("cases"))
        .orderBy(F.desc("events"), ACTIVITY)
    )


def endpoint_activities(seqs: DataFrame, which: str) -> DataFrame:
    """Start (``which='start'``) or end activities with the number of cases."""
    if which not in ("start", "end"):
        raise ValueError(which)
    act = F.element_at("seq", 1 if which == "start" else -1)["a"]
    return (seqs.groupBy(act.alias(ACTIVITY)).agg(F.count(F.lit(1)).alias("cases"))
            .orderBy(F.desc("cases"), ACTIVITY))


@dataclass
class Views:
    dfg: DataFrame
    variants: DataFrame
    activities: DataFrame
    start_activities: DataFrame
    end_activities: DataFrame
    cases: DataFrame


def compute_views(events: DataFrame, seqs: DataFrame, n_cases: int | None = None) -> Views:
    """All views from the events and their per-case sequences (cache ``seqs``); the variants'
    shares are of ``n_cases`` when it is known, else summed in their query."""
    case_table = cases(seqs)
    return Views(
        dfg=dfg(seqs), variants=variants(case_table, n_cases), activities=activities(events),
        start_activities=endpoint_activities(seqs, "start"),
        end_activities=endpoint_activities(seqs, "end"), cases=case_table,
    )


# -- every small table in one job -------------------------------------------------------------
# what each row of :func:`tallies` counts: x and y are
_ARC = 0  # source and target activity of a directly-follows pair (d: the time between)
_EVENT = 1  # an event's resource (null when it has none) and activity
_HANDOVER = 2  # the resources of two events that follow each other directly, both named
_ENDS = 3  # a case's first and last activity
_CASE_ACTIVITY = 4  # an activity a case holds (x; y null), once per case
_CASE_RESOURCE = 5  # a named resource a case holds (x; y null), once per case
_ROW = "array<struct<kind:int,x:string,y:string>>"


def tallies(seqs: DataFrame) -> DataFrame:
    """kind, x, y, n, mean_s, median_s: the directly-follows arcs, the activities and start
    and end activities, and (when ``seqs`` holds the resource ``r``) the resource
    statistics' counts, all from the per-case sequences read twice: the arcs (with their
    times) in one aggregation, every other count in another, each a small shuffle.
    :func:`small_views` and :func:`resource_tables` read it (collected)."""
    arc_rows = pairs(seqs)
    has_r = "r" in seqs.schema["seq"].dataType.elementType.names
    # every other count's rows, made per case in one array: one scan of the sequences; the
    # arrays are zipped, not made by lambda functions (see :func:`pairs`)
    no_r = "CAST(NULL AS STRING)"

    def rows(kind: int, xs: str, ys: str | None, n: str) -> str:
        y = ys if ys is not None else f"array_repeat({no_r}, {n})"
        return f"CAST(arrays_zip(array_repeat({kind}, {n}), {xs}, {y}) AS {_ROW})"

    # each array the rows are made of computed once, in a projection before the generator
    # (which evaluates its input as written: every ``seq.a`` or ``array_distinct`` anew)
    arrays = {"_a": "seq.a", "_da": "array_distinct(seq.a)",
              **({"_r": "seq.r", "_dr": "array_distinct(seq.r)"} if has_r else {})}
    parts = [
        rows(_EVENT, "_r" if has_r else f"array_repeat({no_r}, size(seq))", "_a", "size(seq)"),
        f"CAST(array(named_struct('kind', {_ENDS}, 'x', _a[0], 'y', element_at(_a, -1)))"
        f" AS {_ROW})",
        rows(_CASE_ACTIVITY, "_da", None, "size(_da)"),
    ]
    if has_r:
        m = _PAIRS_OF
        parts += [rows(_HANDOVER, f"slice(_r, 1, {m})", f"slice(_r, 2, {m})", m),
                  rows(_CASE_RESOURCE, "_dr", None, "size(_dr)")]
    fields = seqs.select("seq", *[F.expr(e).alias(n) for n, e in arrays.items()])
    # a handover is between two named resources; a case's resources are the named ones
    rest = fields.select(F.explode(F.expr(f"concat({', '.join(parts)})")).alias("c")).where(
        f"NOT (c.kind = {_HANDOVER} AND (c.x IS NULL OR c.y IS NULL)) "
        f"AND NOT (c.kind = {_CASE_RESOURCE} AND c.x IS NULL)")
    # the arcs' times in their own aggregation: a median keeps every value of its group and
    # falls back to sorting its input past a few groups, which the other counts need not pay
    arcs = arc_rows.select(F.lit(_ARC).alias("kind"), F.col("source").alias("x"),
                           F.col("target").alias("y"), "us") \
        .groupBy("kind", "x", "y").agg(F.count(F.lit(1)).alias("n"), *arc_times())
    counts = rest.groupBy(F.col("c.kind").alias("kind"), F.col("c.x").alias("x"),
                          F.col("c.y").alias("y")).agg(
        F.count(F.lit(1)).alias("n"), F.lit(None).cast("decimal(34,13)").alias("mean_s"),
        F.lit(None).cast("double").alias("median_s"))
    return arcs.unionByName(counts)


def _kind(t: pd.DataFrame, kind: int) -> pd.DataFrame:
    return t[t["kind"] == kind]


def _ranked(frame: pd.DataFrame, count: str, keys: list[str]) -> pd.DataFrame:
    """Most ``count`` first, then by ``keys`` (Spark's order: strings by code point)."""
    return (frame.sort_values([count, *keys], ascending=[False] + [True] * len(keys),
                              kind="mergesort").reset_index(drop=True))


def _counted(values: pd.Series, name: str, count: str) -> pd.DataFrame:
    return values.rename(count).rename_axis(name).reset_index()


def small_views(t: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """dfg, activities, start_activities, end_activities from the collected :func:`tallies`:
    the frames :func:`dfg`, :func:`activities` and :func:`endpoint_activities` collect."""
    arcs = _kind(t, _ARC)
    dfg_ = _ranked(pd.DataFrame({"source": arcs["x"], "target": arcs["y"],
                                 "frequency": arcs["n"].astype("int64"),
                                 "mean_s": arcs["mean_s"], "median_s": arcs["median_s"]}),
                   "frequency", ["source", "target"])
    events = _kind(t, _EVENT).groupby("y", sort=False)["n"].sum()
    in_cases = _kind(t, _CASE_ACTIVITY).set_index("x")["n"]
    acts = pd.DataFrame({ACTIVITY: events.index,
                         "events": events.to_numpy().astype("int64"),
                         "cases": in_cases.reindex(events.index).to_numpy().astype("int64")})
    ends = _kind(t, _ENDS)
    out = {"dfg": dfg_, "activities": _ranked(acts, "events", [ACTIVITY])}
    for name, col in (("start_activities", "x"), ("end_activities", "y")):
        n = ends.groupby(col, sort=False)["n"].sum().astype("int64")
        out[name] = _ranked(_counted(n, ACTIVITY, "cases"), "cases", [ACTIVITY])
    return out


def resource_tables(t: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """activities, resources, resource_activity, handover_of_work from the collected
    :func:`tallies` of sequences with the resource: the tables of
    :mod:`sparkfield.process.analysis.statistics`' ``activity_frequencies``,
    ``resource_frequencies``, ``resource_activity_matrix`` and ``handover_of_work`` on the same
    events."""
    ev = _kind(t, _EVENT)
    n_events = int(ev["n"].sum())
    n_cases = int(_kind(t, _ENDS)["n"].sum())

    def shares(key: str, events: pd.Series, cases: pd.Series) -> pd.DataFrame:
        frame = pd.DataFrame({key: events.index, "events": events.to_numpy().astype("int64"),
                              "cases": cases.reindex(events.index).to_numpy()
                              .astype("int64")})
        frame["event_share"] = frame["events"] / n_events
        frame["case_share"] = frame["cases"] / n_cases
        return _ranked(frame, "events", [key])

    named = ev[ev["x"].notna()]
    matrix = pd.DataFrame({RESOURCE: named["x"], ACTIVITY: named["y"],
                           "events": named["n"].astype("int64")})
    hand = _kind(t, _HANDOVER)
    handover = pd.DataFrame({"source_resource": hand["x"], "target_resource": hand["y"],
                             "handovers": hand["n"].astype("int64")})
    handover["share"] = handover["handovers"] / handover["handovers"].sum()
    return {
        "activities": shares(ACTIVITY, ev.groupby("y", sort=False)["n"].sum(),
                             _kind(t, _CASE_ACTIVITY).set_index("x")["n"]),
        "resources": shares(RESOURCE, named.groupby("x", sort=False)["n"].sum(),
                            _kind(t, _CASE_RESOURCE).set_index("x")["n"]),
        "resource_activity": matrix.sort_values([RESOURCE, ACTIVITY], kind="mergesort")
        .reset_index(drop=True),
        "handover_of_work": _ranked(handover, "handovers",
                                    ["source_resource", "target_resource"]),
    }
