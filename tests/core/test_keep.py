"""Keeping frames that several plans read: cached (the default) or as local checkpoints, as
the session's ``spark.sparkfield.keep`` says."""

from contextlib import ExitStack

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from sparkfield.core.connect import is_connect
from sparkfield.core.errors import ConfigError
from sparkfield.core.keep import CACHE, KEEP_CONF, LOCAL_CHECKPOINT, Keeper, keep_mode
from sparkfield.core.practices import cached_storage_bytes, release_local_checkpoint
from sparkfield.core.session import session_setting


def keep_conf(spark, value):
    """The session's keep mode set to ``value`` for the block (None: unset)."""
    return session_setting(spark, KEEP_CONF, value)


def _frame(spark):
    return (spark.createDataFrame([(i, None if i % 3 == 0 else f"v{i}") for i in range(20)],
                                  "k long, v string")
            .groupBy((F.col("k") % 4).alias("g")).agg(F.count("v").alias("n")))


def test_the_mode_is_the_sessions_and_cache_when_unset(spark):
    with keep_conf(spark, None):
        assert keep_mode(spark) == CACHE
    with keep_conf(spark, " Local_Checkpoint "):
        assert keep_mode(spark) == LOCAL_CHECKPOINT
    with keep_conf(spark, "disk"), pytest.raises(ConfigError, match="spark.sparkfield.keep"):
        keep_mode(spark)
    with pytest.raises(ConfigError, match="keep mode 'disk'"):
        Keeper(ExitStack(), "disk")


def test_cached_frames_are_released_with_the_stack(spark):
    df = _frame(spark)
    with ExitStack() as stack:
        keep = Keeper(stack, CACHE)
        kept = keep(df, "groups")
        assert kept.storageLevel.useMemory and keep.names == ["groups"]
        assert keep.level == "MEMORY_AND_DISK_DESER"
        assert_df_equality(kept, df, ignore_row_order=True)
    assert not kept.storageLevel.useMemory


def test_a_local_checkpoint_holds_the_rows_and_is_dropped_with_the_stack(spark):
    df = _frame(spark)
    classic = not is_connect(spark)
    before = cached_storage_bytes(spark) if classic else 0
    with keep_conf(spark, LOCAL_CHECKPOINT), ExitStack() as stack:
        keep = Keeper(stack)  # the session's mode, read with the first frame
        kept = keep(df, "groups")
        assert keep.mode == LOCAL_CHECKPOINT and keep.level == "LOCAL_CHECKPOINT"
        later = kept.where(F.col("n") > 0)
        assert_df_equality(later, df.where(F.col("n") > 0), ignore_row_order=True)
        if classic:  # filled by the first job that read it; the plan on it starts there
            assert cached_storage_bytes(spark) > before
            plan = later._jdf.queryExecution().analyzed().toString()
            assert "LogicalRDD" in plan and "Aggregate" not in plan, plan
    if classic:
        assert cached_storage_bytes(spark) == before


def test_a_local_checkpoint_handed_back_stays_readable_after_the_stack(spark):
    df = _frame(spark)
    with ExitStack() as stack:
        kept = Keeper(stack, LOCAL_CHECKPOINT, release_checkpoints=False)(df, "groups")
        assert kept.count() == 4
    try:
        assert_df_equality(kept, df, ignore_row_order=True)
    finally:
        release_local_checkpoint(kept)  # the session's later tests see no blocks of it
