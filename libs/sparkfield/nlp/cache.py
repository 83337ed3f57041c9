"""A content-addressed embedding store: embeddings keyed by (model id, engine, sha256 of the
text), so a re-run embeds only texts it has not seen before.

Layout: ``<cache_dir>/<key>/part-<time>-<token>/`` Parquet folders (text_hash, embedding,
truncated, model_id, engine), one per run that added something. A run writes its folder under a
``_staging-`` name and renames it into place, so readers never see a half-written part; a
write that fails removes its staging folder, and one left by a run that died (a day old) is
removed by the next run that adds to the store."""

from __future__ import annotations

import hashlib
import time
import uuid
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.core.io import hadoop_fs

STORE_SCHEMA = T.StructType([
    T.StructField("text_hash", T.StringType(), False),
    T.StructField("embedding", T.ArrayType(T.FloatType(), False), True),
    T.StructField("truncated", T.BooleanType(), True),
    T.StructField("model_id", T.StringType(), False),
    T.StructField("engine", T.StringType(), False),
])


STAGING = "_staging-"
DEAD_AFTER_S = 24 * 3600


def text_hash(col: str = "text"):
    return F.sha2(F.col(col), 256)


@dataclass
class EmbeddingStore:
    spark: SparkSession
    root: str
    model_id: str  # model fingerprint and max_tokens: what else changes the numbers
    engine: str

    @property
    def folder(self) -> str:
        key = hashlib.sha256(f"{self.model_id}\n{self.engine}".encode()).hexdigest()[:16]
        return f"{self.root.rstrip('/')}/{key}"

    def parts(self) -> list[str]:
        fs, jpath = hadoop_fs(self.spark, self.folder)
        if not fs.exists(jpath):
            return []
        return sorted(str(s.getPath()) for s in fs.listStatus(jpath)
                      if s.isDirectory() and s.getPath().getName().startswith("part-"))

    def read(self) -> DataFrame:
        """text_hash, embedding, truncated: one row per stored text."""
        parts = self.parts()
        if not parts:
            return self.spark.createDataFrame([], STORE_SCHEMA).select(
                "text_hash", "embedding", "truncated")
        stored = self.spark.read.schema(STORE_SCHEMA).parquet(*parts).where(
            (F.col("model_id") == self.model_id) & (F.col("engine") == self.engine))
        return stored.dropDuplicates(["text_hash"]).select("text_hash", "embedding",
                                                            "truncated")

    def add(self, fresh: DataFrame) -> str:
        """Append ``fresh`` (text_hash, embedding, truncated) as one new part."""
        self._remove_dead_staging()
        name = f"part-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
        staging = f"{self.folder}/{STAGING}{name}"
        fs, src = hadoop_fs(self.spark, staging)
        try:
            fresh.select("text_hash", "embedding", "truncated",
                         F.lit(self.model_id).alias("model_id"),
                         F.lit(self.engine).alias("engine")).write.parquet(staging)
        except BaseException:  # a failed task, an interrupt: no folder left behind
            fs.delete(src, True)
            raise
        _, dst = hadoop_fs(self.spark, f"{self.folder}/{name}")
        if not fs.rename(src, dst):
            fs.delete(src, True)
            raise OSError(f"cannot move {staging} into the embedding store")
        return f"{self.folder}/{name}"

    def _remove_dead_staging(self) -> None:
        """Staging folders with nothing in them changed for :data:`DEAD_AFTER_S`: left by a
        run that died before it could remove its own (a run still writing changes files)."""
        fs, jpath = hadoop_fs(self.spark, self.folder)
        if not fs.exists(jpath):
            return
        cutoff = (time.time() - DEAD_AFTER_S) * 1000
        for s in fs.listStatus(jpath):
            if not s.getPath().getName().startswith(STAGING) or s.getModificationTime() > cutoff:
                continue
            files = fs.listFiles(s.getPath(), True)
            newest = s.getModificationTime()
            while files.hasNext():
                newest = max(newest, files.next().getModificationTime())
            if newest < cutoff:
                fs.delete(s.getPath(), True)


def lookup(good: DataFrame, stored: DataFrame) -> DataFrame:
    """``good`` (id, text) with text_hash, and embedding/truncated where ``stored`` (the rows
    of :meth:`EmbeddingStore.read`) has them (null otherwise)."""
    keyed = good.withColumn("text_hash", text_hash())
    return keyed.join(stored, "text_hash", "left")
