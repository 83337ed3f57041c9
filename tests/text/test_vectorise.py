"""Term counts, vocabulary and both vector builders on tiny inline data (null rows included),
checked against plain Python counting and against Spark ML's CountVectorizerModel."""

from collections import Counter

import pytest
from pyspark.ml.feature import IDF
from pyspark.ml.linalg import SparseVector
from pyspark.sql import types as T

from sparkfield.text.normalise import tokens
from sparkfield.text.vectorise import term_counts, term_vectors, token_vectors, vocabulary

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


def test_tfidf_weights_are_spark_mls_idf(spark, docs):
    vocab = ["the", "zebra", "cat"]
    got = {r["doc_id"]: r["vector"].toArray().tolist()
           for r in term_vectors(term_counts(docs), vocab, "tfidf").collect()}
    counts = term_vectors(term_counts(docs), vocab, "count")
    model = IDF(inputCol="vector", outputCol="w").fit(counts)
    want = {r["doc_id"]: r["w"].toArray().tolist() for r in model.transform(counts).collect()}
    assert got == want
    assert got["e"][1] > 0 and got["a"][0] > 0 and got["c"] == [0.0, 0.0, 0.0]


def test_bad_mode_is_rejected(docs):
    with pytest.raises(ValueError, match="vector must be one of"):
        term_vectors(term_counts(docs), ["x"], "bm25")
