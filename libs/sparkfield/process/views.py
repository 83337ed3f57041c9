"""The views a process miner expects, computed on the event log in Spark.

Events of a case are ordered by timestamp, then the source order (``src_order``,
``row_order``): a stable sort, as pm4py does it. One shuffle builds every case's ordered event
sequence; every view is then derived from that per-case table (cache it when several views
are needed).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sparkfield.process.schema import ACTIVITY, CASE, ORDER, TIMESTAMP


def _seconds(ts: Column) -> Column:
    return F.unix_micros(ts) / F.lit(1_000_000.0)


def case_sequences(events: DataFrame) -> DataFrame:
    """One row per case: ``seq``, its events in order as (ordering keys..., a, t)."""
    return events.groupBy(CASE).agg(F.sort_array(F.collect_list(F.struct(
        *[F.col(c).alias(f"k{i}") for i, c in enumerate(ORDER)],
        F.col(ACTIVITY).alias("a"), F.col(TIMESTAMP).alias("t")))).alias("seq"))


def cases(seqs: DataFrame) -> DataFrame:
    """case_id, start, end, duration_s, events, variant (JSON array of activities)."""
    start, end = F.element_at("seq", 1)["t"], F.element_at("seq", -1)["t"]
    return seqs.select(
        CASE, start.alias("start"), end.alias("end"),
        (_seconds(end) - _seconds(start)).alias("duration_s"),
        F.size("seq").alias("events"), F.to_json(F.col("seq.a")).alias("variant"),
    )


def dfg(seqs: DataFrame) -> DataFrame:
    """Directly-follows arcs: source, target, frequency, mean_s, median_s (of the time
    between the two events)."""
    pairs = F.expr(
        "CASE WHEN size(seq) > 1 THEN transform(sequence(2, size(seq)), i -> named_struct("
        "'source', seq[i - 2].a, 'target', seq[i - 1].a, "
        "'d', (unix_micros(seq[i - 1].t) - unix_micros(seq[i - 2].t)) / 1000000.0)) "
        "ELSE array() END")
    arcs = seqs.select(F.explode(pairs).alias("p")).select("p.*")
    return (
        arcs.groupBy("source", "target")
        .agg(F.count(F.lit(1)).alias("frequency"), F.avg("d").alias("mean_s"),
             F.percentile("d", 0.5).alias("median_s"))
        .orderBy(F.desc("frequency"), "source", "target")
    )


def variants(case_table: DataFrame, total: int) -> DataFrame:
    return (
        case_table.groupBy("variant").agg(F.count(F.lit(1)).alias("cases"),
                                           F.avg("duration_s").alias("mean_duration_s"))
        .withColumn("share", F.col("cases") / F.lit(max(total, 1)))
        .orderBy(F.desc("cases"), "variant")
    )


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


def compute_views(events: DataFrame, seqs: DataFrame, n_cases: int) -> Views:
    """All views from the events and their per-case sequences (cache ``seqs``)."""
    case_table = cases(seqs)
    return Views(
        dfg=dfg(seqs), variants=variants(case_table, n_cases), activities=activities(events),
        start_activities=endpoint_activities(seqs, "start"),
        end_activities=endpoint_activities(seqs, "end"), cases=case_table,
    )
