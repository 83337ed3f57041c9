"""Term counts, the vocabulary (pinned: count desc, then word) and Spark ML vectors.

Documents are counted where they are tokenised: the Python worker turns each text into its
distinct terms and their counts (``term_counts``), so only one row per (document, distinct
term) reaches the JVM instead of one per token. The vocabulary is aggregated from those rows
and the sparse vectors are built from them (``term_vectors``). Sentences keep their token
arrays (they are part of the output); the job builds their vectors in the Python pass that
splits them (``token_count_vectors``), and Spark ML's ``CountVectorizerModel``
(``token_vectors``) vectorises token arrays in Spark. All ways give the same vector for the
same tokens.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.ml.feature import IDF, CountVectorizerModel
from pyspark.ml.linalg import VectorUDT
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.core.columns import column
from sparkfield.core.workers import in_worker
from sparkfield.text.bag_of_words.normalise import CHUNK_BYTES, document_tokens, text_chunks

VECTOR_MODES = ("binary", "count", "tfidf")
TERMS = "terms"
COUNTS = "counts"


def _check_mode(mode: str) -> None:
    if mode not in VECTOR_MODES:
        raise ValueError(f"vector must be one of {VECTOR_MODES}, got {mode!r}")


def term_counts(df: DataFrame, text_col: str = "text", keep: Sequence[str] = ("doc_id",)
                ) -> DataFrame:
    """One row per input row: ``keep`` columns, ``terms`` (distinct tokens, in order of first
    appearance) and ``counts`` (occurrences of each). A null text has no terms."""
    fields = [df.schema[c] for c in keep]
    schema = T.StructType([*fields,
                           T.StructField(TERMS, T.ArrayType(T.StringType(), False), False),
                           T.StructField(COUNTS, T.ArrayType(T.IntegerType(), False), False)])
    keep = list(keep)
    return df.select(*map(column, [*keep, text_col])).mapInArrow(
        in_worker(functools.partial(term_batches, text_col=text_col, keep=keep)), schema)


def term_batches(batches: Iterator[pa.RecordBatch], text_col: str, keep: Sequence[str]
                 ) -> Iterator[pa.RecordBatch]:
    """:func:`term_counts`' worker: ``keep`` columns, terms and counts of each row, one
    output batch per :data:`~sparkfield.text.bag_of_words.normalise.CHUNK_BYTES` of text."""
    for b in batches:
        texts = b.column(text_col)
        for start, stop in text_chunks(texts, CHUNK_BYTES):
            terms, counts = distinct_terms(texts.slice(start, stop - start))
            yield pa.RecordBatch.from_arrays(
                [*(b.column(k).slice(start, stop - start) for k in keep), terms, counts],
                names=[*keep, TERMS, COUNTS])


def distinct_terms(texts: pa.Array) -> tuple[pa.ListArray, pa.ListArray]:
    """Per text of ``texts``: its distinct tokens in order of first appearance and the
    occurrences of each (a null text: none), counted over the whole array at once."""
    toks = document_tokens(texts)
    lengths = pc.list_value_length(toks).to_numpy(zero_copy_only=False)
    encoded = pc.dictionary_encode(pc.list_flatten(toks))
    width = max(len(encoded.dictionary), 1)
    owner = np.repeat(np.arange(len(texts), dtype=np.int64), lengths)
    keys = owner * width + encoded.indices.to_numpy(zero_copy_only=False)
    # hashed in order of first appearance, and a text's tokens come before the next text's
    found = pc.value_counts(pa.array(keys))
    owner_of, code = np.divmod(found.field("values").to_numpy(), width)
    offsets = np.zeros(len(texts) + 1, np.int32)
    np.cumsum(np.bincount(owner_of, minlength=len(texts)), out=offsets[1:])
    words = encoded.dictionary.take(pa.array(code))
    return (pa.ListArray.from_arrays(pa.array(offsets), words),
            pa.ListArray.from_arrays(pa.array(offsets), found.field("counts").cast(pa.int32())))


def vocabulary(terms: DataFrame, size: int, min_df: int = 1,
               stopwords: Sequence[str] = ()) -> DataFrame:
    """The ``size`` most frequent terms of ``term_counts`` rows (one row per document): word,
    count (total occurrences), documents (rows containing it), rank.

    Computed explicitly rather than by ``CountVectorizer.fit`` so that ties are broken the same
    way every run (by word) and the counts come out with the vocabulary."""
    pairs = terms.select(F.explode(F.arrays_zip(TERMS, COUNTS)).alias("t")).select(
        F.col(f"t.{TERMS}").alias("word"), F.col(f"t.{COUNTS}").alias("n"))
    if stopwords:
        pairs = pairs.where(~F.col("word").isin(list(stopwords)))
    # terms are distinct within a row, so counting rows counts documents
    stats = pairs.groupBy("word").agg(F.sum("n").alias("count"),
                                      F.count(F.lit(1)).alias("documents"))
    return top_vocabulary(stats, size, min_df)


def token_stats(df: DataFrame, tokens_col: str = "tokens") -> DataFrame:
    """word, count (occurrences), documents (rows containing it) of the token arrays of
    ``tokens_col``, one row a document; a null inside an array is no word."""
    # the row id is taken before the explode: in the same projection Spark would number the
    # exploded rows
    rows = df.select(F.monotonically_increasing_id().alias("_row"),
                     column(tokens_col).alias("_tokens")) \
        .select("_row", F.explode("_tokens").alias("word")).where(F.col("word").isNotNull())
    per_row = rows.groupBy("_row", "word").agg(F.count(F.lit(1)).alias("n"))
    return per_row.groupBy("word").agg(F.sum("n").alias("count"),
                                       F.count(F.lit(1)).alias("documents"))


def top_vocabulary(stats: DataFrame, size: int, min_df: float = 1,
                   stopwords: Sequence[str] = ()) -> DataFrame:
    """The ``size`` most frequent words of ``stats`` (word, count, documents) in at least
    ``min_df`` documents, ties by word: word, count, documents, rank. The one vocabulary rule
    of the job and of :class:`~sparkfield.text.bag_of_words.stages.PinnedCountVectorizer`."""
    if stopwords:
        stats = stats.where(~F.col("word").isin(list(stopwords)))
    if min_df > 1:
        stats = stats.where(F.col("documents") >= min_df)
    top = stats.orderBy(F.desc("count"), "word").limit(size).collect()
    rows = [(r["word"], int(r["count"]), int(r["documents"]), i + 1) for i, r in enumerate(top)]
    return stats.sparkSession.createDataFrame(
        rows, "word string, count long, documents long, rank int")


def _sparse_rows(terms: pa.ListArray, counts: pa.ListArray, value_set: pa.Array, size: int,
                 binary: bool) -> pa.StructArray:
    """One sparse vector per row, in VectorUDT's storage layout (type 0 = sparse), computed
    with Arrow kernels and numpy over the whole batch: no Python loop per term."""
    n_rows = len(terms)
    lengths = np.diff(terms.offsets.to_numpy())  # offsets of this slice, not of the buffer
    if not np.array_equal(lengths, np.diff(counts.offsets.to_numpy())):
        raise ValueError("terms and counts differ in length in some row")
    idx = pc.index_in(terms.flatten(), value_set=value_set)
    hit = idx.is_valid().to_numpy(zero_copy_only=False)
    rows = np.repeat(np.arange(n_rows, dtype=np.int32), lengths)[hit]
    ids = idx.drop_null().to_numpy().astype(np.int32)
    vals = (np.ones(len(ids)) if binary
            else counts.flatten().to_numpy().astype(np.float64)[hit])
    order = np.lexsort((ids, rows))
    return _sparse_struct(n_rows, rows, ids[order], vals[order], size)


def token_count_vectors(tokens: pa.ListArray, value_set: pa.Array, binary: bool
                        ) -> pa.StructArray:
    """The vector of each token list of ``tokens`` over the vocabulary ``value_set`` (index =
    position), in VectorUDT's storage layout: what Spark ML's ``CountVectorizerModel`` gives
    (occurrences, or 1.0 when ``binary``; indices ascending), for a whole batch at once."""
    n_rows, size = len(tokens), len(value_set)
    lengths = pc.list_value_length(tokens).to_numpy(zero_copy_only=False)
    idx = pc.index_in(pc.list_flatten(tokens), value_set=value_set)
    hit = idx.is_valid().to_numpy(zero_copy_only=False)
    rows = np.repeat(np.arange(n_rows, dtype=np.int64), lengths)[hit]
    keys, counts = np.unique(rows * max(size, 1) + idx.drop_null().to_numpy(),
                             return_counts=True)  # sorted: by row, then index
    rows, ids = np.divmod(keys, max(size, 1))
    vals = np.ones(len(keys)) if binary else counts.astype(np.float64)
    return _sparse_struct(n_rows, rows, ids.astype(np.int32), vals, size)


def _sparse_struct(n_rows: int, rows: np.ndarray, ids: np.ndarray, vals: np.ndarray,
                   size: int) -> pa.StructArray:
    """Sparse vectors of ``size`` from their entries (row, index, value), sorted by row and
    then index, as VectorUDT stores them (type 0 = sparse)."""
    offsets = np.zeros(n_rows + 1, np.int32)
    np.cumsum(np.bincount(rows, minlength=n_rows), out=offsets[1:])
    return pa.StructArray.from_arrays(
        [pa.array(np.zeros(n_rows, np.int8)), pa.array(np.full(n_rows, size, np.int32)),
         pa.ListArray.from_arrays(pa.array(offsets), pa.array(ids, pa.int32())),
         pa.ListArray.from_arrays(pa.array(offsets), pa.array(vals, pa.float64()))],
        names=["type", "size", "indices", "values"])


def term_vectors(terms: DataFrame, vocab: Sequence[str], mode: str, out_col: str = "vector"
                 ) -> DataFrame:
    """Sparse vectors (indices = vocabulary ranks - 1) from ``term_counts`` rows; the term
    columns are dropped. ``binary`` 1.0 per present term, ``count`` occurrences, ``tfidf``
    counts weighted by Spark ML's ``IDF`` fitted on these rows."""
    _check_mode(mode)
    size = len(vocab)
    binary = mode == "binary"
    keep = [c for c in terms.columns if c not in (TERMS, COUNTS)]
    tmp = "__tf" if mode == "tfidf" else out_col
    schema = T.StructType([*(terms.schema[c] for c in keep),
                           T.StructField(tmp, VectorUDT(), False)])
    words = list(vocab)

    def build(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        value_set = pa.array(words, pa.string())
        for b in batches:
            vecs = _sparse_rows(b.column(TERMS), b.column(COUNTS), value_set, size, binary)
            yield pa.RecordBatch.from_arrays([*(b.column(k) for k in keep), vecs],
                                             names=[*keep, tmp])

    counted = terms.mapInArrow(in_worker(build), schema)
    return counted if mode != "tfidf" else idf_weighted(counted, tmp, out_col)


def token_vectors(df: DataFrame, vocab: Sequence[str], mode: str, tokens_col: str = "tokens",
                  out_col: str = "vector") -> DataFrame:
    """Sparse vectors of token arrays with Spark ML's ``CountVectorizerModel``."""
    _check_mode(mode)
    tmp = "__tf" if mode == "tfidf" else out_col
    cv = CountVectorizerModel.from_vocabulary(list(vocab), inputCol=tokens_col, outputCol=tmp,
                                              binary=(mode == "binary"))
    counted = cv.transform(df)
    return counted if mode != "tfidf" else idf_weighted(counted, tmp, out_col)


def idf_weighted(counted: DataFrame, tf_col: str, out_col: str) -> DataFrame:
    """The count vectors of ``tf_col`` weighted by Spark ML's ``IDF`` fitted on these rows, in
    ``out_col`` (``tf_col`` dropped). Runs a Spark job (the fit)."""
    model = IDF(inputCol=tf_col, outputCol=out_col).fit(counted)
    return model.transform(counted).drop(tf_col)
