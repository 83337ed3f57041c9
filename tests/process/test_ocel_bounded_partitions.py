"""The SQLite writer streams tables to the driver one partition at a time: partitions are
bounded in rows (split when too large, merged when tiny) and the rows keep their order."""

from __future__ import annotations

from pyspark.sql import functions as F

from sparkfield.process.ocel.write import bounded_partitions


def test_large_partitions_are_split_and_keep_the_row_order(spark):
    # two partitions of 1,000 rows, values not sorted: the order is the partitions' own
    df = spark.range(0, 2000, 1, 2).select(((F.col("id") * 7919) % 2003).alias("v"))
    want = [r.v for r in df.collect()]
    split = bounded_partitions(df, 2000, per=300)
    assert split.rdd.getNumPartitions() == 7
    assert max(split.rdd.glom().map(len).collect()) <= 400
    assert [r.v for r in split.toLocalIterator()] == want


def test_small_partitions_are_merged_and_counts_unknown_leave_the_frame(spark):
    df = spark.range(0, 1000, 1, 10).select(((F.col("id") * 31) % 1009).alias("v"))
    want = [r.v for r in df.collect()]
    merged = bounded_partitions(df, 1000, per=300)
    assert merged.rdd.getNumPartitions() == 4
    assert [r.v for r in merged.toLocalIterator()] == want
    assert bounded_partitions(df, None, per=300) is df
    assert bounded_partitions(df, 1000, per=150).rdd.getNumPartitions() == 7  # 10 -> 7
