"""Top-k most similar texts by cosine: exact and blockwise (queries collected and sent with the
function, corpus streamed partition by partition, per-partition top-k merged), or approximate
with Spark ML LSH. The DataFrame API only: both run over Spark Connect too."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd
from pyspark.ml.feature import BucketedRandomProjectionLSH
from pyspark.ml.functions import array_to_vector
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from sparkfield.core.workers import in_worker

NEIGHBOR_SCHEMA = "query_id string, neighbor_id string, cosine double"


def exact_neighbors(queries: DataFrame, corpus: DataFrame, k: int,
                    exclude_self: bool = True) -> DataFrame:
    """``queries`` and ``corpus``: id, embedding (L2-normalised). Queries are collected and
    travel inside the function's closure, pickled once per query plan (no broadcast variable:
    a Spark Connect client has none), so keep them to thousands; the corpus can be any
    size."""
    q = queries.where(F.col("embedding").isNotNull() & F.col("id").isNotNull()).select(
        "id", "embedding").toPandas()
    if q.empty:
        return corpus.sparkSession.createDataFrame([], NEIGHBOR_SCHEMA)
    ids = q["id"].astype(str).to_numpy()
    mat = np.stack(q["embedding"].to_numpy()).astype(np.float32)

    def top_k(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        best_s = np.full((len(ids), 0), -np.inf, dtype=np.float32)
        best_i = np.empty((len(ids), 0), dtype=object)
        for b in batches:
            b = b[b["embedding"].notna()]
            if b.empty:
                continue
            emb = np.stack(b["embedding"].to_numpy()).astype(np.float32)
            sims = mat @ emb.T
            cand_ids = np.broadcast_to(b["id"].astype(str).to_numpy(), sims.shape)
            if exclude_self:
                sims = np.where(cand_ids == ids[:, None], -np.inf, sims)
            all_s = np.concatenate([best_s, sims], axis=1)
            all_i = np.concatenate([best_i, cand_ids], axis=1)
            keep = np.argsort(-all_s, axis=1, kind="stable")[:, :k]
            best_s = np.take_along_axis(all_s, keep, axis=1)
            best_i = np.take_along_axis(all_i, keep, axis=1)
        rows = [(ids[r], best_i[r, c], float(best_s[r, c]))
                for r in range(len(ids)) for c in range(best_s.shape[1])
                if np.isfinite(best_s[r, c])]
        yield pd.DataFrame(rows, columns=["query_id", "neighbor_id", "cosine"])

    partial = corpus.where(F.col("id").isNotNull()).select(
        F.col("id").cast("string").alias("id"), "embedding").mapInPandas(
        in_worker(top_k), NEIGHBOR_SCHEMA)
    w = Window.partitionBy("query_id").orderBy(F.desc("cosine"), "neighbor_id")
    return partial.withColumn("rank", F.row_number().over(w)).where(F.col("rank") <= k)


def approx_neighbors(queries: DataFrame, corpus: DataFrame, k: int, bucket_length: float = 0.5,
                     tables: int = 4, max_distance: float = 1.2) -> DataFrame:
    """LSH on unit vectors: Euclidean distance d relates to cosine as 1 - d^2 / 2."""

    def vec(df: DataFrame) -> DataFrame:
        return df.where(F.col("embedding").isNotNull() & F.col("id").isNotNull()).select(
            F.col("id").cast("string").alias("id"), array_to_vector("embedding").alias("v"))

    lsh = BucketedRandomProjectionLSH(inputCol="v", outputCol="h", bucketLength=bucket_length,
                                      numHashTables=tables, seed=7)
    model = lsh.fit(vec(corpus))
    pairs = model.approxSimilarityJoin(vec(queries), vec(corpus), max_distance, "d").select(
        F.col("datasetA.id").alias("query_id"), F.col("datasetB.id").alias("neighbor_id"),
        (1 - F.col("d") ** 2 / 2).alias("cosine"))
    pairs = pairs.where(F.col("query_id") != F.col("neighbor_id"))
    w = Window.partitionBy("query_id").orderBy(F.desc("cosine"), "neighbor_id")
    return pairs.withColumn("rank", F.row_number().over(w)).where(F.col("rank") <= k)
