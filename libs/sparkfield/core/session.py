"""SparkSession from configuration; never created at import time."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from sparkfield.core.conf import Config, load_config
from sparkfield.core.connect import bound_retries, connect_retries
from sparkfield.core.errors import ConfigError
from sparkfield.core.practices import checkpoint_location, release_checkpoints


def build_session(cfg: Config, app_name: str | None = None) -> SparkSession:
    """Build (or join) the session the conf describes.

    Under spark-submit the master and settings given on its command line win: the profile's
    master is used only when none is set yet, and conf values never replace submitted ones.
    """
    settings = cfg.spark
    submitted = _submitted_conf()
    _local_workers_use_this_python(settings.master, settings.conf, submitted)
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


def connect_session(remote: str | None = None, cfg: Config | None = None) -> SparkSession:
    """A Spark Connect session to ``remote`` (default: ``$SPARK_REMOTE``) whose calls give up
    on a dead or unreachable server as the conf's ``connect`` section says (about 40 s by
    default, where pyspark alone keeps retrying for about 10 minutes). ``cfg`` defaults to
    the conf directory's ``base.yaml`` and local profile."""
    url = remote or os.environ.get("SPARK_REMOTE")
    if not url:
        raise ConfigError("no Spark Connect server: pass remote='sc://HOST:PORT' or set "
                          "SPARK_REMOTE")
    cfg = cfg if cfg is not None else load_config("connect", "local")
    retries = connect_retries(cfg.raw.get("connect"))
    return bound_retries(SparkSession.builder.remote(url).getOrCreate(), retries)


def end_session(spark: SparkSession) -> None:
    """Stop a session built by ``build_session``, deleting this run's checkpoint files first."""
    try:
        own = spark.conf.get(OWN_CHECKPOINTS, "") or None
        release_checkpoints(spark, own)
    except Exception:  # cleanup only: never hides the run's own outcome
        pass
    spark.stop()


def _local_workers_use_this_python(master: str | None, conf: dict[str, str],
                                   submitted: SparkConf) -> None:
    """A session started from plain Python (``python -m sparkfield``, the ``sparkfield``
    command, a notebook) on a local master runs its Python workers with this interpreter,
    which has the library and its packages: Spark's default is ``python3`` from the PATH.
    ``PYSPARK_PYTHON`` or ``spark.pyspark.python``, when set, win."""
    if "PYSPARK_GATEWAY_PORT" in os.environ or SparkContext._active_spark_context is not None:
        return  # spark-submit chose the interpreters, or the session exists already
    if os.environ.get("PYSPARK_PYTHON") or "spark.pyspark.python" in conf \
            or submitted.contains("spark.pyspark.python"):
        return
    if (master or "").startswith("local") and sys.executable:
        os.environ["PYSPARK_PYTHON"] = sys.executable  # read when the SparkContext starts


def _submitted_conf() -> SparkConf:
    """What spark-submit passed to this process (empty when started from plain Python, where
    connecting early would start the JVM before driver settings such as memory are known)."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return SparkConf(loadDefaults=False)
    SparkContext._ensure_initialized()
    return SparkConf()


@contextmanager
def session_setting(spark: SparkSession, key: str, value: str | None) -> Iterator[None]:
    """The session's ``key`` set to ``value`` (None: unset) for the block, then given back as
    it was (unset again when it was unset)."""
    before = spark.conf.get(key, None)
    if value is None:
        spark.conf.unset(key)
    else:
        spark.conf.set(key, value)
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)
