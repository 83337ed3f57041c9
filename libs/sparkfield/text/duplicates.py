"""Near-duplicate pages (mirrors, syndicated copies) with Spark ML's ``MinHashLSH``.

Each document becomes the set of its word k-shingles (tokens by the job's rule, k consecutive
tokens joined by a space), hashed into a very large binary feature space with ``HashingTF``.
``approxSimilarityJoin`` finds candidate pairs through the MinHash buckets and then computes
their exact Jaccard distance on those sets, so ``similarity`` is the Jaccard similarity of the
two shingle sets (up to a hash collision in 2^30 features). Of each similar pair the page whose
URL sorts later is the duplicate; a page similar to several keeps its most similar partner (ties:
the earlier URL). The earliest page of each group of similar pages is never a duplicate.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.ml.feature import HashingTF, MinHashLSH
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.core.workers import in_worker
from sparkfield.text.normalise import tokens
from sparkfield.text.params import DuplicateSettings

NUM_FEATURES = 1 << 30  # HashingTF's feature space: collisions of shingles are negligible
SEED = 42  # of MinHashLSH: the same pairs every run


def shingles(text: str | None, k: int) -> list[str]:
    """Distinct word k-shingles of ``text`` (a text shorter than k words is one shingle)."""
    toks = tokens(text) if text else []
    if not toks:
        return []
    if len(toks) <= k:
        return [" ".join(toks)]
    return list(dict.fromkeys(" ".join(toks[i:i + k]) for i in range(len(toks) - k + 1)))


def with_shingles(docs: DataFrame, k: int, text_col: str = "text", keep: tuple = ("url",)
                  ) -> DataFrame:
    """``keep`` columns and ``shingles`` (array of distinct k-shingles), in the Python worker."""
    schema = T.StructType([*(docs.schema[c] for c in keep),
                           T.StructField("shingles", T.ArrayType(T.StringType(), False),
                                         False)])
    keep = tuple(keep)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            sh = [shingles(t, k) for t in b.column(text_col).to_pylist()]
            yield pa.RecordBatch.from_arrays(
                [*(b.column(c) for c in keep), pa.array(sh, pa.list_(pa.string()))],
                names=[*keep, "shingles"])

    return docs.select(*keep, text_col).mapInArrow(in_worker(run), schema)


def similar_pairs(docs: DataFrame, s: DuplicateSettings, text_col: str = "text") -> DataFrame:
    """(a, b, similarity) for every pair of documents (a < b by URL) at or above the
    threshold."""
    sh = with_shingles(docs, s.shingle_words, text_col).where(F.size("shingles") > 0)
    feats = HashingTF(inputCol="shingles", outputCol="features", binary=True,
                      numFeatures=NUM_FEATURES).transform(sh).select("url", "features")
    model = MinHashLSH(inputCol="features", outputCol="hashes", numHashTables=s.hash_tables,
                       seed=SEED).fit(feats)
    max_dist = 1.0 - s.threshold + 1e-9  # the join keeps distance < max_dist
    pairs = model.approxSimilarityJoin(feats, feats, max_dist, distCol="dist")
    return pairs.select(F.col("datasetA.url").alias("a"), F.col("datasetB.url").alias("b"),
                        (F.lit(1.0) - F.col("dist")).alias("similarity")) \
        .where((F.col("a") < F.col("b")) & (F.col("similarity") >= s.threshold))


def find_duplicates(docs: DataFrame, s: DuplicateSettings, text_col: str = "text"
                    ) -> DataFrame:
    """page, duplicate_of, similarity: one row per page that duplicates an earlier one."""
    pairs = similar_pairs(docs, s, text_col)
    best = Window.partitionBy("b").orderBy(F.desc("similarity"), "a")
    return pairs.withColumn("_r", F.row_number().over(best)).where("_r = 1").select(
        F.col("b").alias("page"), F.col("a").alias("duplicate_of"), "similarity")
