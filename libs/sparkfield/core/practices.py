"""The Spark practices every job uses: sample first, cache what is reused (and release it),
checkpoint iterative work, measure and fix skew."""

from __future__ import annotations

import heapq
import math
import statistics
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager, nullcontext
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.core.connect import default_parallelism, is_connect, require_classic
from sparkfield.core.paths import driver_private_path, own_checkpoints_name
from sparkfield.core.report import Stats


def sample(df: DataFrame, fraction: float | None, seed: int = 42) -> DataFrame:
    """A seeded Bernoulli sample; ``None`` or ``1.0`` returns ``df`` unchanged."""
    if fraction is None or fraction >= 1.0:
        return df
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"sample fraction must be in (0, 1], got {fraction}")
    return df.sample(withReplacement=False, fraction=fraction, seed=seed)


def storage_level(name: str | StorageLevel) -> StorageLevel:
    if isinstance(name, StorageLevel):
        return name
    try:
        return getattr(StorageLevel, name.upper())
    except AttributeError as exc:
        raise ValueError(f"unknown storage level {name!r}") from exc


@contextmanager
def cached(
    df: DataFrame,
    name: str = "df",
    level: str | StorageLevel = StorageLevel.MEMORY_AND_DISK_DESER,
    report: Stats | None = None,
) -> Iterator[DataFrame]:
    """Persist ``df`` with an explicit level, prime it with a count, always unpersist on exit.

    The count is recorded (it is usually needed anyway) and the block sees the persisted frame;
    :func:`cached_rows` also hands the block the count.
    """
    with cached_rows(df, name, level, report) as (persisted, _):
        yield persisted


@contextmanager
def cached_rows(
    df: DataFrame,
    name: str = "df",
    level: str | StorageLevel = StorageLevel.MEMORY_AND_DISK_DESER,
    report: Stats | None = None,
) -> Iterator[tuple[DataFrame, int]]:
    """:func:`cached` that yields ``(persisted frame, its row count)``; ``report`` (a
    :class:`RunReport` or a compute step's :class:`Stats`) lists it under ``cached``."""
    lvl = storage_level(level)
    # filling the cache runs the plan behind it, and persisting plans it: a step of its own
    step = report.step(f"cache {name}") if report is not None else nullcontext()
    persisted = None
    try:
        with step:
            persisted = df.persist(lvl)
            rows = persisted.count()
        if report is not None:
            report.cached.append({"name": name, "level": str(lvl), "rows": rows})
        yield persisted, rows
    finally:
        if persisted is not None:
            persisted.unpersist(blocking=True)


def cached_storage_bytes(spark: SparkSession) -> int:
    """Bytes held by cached RDD/DataFrame blocks across the application (memory + disk).
    Classic Spark only: the storage view is the SparkContext's."""
    require_classic(spark, "cached_storage_bytes (the application's storage view)")
    infos = spark.sparkContext._jsc.sc().getRDDStorageInfo()
    return int(sum(i.memSize() + i.diskSize() for i in infos))


def local_checkpoint(df: DataFrame, stack: ExitStack) -> DataFrame:
    """``df`` materialised in executor storage with its lineage cut (for inputs this run
    replaces); its blocks are released when ``stack`` closes, not whenever the JVM collects
    the plan, so a session that runs many jobs does not keep them."""
    cut = df.localCheckpoint(eager=True)
    stack.callback(release_local_checkpoint, cut)
    return cut


def cut_lineage(df: DataFrame) -> DataFrame:
    """``df`` materialised with its lineage cut, for a frame whose plan would otherwise be
    copied into every plan built on it: a reliable checkpoint where the session has a
    checkpoint directory (classic Spark; it survives the loss of an executor), else a local
    checkpoint. Neither is released with a run's stack: frames a run hands back and that are
    built on it stay readable (Spark drops a local checkpoint's blocks once nothing refers to
    it; a job deletes its own checkpoint directory when it ends)."""
    spark = df.sparkSession
    if not is_connect(spark) and spark.sparkContext.getCheckpointDir():
        return df.checkpoint(eager=True)
    return df.localCheckpoint(eager=True)


def release_local_checkpoint(df: DataFrame) -> None:
    """Drop the blocks of a frame made by ``localCheckpoint``; it cannot be read after.
    (Through the context, as ``RDD.unpersist`` would warn that the lineage is gone.) Over
    Spark Connect the server drops them with the plan: there is no context to ask."""
    if is_connect(df.sparkSession):
        return
    jsc = df.sparkSession.sparkContext._jsc.sc()
    jsc.unpersistRDD(df._jdf.logicalPlan().rdd().id(), True)


class Checkpointer:
    """Cuts the lineage of a DataFrame rebuilt in a loop every ``every`` iterations.

    Reliable checkpoints (the default) go to the session's checkpoint directory and survive
    the loss of an executor; local checkpoints are faster but live in executor storage (with
    a ``stack``, they are made eagerly and released when it closes).
    """

    def __init__(self, every: int = 3, local: bool = False, eager: bool = True,
                 stack: ExitStack | None = None):
        if every < 1:
            raise ValueError("checkpoint interval must be >= 1")
        self.every = every
        self.local = local
        self.eager = eager
        self.stack = stack
        self.count = 0

    def __call__(self, df: DataFrame, iteration: int) -> DataFrame:
        """Return ``df`` checkpointed when ``iteration`` (1-based) is a multiple of ``every``."""
        if iteration % self.every != 0:
            return df
        self.count += 1
        if self.local and self.stack is not None:
            return local_checkpoint(df, self.stack)
        if self.local:
            return df.localCheckpoint(eager=self.eager)
        return df.checkpoint(eager=self.eager)


def plan_size(df: DataFrame) -> int:
    """Nodes in the analyzed logical plan: what grows when lineage is not cut. Classic Spark
    only (the plan is the JVM's)."""
    require_classic(df.sparkSession, "plan_size (the JVM's logical plan)")
    return _count_nodes(df._jdf.queryExecution().analyzed())


def _count_nodes(plan: Any) -> int:
    n = 1
    children = plan.children()
    for i in range(children.size()):
        n += _count_nodes(children.apply(i))
    return n


def partition_sizes(df: DataFrame) -> list[int]:
    """Rows in every partition of ``df``, empty partitions included."""
    if is_connect(df.sparkSession):
        return _partition_sizes_by_task(df)
    n = df.rdd.getNumPartitions()
    counts = {
        r["pid"]: r["rows"]
        for r in df.groupBy(F.spark_partition_id().alias("pid"))
        .agg(F.count(F.lit(1)).alias("rows"))
        .collect()
    }
    return [int(counts.get(i, 0)) for i in range(n)]


def _partition_sizes_by_task(df: DataFrame) -> list[int]:
    """:func:`partition_sizes` with the DataFrame API only (Spark Connect has no RDD to ask for
    the number of partitions): each partition's task reports its own rows, an empty one too.
    Its rows pass through a Python worker as Arrow batches, one column wide."""

    def count(batches: Iterator[Any]) -> Iterator[Any]:
        import pandas as pd
        from pyspark import TaskContext

        rows = sum(len(b) for b in batches)
        yield pd.DataFrame({"pid": [TaskContext.get().partitionId()], "rows": [rows]})

    narrow = df.select(F.lit(0).cast("byte").alias("_"))
    found = {r["pid"]: r["rows"]
             for r in narrow.mapInPandas(count, "pid int, rows long").collect()}
    return [int(found.get(i, 0)) for i in range(max(found, default=-1) + 1)]


def skew_stats(sizes: Sequence[float]) -> dict[str, Any]:
    """max / median over partition sizes (median of the non-empty ones when most are empty,
    so a single loaded partition among idle ones still reads as skew)."""
    if not sizes:
        return {"partitions": 0, "max": 0, "median": 0, "ratio": None}
    non_empty = [s for s in sizes if s > 0] or [0]
    med = statistics.median(sizes)
    if med == 0:
        med = statistics.median(non_empty)
    mx = max(sizes)
    return {
        "partitions": len(sizes),
        "empty": sum(1 for s in sizes if s == 0),
        "max": mx,
        "median": med,
        "min": min(sizes),
        "ratio": round(mx / med, 3) if med else None,
    }


def skew_report(
    df: DataFrame, name: str | None = None, report: Stats | None = None
) -> dict[str, Any]:
    """Rows per partition of ``df`` (max / median); recorded in ``report`` under ``name``."""
    stats = skew_stats(partition_sizes(df))
    if report is not None and name:
        report.skew[name] = stats
    return stats


def salted_join(
    big: DataFrame,
    other: DataFrame,
    on: str | list[str],
    buckets: int,
    how: str = "inner",
    seed: int = 42,
) -> DataFrame:
    """Join where a few keys of ``big`` hold most rows: each row of ``big`` gets a random salt
    in ``[0, buckets)`` and ``other`` is replicated once per salt, so a hot key's rows spread
    over ``buckets`` partitions instead of one."""
    keys = [on] if isinstance(on, str) else list(on)
    if how not in ("inner", "left"):
        raise ValueError("salted_join supports inner and left joins (the salted side is big)")
    salt = "__salt"
    salted_big = big.withColumn(salt, (F.rand(seed) * buckets).cast("int"))
    salted_other = other.withColumn(salt, F.explode(F.sequence(F.lit(0), F.lit(buckets - 1))))
    return salted_big.join(salted_other, keys + [salt], how).drop(salt)


def balance(costs: Sequence[float], bins: int) -> list[int]:
    """Longest-processing-time assignment of items to ``bins``: each item, heaviest first,
    goes to the least loaded bin (the lowest-numbered of equals). Returns the bin of every
    item."""
    heap = [(0.0, b) for b in range(bins)]
    out = [0] * len(costs)
    for idx in sorted(range(len(costs)), key=lambda k: -costs[k]):
        load, b = heapq.heappop(heap)
        out[idx] = b
        heapq.heappush(heap, (load + costs[idx], b))
    return out


# above this many keys a balanced layout deals rows out round-robin: with thousands of rows a
# partition, sizes even out, and the placement (one row a key) would cost more than it saves
BALANCE_MAX_ROWS = 500_000


def task_partitions(spark: SparkSession, total: float, max_weight: float | None = None) -> int:
    """One partition per task slot, more when one would hold over ``max_weight`` of ``total``."""
    return max(default_parallelism(spark), math.ceil(total / max_weight) if max_weight else 1)


def place(df: DataFrame, key: str, loads: Mapping[Any, float], partitions: int
          ) -> tuple[DataFrame, list]:
    """``df`` with the rows of each ``key`` in one of ``partitions`` partitions, the keys packed
    by :func:`balance` over ``loads`` (key -> weight), and the load of every partition. Rows
    whose key is not in ``loads`` (a null key, say) are kept, all in one partition."""
    spark = df.sparkSession
    placed = [k for k in loads if k is not None]
    if not placed:
        return df.repartition(partitions), [0] * partitions
    bins = balance([float(loads[k]) for k in placed], partitions)
    totals: list = [0] * partitions
    for k, b in zip(placed, bins, strict=True):
        totals[b] += loads[k]
    keys = partition_keys(spark, partitions)
    pkey = "__pkey"
    placement = spark.createDataFrame(
        [(k, keys[b]) for k, b in zip(placed, bins, strict=True)],
        T.StructType([df.schema[key], T.StructField(pkey, T.IntegerType())]))
    return df.join(F.broadcast(placement), key, "left").repartition(partitions, pkey) \
        .select(*df.columns), totals


def balanced(df: DataFrame, key: str, weight: str, partitions: int | None = None,
             max_weight: float | None = None) -> DataFrame:
    """``df`` laid out for a Python stage whose cost follows each row's ``weight`` (a numeric
    column, e.g. a page's bytes): ``partitions`` (default :func:`task_partitions`) of about
    equal total weight, the rows of each ``key`` together (:func:`place`). Few partitions of
    equal cost beat many small ones: every Python task costs a fixed start, and the last ones
    to finish leave cores idle. Every row is kept (a null key or weight too)."""
    per_key = df.groupBy(key).agg(F.sum(weight).alias("w"))
    rows = per_key.limit(BALANCE_MAX_ROWS + 1).collect()
    if len(rows) > BALANCE_MAX_ROWS:
        total = float(per_key.agg(F.sum("w")).first()[0] or 0)
        return df.repartition(partitions or task_partitions(df.sparkSession, total, max_weight))
    loads = {k: float(w or 0) for k, w in rows}
    parts = partitions or task_partitions(df.sparkSession, sum(loads.values()), max_weight)
    return place(df, key, loads, parts)[0]


def partition_keys(spark: SparkSession, partitions: int) -> list[int]:
    """For every partition p an int key that Spark's hash partitioning sends to p, so
    ``repartition(partitions, key)`` places rows exactly where a planner (e.g. :func:`balance`)
    put them, instead of where hashing happens to."""
    probe = (
        spark.range(0, max(64 * partitions, 1024))
        .select(F.col("id").cast("int").alias("k"))
        .select("k", F.expr(f"pmod(hash(k), {partitions})").alias("p"))
        .groupBy("p")
        .agg(F.min("k").alias("k"))
        .collect()
    )
    keys = {r["p"]: r["k"] for r in probe}
    if len(keys) < partitions:
        raise RuntimeError("could not find a hash key for every partition")
    return [keys[p] for p in range(partitions)]


def _is_local_master(master: str) -> bool:
    return master.startswith("local")


def checkpoint_location(spark: SparkSession, configured: str | None,
                        output: str | None) -> tuple[str | None, bool]:
    """Where this run's reliable checkpoints go, and whether that place is the run's own (to
    delete at the end, see ``release_checkpoints``).

    Executors write checkpoints and read them back, so off a local master the directory must be
    one every node shares. Default: beside the output (``<parent>/.<name>.checkpoints``, hidden
    from Spark's partition discovery), else with a local master the driver's temp directory.
    A driver-local directory (relative, or under the driver's temp directory) with a cluster
    master is a ConfigError, raised before any work."""
    import tempfile

    from sparkfield.core.errors import ConfigError

    master = spark.sparkContext.master
    if configured:
        where = driver_private_path(configured, spark)
        if where is not None:
            raise ConfigError(
                f"practices.checkpoint_dir {configured} is on the driver's local disk "
                f"({where}), which the executors of {master} cannot share: set it to a "
                "path every node reaches (hdfs://, s3a://, a shared mount) or to null "
                "(beside the output)")
        return configured, False
    if output:
        jvm = spark.sparkContext._jvm
        jpath = jvm.org.apache.hadoop.fs.Path(output.rstrip("/"))
        parent = jpath.getParent()
        name = own_checkpoints_name(str(jpath.getName()))
        return (str(parent.toString()) + "/" + name if parent is not None else name), True
    if _is_local_master(master):
        import os

        return os.path.join(tempfile.gettempdir(), "sparkfield", "checkpoints"), False
    return None, False


def release_checkpoints(spark: SparkSession, own: str | None) -> None:
    """Delete this application's checkpoint files; ``own`` (a directory made for this run
    beside its output) goes too when nothing else is left in it."""
    from sparkfield.core.io import hadoop_fs

    current = spark.sparkContext._jsc.sc().getCheckpointDir()
    if current.isDefined():
        fs, jpath = hadoop_fs(spark, str(current.get()))
        fs.delete(jpath, True)
    if own:
        fs, jpath = hadoop_fs(spark, own)
        if fs.exists(jpath) and len(fs.listStatus(jpath)) == 0:
            fs.delete(jpath, False)
