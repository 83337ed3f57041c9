"""Vocabulary (pinned: count desc, then word) and Spark ML vectors."""

from __future__ import annotations

from pyspark.ml.feature import IDF, CountVectorizerModel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

VECTOR_MODES = ("binary", "count", "tfidf")


def vocabulary(sentences: DataFrame, size: int, min_df: int,
               stopwords: tuple[str, ...] = ()) -> DataFrame:
    """The ``size`` most frequent tokens: word, count (total occurrences), documents, rank.

    Computed explicitly rather than by ``CountVectorizer.fit`` so that ties are broken the same
    way every run (by word) and the counts come out with the vocabulary."""
    words = sentences.select("doc_id", F.explode("tokens").alias("word"))
    if stopwords:
        words = words.where(~F.col("word").isin(list(stopwords)))
    stats = words.groupBy("word").agg(F.count(F.lit(1)).alias("count"),
                                      F.countDistinct("doc_id").alias("documents"))
    if min_df > 1:
        stats = stats.where(F.col("documents") >= min_df)
    top = stats.orderBy(F.desc("count"), "word").limit(size).collect()
    rows = [(r["word"], int(r["count"]), int(r["documents"]), i + 1) for i, r in enumerate(top)]
    return sentences.sparkSession.createDataFrame(
        rows, "word string, count long, documents long, rank int")


def vectorise(df: DataFrame, vocab: list[str], mode: str, tokens_col: str = "tokens",
              out_col: str = "vector") -> DataFrame:
    if mode not in VECTOR_MODES:
        raise ValueError(f"vector must be one of {VECTOR_MODES}, got {mode!r}")
    cv = CountVectorizerModel.from_vocabulary(vocab, inputCol=tokens_col, outputCol=out_col,
                                              binary=(mode == "binary"))
    counted = cv.transform(df)
    if mode != "tfidf":
        return counted
    tmp = "__tf"
    counted = counted.withColumnRenamed(out_col, tmp)
    model = IDF(inputCol=tmp, outputCol=out_col).fit(counted)
    return model.transform(counted).drop(tmp)
