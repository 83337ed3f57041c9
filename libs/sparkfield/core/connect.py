"""What a building block may ask of its session on classic Spark and over Spark Connect alike.

A Spark Connect client has no SparkContext (no JVM gateway, RDDs, broadcast variables or
accumulators). The library's public functions and stages use the DataFrame API only; where they
need a figure the SparkContext gives on classic Spark, they take it from here.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
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


# pyspark's policy adds up to this much jitter to a backoff of at least _JITTER_FROM_MS
_JITTER_MS = 500
_JITTER_FROM_MS = 2000


@dataclass(frozen=True)
class ConnectRetries:
    """How a Spark Connect session retries a server it cannot reach (the ``connect`` section
    of the conf). pyspark's own policy retries for about 10 minutes before the first error;
    these defaults give up after about 40 seconds (:meth:`longest_wait_s`)."""

    max_retries: int = 7
    initial_backoff_ms: int = 50
    backoff_multiplier: float = 4.0
    max_backoff_ms: int = 10_000

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ConfigError(f"connect.{f.name} must be a number >= 0, not {value!r}")
        if not isinstance(self.max_retries, int):
            raise ConfigError(f"connect.max_retries must be a whole number, not "
                              f"{self.max_retries!r}")
        if self.backoff_multiplier < 1:
            raise ConfigError("connect.backoff_multiplier must be >= 1")

    def backoffs_ms(self) -> list[float]:
        """The waits before each retry, without jitter."""
        waits, wait = [], float(self.initial_backoff_ms)
        for _ in range(self.max_retries):
            waits.append(wait)
            wait = min(float(self.max_backoff_ms), wait * self.backoff_multiplier)
        return waits

    def longest_wait_s(self) -> float:
        """The most a call waits in retries before it raises (jitter included)."""
        return sum(w + (_JITTER_MS if w >= _JITTER_FROM_MS else 0)
                   for w in self.backoffs_ms()) / 1000

    def policy(self) -> Any:
        """pyspark's retry policy with these bounds (a server's own retry delay is capped by
        ``max_backoff_ms`` too)."""
        from pyspark.sql.connect.client.retries import DefaultPolicy

        return DefaultPolicy(max_retries=self.max_retries,
                             initial_backoff=int(self.initial_backoff_ms),
                             backoff_multiplier=float(self.backoff_multiplier),
                             max_backoff=int(self.max_backoff_ms),
                             max_server_retry_delay=int(self.max_backoff_ms))


def connect_retries(section: dict[str, Any] | None) -> ConnectRetries:
    """The ``connect`` section of a conf as :class:`ConnectRetries` (unknown keys are errors)."""
    section = section or {}
    if not isinstance(section, dict):
        raise ConfigError(f"connect must be a mapping of retry settings, not {section!r}")
    known = {f.name for f in fields(ConnectRetries)}
    unknown = sorted(set(section) - known)
    if unknown:
        raise ConfigError(f"unknown key 'connect.{unknown[0]}' (known: {', '.join(sorted(known))})")
    return ConnectRetries(**section)


def bound_retries(spark: Any, retries: ConnectRetries | None = None) -> Any:
    """``spark`` with its Spark Connect calls retrying an unreachable server only as long as
    ``retries`` allows (default :class:`ConnectRetries`); a classic session is returned as
    it is."""
    if is_connect(spark):
        spark.client.set_retry_policies([(retries or ConnectRetries()).policy()])
    return spark
