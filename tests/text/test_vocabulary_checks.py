"""The vocabulary of token arrays, by ``token_vocabulary`` and by ``PinnedCountVectorizer``:
a null inside an array is no word, and both check their arguments alike (the function with the
library's errors, the stage as Spark ML stages refuse a param)."""

from __future__ import annotations

from collections import Counter

import pytest

from sparkfield.core.errors import ColumnError, ConfigError, InputError
from sparkfield.text import PinnedCountVectorizer, token_vocabulary

DOCS = [
    (1, ["cats", None, "chase", "cats"]),
    (2, [None, None]),
    (3, ["dogs", "chase", None]),
    (4, []),
]
SCHEMA = "doc long, tokens array<string>"


def _expected(min_docs: int = 1) -> list[tuple[str, int, int, int]]:
    """word, count, documents, rank by plain Python, nulls left out."""
    count = Counter(w for _, ws in DOCS for w in ws if w is not None)
    docs = Counter(w for _, ws in DOCS for w in {w for w in ws if w is not None})
    ranked = sorted((w for w in count if docs[w] >= min_docs), key=lambda w: (-count[w], w))
    return [(w, count[w], docs[w], i + 1) for i, w in enumerate(ranked)]


@pytest.fixture(scope="module")
def docs(spark):
    return spark.createDataFrame(DOCS, SCHEMA)


def test_nulls_in_token_arrays_are_not_words(docs):
    got = [tuple(r) for r in token_vocabulary(docs, "tokens", 10, 1).orderBy("rank").collect()]
    assert got == _expected() == [("cats", 2, 1, 1), ("chase", 2, 2, 2), ("dogs", 1, 1, 3)]
    # a fraction of the rows, as Spark's CountVectorizer reads minDF: 0.5 of 4 rows = 2
    assert [r["word"] for r in token_vocabulary(docs, "tokens", 10, 0.5).collect()] == [
        w for w, *_ in _expected(2)]


def test_the_stage_fits_the_functions_vocabulary(docs):
    model = PinnedCountVectorizer(inputCol="tokens", outputCol="v", minDF=1.0).fit(docs)
    assert model.vocabulary == [w for w, *_ in _expected()]
    vectors = {r["doc"]: r["v"].toArray().tolist() for r in model.transform(docs).collect()}
    assert vectors == {1: [1.0, 1.0, 0.0], 2: [0.0] * 3, 3: [0.0, 1.0, 1.0], 4: [0.0] * 3}


BAD = [("vocab_size", "vocabSize", -1), ("vocab_size", "vocabSize", 0),
       ("vocab_size", "vocabSize", "many"), ("min_df", "minDF", -1),
       ("min_df", "minDF", "often")]


@pytest.mark.parametrize(("arg", "param", "value"), BAD)
def test_the_function_refuses_what_the_stage_refuses(docs, arg, param, value):
    with pytest.raises(TypeError, match=f'param "{param}"') as refused:
        PinnedCountVectorizer(**{param: value})
    why = str(refused.value).split(". ", 1)[1]
    with pytest.raises(ConfigError, match=f"^{arg}: ") as error:
        token_vocabulary(docs, "tokens", **{arg: value})
    assert str(error.value) == f"{arg}: {why}"


def test_a_column_that_holds_no_tokens_is_named(spark, docs):
    text = spark.createDataFrame([("a b",)], "text string")
    with pytest.raises(InputError, match=r"column 'text' must be token arrays "
                                         r"\(array<string>\), not string") as error:
        token_vocabulary(text, "text")
    assert isinstance(error.value, ColumnError)
    with pytest.raises(ColumnError, match="column 'text' must be token arrays"):
        PinnedCountVectorizer(inputCol="text").fit(text)
    with pytest.raises(InputError, match="no column 'words'") as error:
        token_vocabulary(docs, "words")
    assert isinstance(error.value, ColumnError)
