"""What a building block may ask of its session on classic Spark and over Spark Connect alike.

A Spark Connect client has no SparkContext (no JVM gateway, RDDs, broadcast variables or
accumulators). The library's public functions and stages use the DataFrame API only; where they
need a figure the SparkContext gives on classic Spark, they take it from here.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from sparkfield.core.errors import ConfigError

# rows of the probe that counts task slots: more than any cluster has cores
_PROBE_ROWS = 1 << 16


def is_connect(spark: Any) -> bool:
    """True for a Spark Connect session (``sc://...``)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def default_parallelism(spark: SparkSession) -> int:
    """Spark's default parallelism (the task slots of the application): the SparkContext's on
    classic Spark; over Connect the conf's value, else the partitions ``spark.range`` gets,
    which Spark sizes by the same figure."""
    if not is_connect(spark):
        return spark.sparkContext.defaultParallelism
    value = spark.conf.get("spark.default.parallelism", None)
    if value:
        return int(value)
    probe = spark.range(_PROBE_ROWS).select(F.spark_partition_id().alias("p"))
    return max(1, probe.agg(F.countDistinct("p").alias("n")).collect()[0]["n"])


def require_classic(spark: Any, what: str) -> None:
    """A clear error for the few things that need classic Spark (``what`` names it)."""
    if is_connect(spark):
        raise ConfigError(f"{what} needs classic Spark (a SparkContext); this is a Spark "
                          "Connect session")
