"""SparkSession from configuration; never created at import time."""

from __future__ import annotations

import os

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from sparkfield.core.conf import Config


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
    checkpoint_dir = cfg.practices.checkpoint_dir
    if checkpoint_dir:
        spark.sparkContext.setCheckpointDir(checkpoint_dir)
    return spark


def _submitted_conf() -> SparkConf:
    """What spark-submit passed to this process (empty when started from plain Python, where
    connecting early would start the JVM before driver settings such as memory are known)."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return SparkConf(loadDefaults=False)
    SparkContext._ensure_initialized()
    return SparkConf()
