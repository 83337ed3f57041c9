"""Keeping the frames that several later plans read, as the session's ``spark.sparkfield.keep``
says: cached (the default) or as local checkpoints.

A cached frame keeps its whole plan: every plan built on it carries that plan, and Spark
analyses, optimises and matches it against the cache each time. On a large input that costs
little beside the data. On a small one it is most of the run: event_log on an OCEL mapping of
830 orders took 65.8 s with its frames cached and 47.5 s with them checkpointed (means of
four alternated runs; docs/operations.md). A local checkpoint
(``localCheckpoint(eager=False)``) cuts the lineage: plans on it start from its stored
partitions, which the first job that reads it fills. Its blocks live in executor storage
and are not recomputed when an executor is lost, so it suits small inputs on one machine;
submit gives it to them (``submit.small_input_conf`` in conf/local.yaml).
"""

from __future__ import annotations

from contextlib import ExitStack

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession

from sparkfield.core.errors import ConfigError
from sparkfield.core.practices import release_local_checkpoint

KEEP_CONF = "spark.sparkfield.keep"
CACHE, LOCAL_CHECKPOINT = "cache", "local_checkpoint"
KEEP_MODES = (CACHE, LOCAL_CHECKPOINT)


def keep_mode(spark: SparkSession) -> str:
    """The session's ``spark.sparkfield.keep``: ``cache`` when unset."""
    mode = (spark.conf.get(KEEP_CONF, None) or CACHE).strip().lower()
    return _checked(mode, f"{KEEP_CONF}={mode!r}")


def _checked(mode: str, what: str) -> str:
    if mode not in KEEP_MODES:
        raise ConfigError(f"{what}: expected one of {', '.join(KEEP_MODES)}")
    return mode


class Keeper:
    """Keeps frames for one run and lists them (``names``) for the run report.

    ``cache``: persisted at MEMORY_AND_DISK_DESER and unpersisted when ``stack`` closes.
    ``local_checkpoint``: the lineage cut, filled by the first job that reads the frame;
    its blocks are dropped when ``stack`` closes, after which it cannot be read, unless
    ``release_checkpoints`` is False (for a run that hands its frames back after its stack
    closes: Spark then drops the blocks once nothing refers to them). ``mode`` None: the
    session's (:func:`keep_mode`), read with the first frame kept.
    """

    def __init__(self, stack: ExitStack, mode: str | None = None,
                 release_checkpoints: bool = True):
        self.stack = stack
        self.mode = mode if mode is None else _checked(mode, f"keep mode {mode!r}")
        self.release_checkpoints = release_checkpoints
        self.names: list[str] = []

    @property
    def level(self) -> str:
        """How the frames are kept, in the run report's words."""
        return "LOCAL_CHECKPOINT" if self.mode == LOCAL_CHECKPOINT else "MEMORY_AND_DISK_DESER"

    def cuts_lineage(self, spark: SparkSession) -> bool:
        """Whether frames are kept as local checkpoints: then a frame read once is worth
        keeping too, for the plans it keeps small."""
        if self.mode is None:
            self.mode = keep_mode(spark)
        return self.mode == LOCAL_CHECKPOINT

    def __call__(self, df: DataFrame, name: str) -> DataFrame:
        self.names.append(name)
        if self.cuts_lineage(df.sparkSession):
            cut = df.localCheckpoint(eager=False)
            if self.release_checkpoints:
                self.stack.callback(release_local_checkpoint, cut)
            return cut
        persisted = df.persist(StorageLevel.MEMORY_AND_DISK_DESER)
        self.stack.callback(persisted.unpersist, True)
        return persisted
