"""The bag_of_words steps as DataFrame -> DataFrame functions: HTML to text, text to Punkt
sentences, text to tokens by the pinned rule, token arrays to the pinned vocabulary.

They use the DataFrame API only (pandas UDFs and ``mapInArrow`` run the Python side in Spark's
Python workers), so they work on classic Spark and over Spark Connect alike. The Spark ML
stages of :mod:`sparkfield.text.bag_of_words.stages` call them, and so does the bag_of_words
job. Every input row is kept (except by ``split_sentences(explode=True)``,
``sentence_token_rows`` and ``sentence_vector_rows``, one row per sentence); a null input gives
no text, no sentences, no tokens, never an error. An input column that is missing or of the
wrong type raises :class:`~sparkfield.core.errors.ColumnError` naming it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.ml.linalg import VectorUDT
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.core.columns import column, quoted, require_type
from sparkfield.core.errors import ConfigError
from sparkfield.core.stopwords import english_stopwords
from sparkfield.core.worker_parquet import ArrowRows
from sparkfield.core.workers import in_worker, keep_archive_directories
from sparkfield.text.bag_of_words.normalise import (
    CHUNK_BYTES,
    document_tokens,
    sentences,
    text_chunks,
    token_arrays,
)
from sparkfield.text.bag_of_words.parse import SENT_SCHEMA, check_extract, parse_page
from sparkfield.text.bag_of_words.stage_params import job_default, vocabulary_args
from sparkfield.text.bag_of_words.vectorise import token_count_vectors, token_stats, top_vocabulary
from sparkfield.text.pages.charset import decode_page, header_charset
from sparkfield.text.params import BAG_OF_WORDS

PARSED = T.StructType([T.StructField(name, T.StringType(), True)
                       for name in ("title", "text", "error")])
WORDS = T.ArrayType(T.StringType(), False)
WORDS_ARROW = pa.list_(pa.string())
STOPWORDS = BAG_OF_WORDS.by_key["stopwords"].choices


def _is_text(kind: T.DataType) -> bool:
    return isinstance(kind, T.StringType)


def _is_tokens(kind: T.DataType) -> bool:
    return isinstance(kind, T.ArrayType) and isinstance(kind.elementType, T.StringType)


def _is_html(kind: T.DataType) -> bool:
    return isinstance(kind, T.StringType | T.BinaryType)


def _require_new(df: DataFrame, names: Sequence[str]) -> None:
    taken = [n for n in names if n in df.columns]
    if taken:
        raise ConfigError(f"output column {taken[0]!r} already exists")
    if len(set(names)) < len(names):
        raise ConfigError(f"output columns must differ, got {list(names)}")


def _kept(df: DataFrame, columns: Sequence[str] | None = None) -> list:
    """``df``'s own references to ``columns`` (all of its columns by default), by their exact
    names."""
    return [df[quoted(c)] for c in (df.columns if columns is None else columns)]


# ---- HTML -> text -----------------------------------------------------------------------

def html_to_text(df: DataFrame, input_col: str = "html", output_col: str = "text",
                 title_col: str | None = "title", error_col: str | None = None,
                 extract: str = job_default("extract"), selector: str = job_default("selector"),
                 charset_col: str | None = None) -> DataFrame:
    """``df`` with each page's text in ``output_col``, its ``<title>`` in ``title_col`` and,
    given ``error_col``, why a page has no text (None: the column is left out).

    ``extract``: ``main`` (trafilatura's main content) or ``selector`` (the text of the
    ``selector`` elements). The HTML column holds text, or bytes decoded by the charset rules
    of :mod:`sparkfield.text.pages.charset` (byte-order mark, then ``charset_col``'s Content-Type
    header or charset label, then the page's ``<meta>``, then detection). A null page, a page
    without text and one the parser cannot read get a null text (and their reason)."""
    check_extract(extract)
    if extract == "selector" and not selector.strip():
        raise ConfigError("extract: selector needs a CSS selector")
    kind = require_type(df, input_col, _is_html, "HTML as a string or binary column")
    outputs = [(c, f) for c, f in ((output_col, "text"), (title_col, "title"),
                                   (error_col, "error")) if c]
    _require_new(df, [c for c, _ in outputs])
    if charset_col:
        require_type(df, charset_col, _is_text, "a string column")
    charset = column(charset_col) if charset_col else F.lit(None).cast("string")
    udf = _parse_udf(extract, selector, isinstance(kind, T.BinaryType))
    tmp = _free_name(df, "__parsed")
    parsed = df.withColumn(tmp, udf(column(input_col), charset))
    return parsed.select(*_kept(parsed, df.columns),
                         *[parsed[tmp][f].alias(c) for c, f in outputs])


def _free_name(df: DataFrame, name: str) -> str:
    while name in df.columns:
        name = f"_{name}"
    return name


def _parse_udf(extract: str, selector: str, binary: bool):
    """The pandas UDF (html, charset) -> (title, text, error) of :func:`parse_page`."""

    def parse(batches: Iterator[tuple[pd.Series, pd.Series]]) -> Iterator[pd.DataFrame]:
        keep_archive_directories()
        for html, charset in batches:
            pages = ([_decoded(raw, label) for raw, label in zip(html, charset, strict=True)]
                     if binary else html)
            rows = [parse_page(page, extract, selector) for page in pages]
            yield pd.DataFrame(rows, columns=PARSED.names)

    return F.pandas_udf(parse, PARSED)


def _decoded(raw: bytes | None, label: str | None) -> str | None:
    return None if raw is None else decode_page(bytes(raw), header_charset(label)).text


# ---- sentences and tokens ---------------------------------------------------------------

def split_sentences(df: DataFrame, input_col: str = "text", output_col: str = "sentences",
                    explode: bool = False, index_col: str = "sentence_idx") -> DataFrame:
    """``df`` with the Punkt sentences of ``input_col`` (each line split on its own) as an
    array in ``output_col`` (a null text has none). ``explode``: one row per sentence
    instead, the sentence in ``output_col`` and its position (0, 1, ...) in ``index_col``;
    rows without a sentence are dropped."""
    require_type(df, input_col, _is_text, "a string column")
    split = _sentences_udf()(column(input_col))
    if not explode:
        _require_new(df, [output_col])
        return df.withColumn(output_col, split)
    _require_new(df, [index_col, output_col])
    return df.select(*_kept(df), F.posexplode(split).alias(index_col, output_col))


def _sentences_udf():
    def split(texts: Iterator[pd.Series]) -> Iterator[pd.Series]:
        keep_archive_directories()
        for batch in texts:
            yield pd.Series([sentences(t) if t is not None else [] for t in batch],
                            dtype=object)

    return F.pandas_udf(split, WORDS)


def sentence_token_rows(df: DataFrame) -> DataFrame:
    """Documents (doc_id, url, text) -> one row per sentence with all its tokens
    (``SENT_SCHEMA``: doc_id, url, sentence_idx, sentence, tokens): what ``split_sentences(
    explode=True)`` then ``tokenize(stopwords="none")`` give, in one pass of Arrow batches
    (no pandas, no second round trip to Python; tokens by :func:`token_arrays`). A document
    without a sentence has no row."""
    return _document_columns(df).mapInArrow(in_worker(_sentence_batches), SENT_SCHEMA)


def _document_columns(df: DataFrame) -> DataFrame:
    """doc_id, url and text of ``df``, each checked to be a string column."""
    for name in ("doc_id", "url", "text"):
        require_type(df, name, _is_text, "a string column")
    return df.select("doc_id", "url", "text")


def sentence_vector_rows(df: DataFrame, vocabulary: Sequence[str], binary: bool = False,
                         output_col: str = "vector") -> DataFrame:
    """:func:`sentence_token_rows` with each sentence's vector over ``vocabulary`` in
    ``output_col``: what Spark ML's ``CountVectorizerModel.from_vocabulary(vocabulary,
    binary=binary)`` gives on the tokens, built in the same pass (no conversion of every token
    array to a JVM collection, no second scan)."""
    return sentence_vector_source(df, vocabulary, binary, output_col).frame()


def sentence_vector_source(df: DataFrame, vocabulary: Sequence[str], binary: bool = False,
                           output_col: str = "vector") -> ArrowRows:
    """The rows of :func:`sentence_vector_rows` as the Python function that makes them from
    the documents' Arrow batches: a job's writer can have the Python workers write them as
    Parquet (:meth:`~sparkfield.core.io.AtomicOutput.write_arrow_rows`)."""
    docs = _document_columns(df)
    if output_col in SENT_SCHEMA.names:
        raise ConfigError(f"output column {output_col!r} is one of the sentence columns")
    schema = T.StructType([*SENT_SCHEMA.fields, T.StructField(output_col, VectorUDT(), False)])
    run = functools.partial(_sentence_vector_batches, words=list(vocabulary), binary=binary,
                            output_col=output_col)
    return ArrowRows(docs, run, schema)


def _sentence_vector_batches(batches: Iterator[pa.RecordBatch], words: list[str], binary: bool,
                             output_col: str) -> Iterator[pa.RecordBatch]:
    value_set = pa.array(words, pa.string())
    for b in _sentence_batches(batches):
        vectors = token_count_vectors(b.column(4), value_set, binary)
        yield pa.RecordBatch.from_arrays([*b.columns, vectors], names=[*b.schema.names, output_col])


SENTENCE_BATCH_CHARS = 16 << 20  # text per output batch: a book-sized row is not a batch


def _sentence_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        texts = batch.column(2)
        owners: list[int] = []
        positions: list[int] = []
        found: list[str] = []
        chars = 0
        for start in range(0, len(batch), 64):
            for row, text in enumerate(texts.slice(start, 64).to_pylist(), start):
                if text is None:
                    continue
                split = sentences(text)
                owners.extend([row] * len(split))
                positions.extend(range(len(split)))
                found.extend(split)
                chars += len(text)
                if chars >= SENTENCE_BATCH_CHARS:
                    yield _sentence_batch(batch, owners, positions, found)
                    owners, positions, found, chars = [], [], [], 0
        if found:
            yield _sentence_batch(batch, owners, positions, found)


def _sentence_batch(batch: pa.RecordBatch, owners: list[int], positions: list[int],
                    found: list[str]) -> pa.RecordBatch:
    rows = pa.array(owners, pa.int64())
    text = pa.array(found, pa.string())
    return pa.RecordBatch.from_arrays(
        [batch.column(0).take(rows), batch.column(1).take(rows),
         pa.array(positions, pa.int32()), text, token_arrays(text)],
        names=SENT_SCHEMA.names)


def stopword_set(stopwords: str) -> frozenset[str]:
    """The words ``stopwords`` (a value of the job's ``stopwords`` key) names."""
    if stopwords not in STOPWORDS:
        raise ConfigError(f"stopwords must be one of {', '.join(STOPWORDS)}, got {stopwords!r}")
    return frozenset(english_stopwords()) if stopwords == "english" else frozenset()


def tokenize(df: DataFrame, input_col: str = "text", output_col: str = "tokens",
             stopwords: str = job_default("stopwords")) -> DataFrame:
    """``df`` with the tokens of ``input_col`` in ``output_col``: the text lower-cased, then
    its runs of Python-regex ``\\w`` characters, in order; ``stopwords="english"`` leaves
    NLTK's English stopwords out. A null text has no tokens (an empty array, which Spark's
    ``CountVectorizer`` takes)."""
    require_type(df, input_col, _is_text, "a string column")
    _require_new(df, [output_col])
    return df.withColumn(output_col, _tokens_udf(stopword_set(stopwords))(column(input_col)))


def _tokens_udf(stop: frozenset[str]):
    stop_words = pa.array(sorted(stop), pa.string())

    def split(texts: Iterator[pa.Array]) -> Iterator[pa.Array]:
        keep_archive_directories()
        for batch in texts:
            chunks = [document_tokens(batch.slice(start, stop - start))
                      for start, stop in text_chunks(batch, CHUNK_BYTES)]
            words = pa.concat_arrays(chunks) if chunks else pa.array([], WORDS_ARROW)
            yield without_words(words, stop_words) if len(stop_words) else words

    return F.arrow_udf(split, WORDS)


def without_words(words: pa.ListArray, leave_out: pa.Array) -> pa.ListArray:
    """Each list of ``words`` without the words of ``leave_out``, in order."""
    flat = pc.list_flatten(words)
    keep = pc.invert(pc.is_in(flat, value_set=leave_out)).to_numpy(zero_copy_only=False)
    owners = pc.list_parent_indices(words).to_numpy()[keep]
    offsets = np.zeros(len(words) + 1, np.int32)
    np.cumsum(np.bincount(owners, minlength=len(words)), out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), flat.filter(pa.array(keep)))


# ---- vocabulary -------------------------------------------------------------------------

def token_vocabulary(df: DataFrame, input_col: str = "tokens",
                     vocab_size: int = job_default("vocab_size"),
                     min_df: float = job_default("min_df")) -> DataFrame:
    """The vocabulary of the token arrays of ``input_col`` (one row a document) by the job's
    rule: word, count (occurrences), documents (rows containing it), rank; the ``vocab_size``
    most frequent words of at least ``min_df`` documents (below 1: that fraction of the rows,
    as Spark's ``CountVectorizer`` reads it), ties broken by word. A null inside an array is no
    word. The arguments are checked as ``PinnedCountVectorizer`` checks its params (a
    ConfigError naming the argument). Runs Spark jobs (the count for a fraction, the top
    words)."""
    vocab_size, min_df = vocabulary_args(vocab_size, min_df)
    require_type(df, input_col, _is_tokens, "token arrays (array<string>)")
    if min_df < 1:
        min_df = min_df * df.count()
    return top_vocabulary(token_stats(df, input_col), vocab_size, min_df)
