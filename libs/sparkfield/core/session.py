"""SparkSession from configuration; never created at import time."""

from __future__ import annotations

import os

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from sparkfield.core.conf import Config
from sparkfield.core.errors import ConfigError
from sparkfield.core.practices import checkpoint_location, release_checkpoints


def build_session(cfg: Config, app_name: str | None = None) -> SparkSession:
    """Build (or join) the session the conf describes.

    Under spark-submit the master and settings given on its command line win: the profile's
    master is used only when none is set yet, and conf values never replace submitted ones.
    """
    settings = cfg.spark
    submitted = _submitted_conf()
    builder = SparkSession.builder.appName(app_name or f"{settings.app_name}-{cfg.job_name}")
    if settings.master and not submitted.contains("spark.master"):
        builder = builder.master(settings.master)
    for key, value in settings.conf.items():
        if not submitted.contains(key):
            builder = builder.config(key, value)
    spark = builder.getOrCreate()
    try:
        checkpoint_dir, own = checkpoint_location(spark, cfg.practices.checkpoint_dir,
                                                  cfg.job.get("output"))
    except ConfigError:
        spark.stop()
        raise
    if checkpoint_dir:
        spark.sparkContext.setCheckpointDir(checkpoint_dir)
        spark.conf.set(OWN_CHECKPOINTS, checkpoint_dir if own else "")
    return spark


OWN_CHECKPOINTS = "sparkfield.checkpoints.own"


def end_session(spark: SparkSession) -> None:
    """Stop a session built by ``build_session``, deleting this run's checkpoint files first."""
    try:
        own = spark.conf.get(OWN_CHECKPOINTS, "") or None
        release_checkpoints(spark, own)
    except Exception:  # cleanup only: never hides the run's own outcome
        pass
    spark.stop()


def _submitted_conf() -> SparkConf:
    """What spark-submit passed to this process (empty when started from plain Python, where
    connecting early would start the JVM before driver settings such as memory are known)."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return SparkConf(loadDefaults=False)
    SparkContext._ensure_initialized()
    return SparkConf()
