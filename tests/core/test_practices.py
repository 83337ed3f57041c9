from contextlib import ExitStack

import pytest
from pyspark import StorageLevel
from pyspark.sql import functions as F

from sparkfield.core.practices import (
    Checkpointer,
    balanced,
    cached,
    cached_storage_bytes,
    local_checkpoint,
    plan_size,
    salted_join,
    sample,
    skew_report,
    skew_stats,
)
from sparkfield.core.report import RunReport


def test_sample_is_seeded_and_takes_a_fraction(spark):
    df = spark.range(20000)
    a = sorted(r.id for r in sample(df, 0.1, seed=7).collect())
    b = sorted(r.id for r in sample(df, 0.1, seed=7).collect())
    assert a == b
    assert 1500 < len(a) < 2500
    assert sample(df, None) is df and sample(df, 1.0) is df
    with pytest.raises(ValueError):
        sample(df, 0.0)


def test_cached_persists_primes_and_releases(spark):
    report = RunReport("t")
    df = spark.range(50000).withColumn("v", F.col("id") * 2)
    assert cached_storage_bytes(spark) == 0
    with cached(df, "numbers", "MEMORY_ONLY", report) as c:
        assert c.storageLevel == StorageLevel.MEMORY_ONLY
        assert cached_storage_bytes(spark) > 0  # primed: blocks exist before first use
        assert c.count() == 50000
    assert cached_storage_bytes(spark) == 0
    assert df.storageLevel == StorageLevel(False, False, False, False, 1)
    assert report.cached == [{"name": "numbers", "level": str(StorageLevel.MEMORY_ONLY),
                              "rows": 50000}]


def test_cached_releases_on_error(spark):
    df = spark.range(1000)
    with pytest.raises(RuntimeError), cached(df, "x"):
        assert cached_storage_bytes(spark) > 0
        raise RuntimeError("boom")
    assert cached_storage_bytes(spark) == 0


def _iterate(spark, n, checkpoint):
    df = spark.range(100).withColumn("v", F.lit(0))
    sizes = []
    for i in range(1, n + 1):
        df = df.withColumn("v", F.col("v") + F.col("id") % 3).where(F.col("v") >= 0)
        if checkpoint is not None:
            df = checkpoint(df, i)
        sizes.append(plan_size(df))
    return df, sizes


@pytest.mark.parametrize("local", [False, True])
def test_checkpointer_keeps_the_plan_bounded(spark, local):
    plain, grow = _iterate(spark, 30, None)
    with ExitStack() as stack:
        cut, bounded = _iterate(spark, 30, Checkpointer(every=5, local=local, stack=stack))
        assert grow[-1] > 4 * grow[4]  # lineage grows with every iteration
        assert max(bounded) <= max(bounded[:5]) + 1  # never beyond one interval's worth
        assert sorted(plain.collect()) == sorted(cut.collect())  # same answer
    assert cached_storage_bytes(spark) == 0


def test_local_checkpoints_are_released_when_the_stack_closes(spark):
    df = spark.range(20000).withColumn("v", F.col("id") % 7)
    with ExitStack() as stack:
        cut = local_checkpoint(df, stack)
        assert plan_size(cut) == 1 and cached_storage_bytes(spark) > 0
        check = Checkpointer(every=1, local=True, stack=stack)
        again = check(cut.where("v > 0"), 1)
        assert plan_size(again) == 1
        assert again.count() == df.where("v > 0").count()
    assert cached_storage_bytes(spark) == 0


def test_skew_stats_counts_empty_partitions():
    s = skew_stats([0, 0, 10, 10, 100])
    assert s["max"] == 100 and s["empty"] == 2 and s["partitions"] == 5
    assert s["ratio"] == 10.0


def test_salting_spreads_a_hot_key(spark):
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    try:
        hot = spark.range(40000).select(
            F.when(F.col("id") % 10 < 9, F.lit(0)).otherwise(F.col("id") % 50).alias("k"),
            F.col("id"),
        )
        dim = spark.range(50).select(F.col("id").alias("k"), (F.col("id") * 10).alias("w"))
        plain = hot.join(dim, "k")
        salted = salted_join(hot, dim, "k", buckets=16)
        before = skew_report(plain)
        after = skew_report(salted)
        assert plain.count() == salted.count() == 40000
        assert before["ratio"] > 3
        assert after["ratio"] < before["ratio"] / 2
        got = sorted(salted.select("id", "w").collect())
        assert got == sorted(plain.select("id", "w").collect())
    finally:
        spark.conf.set("spark.sql.adaptive.enabled", "true")
        spark.conf.unset("spark.sql.autoBroadcastJoinThreshold")


def _weights_by_partition(df, weight: str) -> list[float]:
    return [sum(r[weight] or 0 for r in part) for part in df.rdd.glom().collect()]


def test_balanced_lays_rows_out_by_weight_and_keeps_every_row(spark):
    schema = "key string, w long, payload string"
    rows = [("a", 90, "x"), ("b", 60, "y"), ("c", 50, None), ("d", 40, "z"), ("e", 10, "v"),
            ("f", None, "null weight"), (None, 5, "null key"), ("a", 10, "a again")]
    df = spark.createDataFrame(rows, schema).repartition(5)
    out = balanced(df, "key", "w", partitions=2)
    assert out.rdd.getNumPartitions() == 2
    # every row once, a null key and a null weight included, columns as they were
    assert out.columns == df.columns
    assert sorted(out.collect(), key=str) == sorted(df.collect(), key=str)
    # LPT over the keys' total weights (a=100, b=60, c=50, d=40, e=10): a | b; c joins b
    # (110), d joins a (140), e joins b (120); both rows of "a" in one partition
    parts = out.rdd.glom().collect()
    where = {}
    for i, part in enumerate(parts):
        for r in part:
            where.setdefault(r["key"], set()).add(i)
    assert all(len(v) == 1 for k, v in where.items() if k)
    assert where["a"] == where["d"] != where["b"] == where["c"] == where["e"]


def test_balanced_defaults_to_one_partition_per_task_slot_and_splits_heavy_input(spark):
    df = spark.range(0, 40, 1, 7).select(F.col("id").cast("string").alias("k"),
                                         (F.col("id") + 1).alias("w"))
    slots = spark.sparkContext.defaultParallelism
    even = balanced(df, "k", "w")
    assert even.rdd.getNumPartitions() == slots
    loads = _weights_by_partition(even, "w")
    assert max(loads) - min(loads) <= 40  # LPT: within the largest weight
    # total 820: at most 100 a partition -> 9 partitions
    assert balanced(df, "k", "w", max_weight=100).rdd.getNumPartitions() == 9


def test_balanced_deals_large_inputs_out_without_placing_rows(spark, monkeypatch):
    import sparkfield.core.practices as practices

    monkeypatch.setattr(practices, "BALANCE_MAX_ROWS", 10)
    df = spark.range(0, 100, 1, 3).select(F.col("id").alias("k"), F.lit(1).alias("w"))
    out = balanced(df, "k", "w", partitions=4)
    assert out.rdd.getNumPartitions() == 4
    assert sorted(r["k"] for r in out.collect()) == list(range(100))
