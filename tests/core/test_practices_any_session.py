"""The practices offered for a user's own pipelines, on classic Spark and over Spark Connect
alike (this file is in the Connect run): partition sizes, skew, the salted join, the balanced
layout and local checkpoints; what needs the SparkContext says so in one line."""

from __future__ import annotations

from contextlib import ExitStack

import pytest
from pyspark.sql import functions as F

from sparkfield.core.connect import is_connect
from sparkfield.core.errors import ConfigError
from sparkfield.core.practices import (
    balanced,
    cached_storage_bytes,
    cut_lineage,
    local_checkpoint,
    partition_sizes,
    plan_size,
    salted_join,
    skew_report,
)


def test_partition_sizes_count_empty_partitions_too(spark):
    df = spark.range(0, 12, 1, 4).where("id % 4 = 0")  # 0, 4, 8: one row in three of four
    assert sorted(partition_sizes(df)) == [0, 1, 1, 1]
    assert sum(partition_sizes(spark.range(0, 100, 1, 5))) == 100
    stats = skew_report(spark.range(0, 100, 1, 5).union(spark.range(0, 400, 1, 1)))
    assert stats["partitions"] == 6 and stats["max"] == 400 and stats["ratio"] == 20.0


def test_the_salted_join_equals_the_plain_join(spark):
    big = spark.createDataFrame([(k % 3 if k % 10 else 0, k) for k in range(200)], "k int, v int")
    dim = spark.createDataFrame([(0, "a"), (1, "b"), (2, "c")], "k int, name string")
    plain = sorted(big.join(dim, "k").collect())
    assert sorted(salted_join(big, dim, "k", buckets=8).collect()) == plain


def test_balanced_keeps_every_row_with_its_key_together(spark):
    df = spark.createDataFrame([("a", 10.0)] * 5 + [("b", 1.0)] * 5 + [(None, 1.0)],
                               "key string, w double")
    out = balanced(df, "key", "w", partitions=2)
    placed = out.select("key", F.spark_partition_id().alias("p")).distinct().collect()
    assert out.count() == 11
    assert len({r["p"] for r in placed if r["key"] == "a"}) == 1


def test_local_checkpoints_are_released_with_their_stack(spark):
    with ExitStack() as stack:
        cut = local_checkpoint(spark.range(10).withColumn("x", F.col("id") * 2), stack)
        assert cut.agg(F.sum("x")).first()[0] == 90


def test_a_cut_frame_keeps_its_rows_and_reads_its_input_once(spark):
    """The checkpoint directory where the session has one (classic), a local checkpoint
    otherwise (over Spark Connect: no context to ask)."""
    base = spark.range(20).withColumn("x", F.col("id") % 3)
    twice = base.join(base.groupBy("x").count(), "x")
    cut = cut_lineage(twice)
    assert sorted(cut.collect()) == sorted(twice.collect())
    if not is_connect(spark):
        assert plan_size(cut) == 1 < plan_size(twice)


def test_what_needs_the_spark_context_says_so(spark):
    df = spark.range(3)
    if is_connect(spark):
        for call, what in ((lambda: cached_storage_bytes(spark), "cached_storage_bytes"),
                           (lambda: plan_size(df), "plan_size")):
            with pytest.raises(ConfigError, match=f"{what} .*needs classic Spark"):
                call()
    else:
        assert cached_storage_bytes(spark) >= 0 and plan_size(df) >= 1
