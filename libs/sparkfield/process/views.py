"""The views a process miner expects, computed on the event log in Spark.

Events of a case are ordered by timestamp, then the source order (``src_order``,
``row_order``): a stable sort, as pm4py does it.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from sparkfield.process.schema import ACTIVITY, CASE, ORDER, TIMESTAMP


def _seconds(ts: Column) -> Column:
    return F.unix_micros(ts) / F.lit(1_000_000.0)


def with_position(events: DataFrame) -> DataFrame:
    """Adds ``pos`` (1-based), ``next_activity`` and ``next_timestamp`` within each case."""
    w = Window.partitionBy(CASE).orderBy(*ORDER)
    return events.select(
        "*", F.row_number().over(w).alias("pos"),
        F.lead(ACTIVITY).over(w).alias("next_activity"),
        F.lead(TIMESTAMP).over(w).alias("next_timestamp"),
    )


def dfg(positioned: DataFrame) -> DataFrame:
    """Directly-follows arcs: source, target, frequency, mean_s, median_s (of the time
    between the two events)."""
    d = _seconds(F.col("next_timestamp")) - _seconds(F.col(TIMESTAMP))
    return (
        positioned.where(F.col("next_activity").isNotNull())
        .groupBy(F.col(ACTIVITY).alias("source"), F.col("next_activity").alias("target"))
        .agg(F.count(F.lit(1)).alias("frequency"), F.avg(d).alias("mean_s"),
             F.percentile(d, 0.5).alias("median_s"))
        .orderBy(F.desc("frequency"), "source", "target")
    )


def cases(events: DataFrame) -> DataFrame:
    """case_id, start, end, duration_s, events, variant (JSON array of activities)."""
    per = events.groupBy(CASE).agg(
        F.min(TIMESTAMP).alias("start"), F.max(TIMESTAMP).alias("end"),
        F.count(F.lit(1)).alias("events"),
        F.sort_array(F.collect_list(F.struct(
            *[F.col(c).alias(f"k{i}") for i, c in enumerate(ORDER)], F.col(ACTIVITY))))
        .alias("seq"),
    )
    return per.select(
        CASE, "start", "end",
        (_seconds(F.col("end")) - _seconds(F.col("start"))).alias("duration_s"),
        "events", F.to_json(F.col(f"seq.{ACTIVITY}")).alias("variant"),
    )


def variants(case_table: DataFrame) -> DataFrame:
    total = case_table.count()
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


def endpoint_activities(positioned: DataFrame, which: str) -> DataFrame:
    """Start (``which='start'``) or end activities with the number of cases."""
    if which == "start":
        cond = F.col("pos") == 1
    elif which == "end":
        cond = F.col("next_activity").isNull()
    else:
        raise ValueError(which)
    return (positioned.where(cond).groupBy(ACTIVITY).agg(F.count(F.lit(1)).alias("cases"))
            .orderBy(F.desc("cases"), ACTIVITY))


@dataclass
class Views:
    dfg: DataFrame
    variants: DataFrame
    activities: DataFrame
    start_activities: DataFrame
    end_activities: DataFrame
    cases: DataFrame


def compute_views(events: DataFrame) -> Views:
    """All views of a log; ``events`` should be cached by the caller (it is read six times)."""
    positioned = with_position(events)
    case_table = cases(events)
    return Views(
        dfg=dfg(positioned), variants=variants(case_table), activities=activities(events),
        start_activities=endpoint_activities(positioned, "start"),
        end_activities=endpoint_activities(positioned, "end"), cases=case_table,
    )
