"""Term counts, vocabulary and both vector builders on tiny inline data (null rows included),
checked against plain Python counting and against Spark ML's CountVectorizerModel."""

import math
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from pyspark.ml.linalg import SparseVector
from pyspark.sql import types as T
from sklearn.feature_extraction.text import TfidfTransformer

from sparkfield.text.bag_of_words import vectorise
from sparkfield.text.bag_of_words.normalise import tokens
from sparkfield.text.bag_of_words.vectorise import (
    distinct_terms,
    term_batches,
    term_counts,
    term_vectors,
    token_vectors,
    vocabulary,
)
from tests.text.test_sentence_split import gutenberg_books

SCHEMA = T.StructType([T.StructField("doc_id", T.StringType(), False),
                       T.StructField("text", T.StringType(), True)])
TEXTS = [
    ("a", "The cat sat on the mat. The END"),
    ("b", "Dogs and cats; the dog's bowl — naïve café, 42 cafés"),
    ("c", None),
    ("d", ""),
    ("e", "zebra zebra ZEBRA the"),
    ("f", "... !!!"),
]


@pytest.fixture(scope="module")
def docs(spark):
    return spark.createDataFrame(TEXTS, SCHEMA).repartition(3)


def _oracle() -> dict[str, Counter]:
    return {d: Counter(tokens(t or "")) for d, t in TEXTS}


def _counted(texts: list[str | None]) -> tuple[list[list[str]], list[list[int]]]:
    """Each text's distinct tokens in order of first appearance and their counts."""
    counters = [Counter(tokens(t)) if t else Counter() for t in texts]
    return [list(c) for c in counters], [list(c.values()) for c in counters]


def test_distinct_terms_are_counted_in_order_of_first_appearance():
    texts = [t for _, t in TEXTS] + ["b a B\nA c", "x\n\nİ i İ", "a b a b a", "z"]
    terms, counts = distinct_terms(pa.array(texts, pa.string()))
    assert (terms.to_pylist(), counts.to_pylist()) == _counted(texts)
    terms, counts = distinct_terms(pa.array(texts, pa.string()).slice(2, 5))
    assert (terms.to_pylist(), counts.to_pylist()) == _counted(texts[2:7])
    empty = distinct_terms(pa.array([None, ""], pa.string()))
    assert [a.to_pylist() for a in empty] == [[[], []], [[], []]]


def test_term_batches_are_cut_by_text_size_not_by_rows(monkeypatch):
    texts = [t for _, t in TEXTS] * 3
    batch = pa.RecordBatch.from_arrays([pa.array([str(i) for i in range(len(texts))]),
                                        pa.array(texts, pa.string())], names=["doc_id", "text"])
    for limit, cut in ((40, True), (1 << 20, False)):
        monkeypatch.setattr(vectorise, "CHUNK_BYTES", limit)
        out = list(term_batches(iter([batch]), "text", ["doc_id"]))
        assert (len(out) > 1) == cut
        rows = [r for b in out for r in b.to_pylist()]
        assert [r["doc_id"] for r in rows] == [str(i) for i in range(len(texts))]
        assert ([r["terms"] for r in rows], [r["counts"] for r in rows]) == _counted(texts)


def test_distinct_terms_on_30_gutenberg_books(shared_data):
    """Whole books, most of them with some non-ASCII lines: the counts of the token rule."""
    books = list(gutenberg_books(shared_data, 30))
    assert sum(not b.isascii() for b in books) > 5
    terms, counts = distinct_terms(pa.array(books))
    assert (terms.to_pylist(), counts.to_pylist()) == _counted(books)


def test_term_counts_are_the_token_rule_counted_per_row(docs):
    got = {r["doc_id"]: dict(zip(r["terms"], r["counts"], strict=True))
           for r in term_counts(docs).collect()}
    assert got == {d: dict(c) for d, c in _oracle().items()}


@pytest.mark.parametrize("stop,min_df", [((), 1), (("the",), 1), ((), 2)])
def test_vocabulary_counts_documents_and_ties(docs, stop, min_df):
    vocab = vocabulary(term_counts(docs), 5, min_df, stop).toPandas()
    total, dfs = Counter(), Counter()
    for c in _oracle().values():
        total.update(c)
        dfs.update(set(c))
    want = sorted(((w, n, dfs[w]) for w, n in total.items()
                   if w not in stop and dfs[w] >= min_df), key=lambda x: (-x[1], x[0]))[:5]
    assert list(vocab.itertuples(index=False, name=None)) == [
        (*x, i + 1) for i, x in enumerate(want)]


@pytest.mark.parametrize("mode", ["binary", "count"])
def test_term_vectors_equal_counting_by_hand_and_the_count_vectorizer(spark, docs, mode):
    vocab = ["the", "zebra", "cat", "café", "dog", "missing"]
    terms = term_counts(docs)
    got = {r["doc_id"]: r["vector"] for r in term_vectors(terms, vocab, mode).collect()}
    index = {w: i for i, w in enumerate(vocab)}
    for d, c in _oracle().items():
        hits = {index[w]: (1.0 if mode == "binary" else float(n))
                for w, n in c.items() if w in index}
        assert got[d] == SparseVector(len(vocab), hits), d
    tok = spark.createDataFrame([(d, tokens(t or "")) for d, t in TEXTS],
                                "doc_id string, tokens array<string>")
    via_ml = {r["doc_id"]: r["vector"] for r in token_vectors(tok, vocab, mode).collect()}
    assert via_ml == got


def test_tfidf_weights_equal_the_smoothed_idf_formula_and_scikit_learn(spark, docs):
    """Independent of Spark ML: weight = count * ln((N + 1) / (df + 1)) over all N rows (null
    and empty texts are documents without terms), by hand and through scikit-learn."""
    vocab = ["the", "zebra", "cat", "café", "missing"]
    got = {r["doc_id"]: r["vector"].toArray().tolist()
           for r in term_vectors(term_counts(docs), vocab, "tfidf").collect()}
    counts = _oracle()
    n = len(counts)
    df = {w: sum(1 for c in counts.values() if w in c) for w in vocab}
    want = {d: [c[w] * math.log((n + 1) / (df[w] + 1)) for w in vocab]
            for d, c in counts.items()}
    assert got.keys() == want.keys()
    for d in want:
        np.testing.assert_allclose(got[d], want[d], rtol=1e-12, atol=0, err_msg=d)
    # scikit-learn's smooth idf is ln((N + 1) / (df + 1)) + 1: the same weights plus the count
    ids = sorted(counts)
    tf = np.array([[counts[d][w] for w in vocab] for d in ids], dtype=float)
    sk = TfidfTransformer(norm=None, smooth_idf=True, sublinear_tf=False).fit_transform(tf)
    np.testing.assert_allclose(np.array([got[d] for d in ids]), sk.toarray() - tf,
                               rtol=0, atol=1e-12)
    assert got["e"][1] > 0 and got["a"][0] > 0 and got["c"] == [0.0] * len(vocab)
    assert got["a"][0] != got["a"][2]  # "the" (3 documents) and "cat" (1) weigh differently


def test_bad_mode_is_rejected(docs):
    with pytest.raises(ValueError, match="vector must be one of"):
        term_vectors(term_counts(docs), ["x"], "bm25")


@pytest.mark.parametrize("binary", [False, True])
def test_sentence_vectors_built_in_the_split_equal_the_count_vectorizer(spark, binary):
    """The job's sentence vectors (built in the Python pass that splits and tokenises) are
    Spark ML's CountVectorizerModel on the same sentences' tokens, row for row, and the
    tokens and sentences are those of the pass without vectors."""
    from sparkfield.text.bag_of_words.functions import sentence_token_rows, sentence_vector_rows

    rows = [("d1", "u1", "The cat sat. The cat ran! Zebra, zebra, ZEBRA?\nNo words here..."),
            ("d2", None, "Naïve café. İstanbul cafés the the the. Dr. Smith left."),
            ("d3", "u3", None), ("d4", "u4", ""), ("d5", "u5", "... !!!\n\n  ")]
    docs = spark.createDataFrame(rows, "doc_id string, url string, text string").repartition(2)
    vocab = ["the", "zebra", "cat", "café", "i", "missing", "smith"]
    got = sentence_vector_rows(docs, vocab, binary=binary, output_col="v")
    want = token_vectors(sentence_token_rows(docs), vocab, "binary" if binary else "count",
                         out_col="v")
    key = ["doc_id", "sentence_idx"]
    got_rows = {tuple(r[k] for k in key): r.asDict() for r in got.collect()}
    want_rows = {tuple(r[k] for k in key): r.asDict() for r in want.collect()}
    assert got_rows == want_rows and len(got_rows) > 6
    assert any(r["v"].numNonzeros() > 1 for r in got_rows.values())
    assert any(r["v"].numNonzeros() == 0 for r in got_rows.values())
    assert got.columns == want.columns
    empty = vectorise.token_count_vectors(pa.array([], pa.list_(pa.string())),
                                          pa.array(vocab), binary)
    assert len(empty) == 0
    none = vectorise.token_count_vectors(pa.array([["a"]], pa.list_(pa.string())),
                                         pa.array([], pa.string()), binary)
    assert none.to_pylist() == [{"type": 0, "size": 0, "indices": [], "values": []}]
