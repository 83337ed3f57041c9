"""The per-case counts behind the small views and the resource statistics, against the same
counts taken case by case in Python."""

from __future__ import annotations

import math
import random
from collections import Counter
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction
from itertools import pairwise
from statistics import median

import pytest
from pyspark.sql import functions as F

from sparkfield.process.analysis import views as V

SCHEMA = ("case_id string, activity string, timestamp timestamp, resource string, "
          "lifecycle string, attributes map<string,string>, src_order int, row_order long")
T0 = datetime(2024, 3, 1, 8)
# (case, activity, seconds after T0, resource): one-event cases, equal times, unnamed
# resources between named ones, a resource repeated within a case
EVENTS = [
    ("c1", "A", 0, "ann"), ("c1", "B", 1.5, None), ("c1", "C", 4, "bob"), ("c1", "A", 4, "bob"),
    ("c1", "B", 10, "ann"),
    ("c2", "A", 0, None),
    ("c3", "B", 7, "ann"), ("c3", "B", 7, "ann"), ("c3", "C", 9, None),
    ("c4", "C", 3, None), ("c4", "A", 5, None),
]


def _sequences() -> dict[str, list]:
    """Each case's (activity, seconds, resource) in file order (no equal times out of order
    in EVENTS)."""
    seqs: dict[str, list] = {}
    for case, act, s, res in EVENTS:
        seqs.setdefault(case, []).append((act, Decimal(str(s)), res))
    return seqs


def _brute_force(resource: bool) -> dict[tuple, tuple]:
    """(kind, x, y) -> (n, mean_s, median_s), case by case."""
    n: Counter = Counter()
    gaps: dict[tuple, list] = {}
    for seq in _sequences().values():
        for (a, t, r), (b, u, q) in pairwise(seq):
            gaps.setdefault((V._ARC, a, b), []).append(u - t)
            if resource and r is not None and q is not None:
                n[(V._HANDOVER, r, q)] += 1
        for a, _, r in seq:
            n[(V._EVENT, r if resource else None, a)] += 1
        n[(V._ENDS, seq[0][0], seq[-1][0])] += 1
        for a in {a for a, _, _ in seq}:
            n[(V._CASE_ACTIVITY, a, None)] += 1
        if resource:
            for r in {r for _, _, r in seq if r is not None}:
                n[(V._CASE_RESOURCE, r, None)] += 1
    out = {k: (v, None, None) for k, v in n.items()}
    out.update({k: (len(d), sum(d) / len(d), float(median(d))) for k, d in gaps.items()})
    return out


def _sequences_frame(spark, resource: bool):
    rows = [(c, a, T0 + timedelta(seconds=s), r, None, None, 0, i)
            for i, (c, a, s, r) in enumerate(EVENTS)]
    return V.case_sequences(spark.createDataFrame(rows, SCHEMA), resource=resource)


@pytest.mark.parametrize("resource", [True, False])
def test_tallies_equal_the_counts_taken_case_by_case(spark, resource):
    got = {(r["kind"], r["x"], r["y"]): (r["n"], r["mean_s"], r["median_s"])
           for r in V.tallies(_sequences_frame(spark, resource)).collect()}
    assert got == _brute_force(resource)


def test_pairs_are_each_cases_consecutive_events_with_the_seconds_between(spark):
    got = sorted((r["case_id"], r["source"], r["target"], r["d"])
                 for r in V.pairs(_sequences_frame(spark, False), "case_id").collect())
    want = sorted((case, a, b, u - t) for case, seq in _sequences().items()
                  for (a, t, _), (b, u, _) in pairwise(seq))
    assert got == want and len(got) == len(EVENTS) - 4  # one pair fewer than events a case


def test_case_durations_are_the_exact_spans_nearest_double(spark):
    """A case from 22:38:44.546 to 08:37:37.026 twelve days later lasts 1072732.48 s, as
    Python's ``total_seconds()`` says; the difference of the two epoch seconds as doubles
    would be 1072732.480000019."""
    start, end = datetime(2011, 9, 30, 22, 38, 44, 546000), datetime(2011, 10, 13, 8, 37, 37, 26000)
    rows = [("c", "A", start, None, None, None, 0, 0), ("c", "B", end, None, None, None, 0, 1),
            ("d", "A", start, None, None, None, 0, 2)]
    seqs = V.case_sequences(spark.createDataFrame(rows, SCHEMA))
    got = {r["case_id"]: r["duration_s"] for r in V.cases(seqs).collect()}
    assert got == {"c": (end - start).total_seconds(), "d": 0.0}
    assert got["c"] == 1072732.48


def test_a_variants_mean_duration_is_the_same_in_any_partitioning(spark):
    """Durations whose double sum depends on the order they are added in (one long case
    among many short ones of a variant): the mean is the exact mean of the microseconds,
    the same for one partition and for many in the other order."""
    start = datetime(2020, 1, 1)
    spans = [timedelta(days=3650, microseconds=1)] + \
        [timedelta(seconds=0.1 * (i % 7), microseconds=i) for i in range(1, 400)]
    rows = [r for i, d in enumerate(spans) for r in (
        (f"c{i:03d}", "A", start, None, None, None, 0, 2 * i),
        (f"c{i:03d}", "B", start + d, None, None, None, 0, 2 * i + 1))]
    frame = spark.createDataFrame(rows, SCHEMA)

    def mean(df) -> float:
        [row] = V.variants(V.cases(V.case_sequences(df))).collect()
        return row["mean_duration_s"]

    one = mean(frame.coalesce(1))
    many = mean(frame.orderBy(F.desc("case_id")).repartition(13, "case_id"))
    micros = [d // timedelta(microseconds=1) for d in spans]
    exact = Fraction(sum(micros), len(micros) * 1_000_000)
    assert one == many
    assert abs(Fraction(one) - exact) <= Fraction(math.ulp(float(exact)))


def test_arc_times_equal_sparks_average_and_median_of_the_decimal_seconds(spark):
    """Gaps from 0 to 31 years in microseconds, many groups: the means from two long sums
    are the decimal average's to the last of its 13 places (and the exact mean rounded
    there), the medians the percentile's of the decimal seconds."""
    rnd = random.Random(11)
    rows = [(f"g{rnd.randrange(9)}", rnd.choice([rnd.randrange(10**7), rnd.randrange(10**15),
                                                 999_999, 1_000_000, 0, 10**6 * rnd.randrange(9)]))
            for _ in range(6_000)]
    frame = spark.createDataFrame(rows, "g string, us long").withColumn(
        "d", F.col("us") / F.lit(1_000_000.0).cast("decimal(8,1)"))
    got = frame.groupBy("g").agg(*V.arc_times())
    want = frame.groupBy("g").agg(F.avg("d").alias("mean_s"),
                                  F.percentile(F.col("d").cast("double"), 0.5).alias("median_s"))
    assert got.schema == want.schema
    assert sorted(got.collect()) == sorted(want.collect())
    for row in got.collect():
        us = [u for g, u in rows if g == row["g"]]
        exact = Fraction(sum(us), len(us) * 1_000_000)
        assert row["mean_s"] == (Decimal(exact.numerator) / Decimal(exact.denominator)).quantize(
            Decimal("1e-13"), ROUND_HALF_UP)
