"""The text area's Spark ML stages and DataFrame functions on inline pages: what each gives
(null and empty pages included), selector mode, bytes in other charsets, a Pipeline with
Spark's own stages, and save/load of the stages and of whole Pipelines.

Only the ``spark`` fixture and the DataFrame API: these tests pass on a classic session and
over Spark Connect (``SPARKFIELD_TEST_REMOTE``) alike."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest
from pyspark.ml import Pipeline, PipelineModel
from pyspark.ml.feature import IDF, CountVectorizer
from pyspark.ml.linalg import SparseVector

from sparkfield.core.errors import ColumnError, ConfigError, InputError
from sparkfield.core.stopwords import english_stopwords
from sparkfield.text import (
    HtmlToText,
    PinnedCountVectorizer,
    SentenceSplitter,
    WordTokenizer,
    html_to_text,
    split_sentences,
    token_vocabulary,
    tokenize,
)
from sparkfield.text.bag_of_words import functions
from sparkfield.text.bag_of_words.normalise import sentences, tokens
from sparkfield.text.job import parse_documents, sentence_rows
from sparkfield.text.params import BAG_OF_WORDS

PAGES = [
    ("a", "<html><head><title>Cats</title></head><body><nav>Home</nav><article>"
          "<p>Cats chase mice. Dogs chase cats.</p><div class='note'>A note on cats.</div>"
          "</article></body></html>"),
    ("b", "<html><body><p>Birds sing songs. Dogs bark.</p></body></html>"),
    ("c", None),
    ("d", ""),
    ("e", "<html><body><script>go()</script></body></html>"),
]
PAGE_SCHEMA = "doc_id string, html string"


@pytest.fixture(scope="module")
def pages(spark):
    return spark.createDataFrame(PAGES, PAGE_SCHEMA)


def _by_id(df, *cols):
    return {r["doc_id"]: tuple(r[c] for c in cols) for r in df.collect()}


def test_the_defaults_are_the_jobs():
    job = {k: BAG_OF_WORDS.by_key[k].default for k in ("extract", "selector", "stopwords",
                                                 "vocab_size", "min_df", "vector")}
    h = HtmlToText()
    assert (h.getExtract(), h.getSelector()) == (job["extract"], job["selector"])
    assert (h.getInputCol(), h.getOutputCol(), h.getTitleCol()) == ("html", "text", "title")
    assert h.getErrorCol() is None and h.getCharsetCol() is None
    assert WordTokenizer().getStopwords() == job["stopwords"]
    cv = PinnedCountVectorizer()
    assert (cv.getVocabSize(), cv.getMinDF()) == (job["vocab_size"], job["min_df"])
    assert cv.getBinary() == (job["vector"] == "binary")
    assert SentenceSplitter().getExplodeSentences() is False


def test_bad_param_values_are_refused_with_the_jobs_checks():
    with pytest.raises(TypeError, match="must be one of main, selector"):
        HtmlToText(extract="everything")
    with pytest.raises(TypeError, match="must be one of none, english"):
        WordTokenizer(stopwords="french")
    with pytest.raises(TypeError, match=">= 1"):
        PinnedCountVectorizer(vocabSize=0)
    with pytest.raises(TypeError, match=">= 0"):
        PinnedCountVectorizer(minDF=-1)


STAGES = [HtmlToText, SentenceSplitter, WordTokenizer, PinnedCountVectorizer]


@pytest.mark.parametrize("cls", STAGES, ids=lambda c: c.__name__)
def test_every_param_has_a_setter_returning_the_stage_and_a_getter(cls):
    stage = cls()
    for param in stage.params:
        name = param.name[0].upper() + param.name[1:]
        value = stage.getOrDefault(param)
        assert getattr(stage, f"get{name}")() == value, param.name
        assert getattr(stage, f"set{name}")(value) is stage, param.name
        assert stage.isSet(param) and getattr(stage, f"get{name}")() == value, param.name
        with pytest.raises(TypeError, match=f'param "{param.name}"'):  # checked as before
            getattr(stage, f"set{name}")(object())


def test_html_to_text_keeps_every_row_and_says_why_a_page_has_no_text(pages):
    out = HtmlToText(extract="selector", errorCol="error").transform(pages)
    assert out.columns == ["doc_id", "html", "text", "title", "error"]
    got = _by_id(out, "text", "title", "error")
    assert got["a"] == ("Cats chase mice. Dogs chase cats.", "Cats", None)
    assert got["b"] == ("Birds sing songs. Dogs bark.", None, None)
    assert got["c"] == (None, None, "no HTML")  # a null page
    assert got["d"] == (None, None, "no text in 'p' elements")  # an empty one
    assert got["e"] == (None, None, "no text in 'p' elements")
    main = _by_id(HtmlToText(errorCol="why", titleCol=None).transform(pages), "text", "why")
    assert "Cats chase mice. Dogs chase cats." in main["a"][0]  # trafilatura's main text
    assert main["c"] == (None, "no HTML") and main["e"] == (None, "no main text found")


def test_selector_mode_takes_the_text_of_the_selected_elements(pages):
    out = HtmlToText(extract="selector", selector="div.note, nav").transform(pages)
    got = _by_id(out, "text")
    assert got["a"] == ("Home\nA note on cats.",)
    assert got["b"] == (None,)
    with pytest.raises(ConfigError, match="needs a CSS selector"):
        HtmlToText(extract="selector", selector=" ").transform(pages)


def test_bytes_are_decoded_by_the_charset_rules(spark):
    body = "<html><body><p>Café crème à Noël. Straße über Ärger.</p></body></html>"
    cyrillic = "<html><body><p>Привет, мир. Это тест.</p></body></html>"
    rows = [
        ("header", body.encode("iso-8859-1"), "text/html; charset=ISO-8859-1"),
        ("label", cyrillic.encode("windows-1251"), "windows-1251"),
        ("meta", b"<meta charset='windows-1252'>" + body.encode("cp1252"), None),
        ("guess", body.encode("cp1252"), "text/html"),  # declared nowhere: windows-1252
        ("bom", b"\xef\xbb\xbf" + body.encode("utf-8"), "text/html; charset=latin1"),
        ("null", None, None),
    ]
    df = spark.createDataFrame(rows, "doc_id string, content binary, content_type string")
    out = HtmlToText(inputCol="content", charsetCol="content_type", extract="selector",
                     errorCol="error").transform(df)
    got = _by_id(out, "text", "error")
    for name in ("header", "meta", "guess", "bom"):
        assert got[name] == ("Café crème à Noël. Straße über Ärger.", None), name
    assert got["label"] == ("Привет, мир. Это тест.", None)
    assert got["null"] == (None, "no HTML")
    # without the header the Cyrillic page is not read as windows-1251
    plain = _by_id(html_to_text(df, "content", extract="selector"), "text")
    assert plain["label"] != ("Привет, мир. Это тест.",)


def test_the_html_column_must_be_text_or_bytes_and_outputs_new(pages):
    with pytest.raises(InputError, match="no column 'page'") as missing:
        HtmlToText(inputCol="page").transform(pages)
    assert isinstance(missing.value, ColumnError)
    with pytest.raises(InputError, match="string or binary") as mistyped:
        HtmlToText(inputCol="html").transform(pages.selectExpr("1 AS html"))
    assert isinstance(mistyped.value, ColumnError)
    with pytest.raises(ColumnError, match="column 'ctype' must be a string column, not int"):
        HtmlToText(charsetCol="ctype").transform(pages.selectExpr("*", "1 AS ctype"))
    with pytest.raises(ColumnError, match="column 'doc_id' must be a string column"):
        WordTokenizer(inputCol="doc_id").transform(pages.selectExpr("1 AS doc_id"))
    with pytest.raises(ColumnError, match="no column 'text'"):
        SentenceSplitter().transform(pages)
    with pytest.raises(ConfigError, match="'doc_id' already exists"):
        HtmlToText(outputCol="doc_id").transform(pages)


def test_sentences_as_an_array_or_one_row_each(spark):
    texts = [("a", "Dr. Smith arrived. He sat down.\nA new line"), ("b", None), ("c", "")]
    df = spark.createDataFrame(texts, "doc_id string, text string")
    arrays = _by_id(SentenceSplitter().transform(df), "sentences")
    assert arrays == {"a": (sentences(texts[0][1]),), "b": ([],), "c": ([],)}
    assert arrays["a"][0] == ["Dr. Smith arrived.", "He sat down.", "A new line"]
    rows = SentenceSplitter(explodeSentences=True, outputCol="sentence").transform(df)
    assert rows.columns == ["doc_id", "text", "sentence_idx", "sentence"]
    got = sorted((r["doc_id"], r["sentence_idx"], r["sentence"]) for r in rows.collect())
    assert got == [("a", i, s) for i, s in enumerate(arrays["a"][0])]


def test_tokens_follow_the_pinned_rule_with_or_without_stopwords(spark):
    texts = [("a", "The naïve CAFÉ's 42 cafés, and_so on"), ("b", None)]
    df = spark.createDataFrame(texts, "doc_id string, text string")
    got = _by_id(WordTokenizer().transform(df), "tokens")
    assert got == {"a": (tokens(texts[0][1]),), "b": ([],)}
    assert got["a"][0] == ["the", "naïve", "café", "s", "42", "cafés", "and_so", "on"]
    no_stop = _by_id(tokenize(df, stopwords="english"), "tokens")
    assert no_stop["a"][0] == ["naïve", "café", "42", "cafés", "and_so"]


def test_tokens_of_long_multiline_texts_cut_into_chunks(spark, monkeypatch):
    """Whole texts over several lines, non-ASCII ones among them, tokenised a few at a time:
    the pinned rule on each text, NLTK's stopwords left out in order."""
    lines = ["The naïve CAFÉ's 42 cafés,", "and_so ON. İstanbul ΟΔΟΣ", "", "it is what it is"]
    texts = [(str(i), "\n".join(lines[i % 4:] + lines[:i % 4]) * (i % 3 + 1)) for i in range(40)]
    texts += [("null", None), ("empty", ""), ("spaces", " \n \n")]
    df = spark.createDataFrame(texts, "doc_id string, text string")
    monkeypatch.setattr(functions, "CHUNK_BYTES", 200)
    stop = set(english_stopwords())
    got = _by_id(tokenize(df, stopwords="english"), "tokens")
    assert got == {d: ([w for w in tokens(t or "") if w not in stop],) for d, t in texts}
    assert got["0"][0][:5] == ["naïve", "café", "42", "cafés", "and_so"]
    assert _by_id(tokenize(df), "tokens") == {d: (tokens(t or ""),) for d, t in texts}


def test_without_words_keeps_the_order_of_the_rest():
    words = pa.array([["a", "the", "b", "the"], [], ["the"], ["c"]], pa.list_(pa.string()))
    left = functions.without_words(words, pa.array(["the", "x"]))
    assert left.to_pylist() == [["a", "b"], [], [], ["c"]]
    assert functions.without_words(words.slice(2), pa.array(["c"])).to_pylist() == [["the"], []]


def test_the_jobs_parse_and_sentences_are_the_stages_output(pages):
    docs = parse_documents(pages.selectExpr("doc_id", "doc_id AS url", "html"), "selector",
                           "p")
    staged = HtmlToText(extract="selector", errorCol="error").transform(pages)
    assert _by_id(docs, "title", "text", "error") == _by_id(staged, "title", "text", "error")
    good = docs.where("error IS NULL")
    job = {(r["doc_id"], r["sentence_idx"]): (r["sentence"], r["tokens"])
           for r in sentence_rows(good).collect()}
    split = SentenceSplitter(explodeSentences=True, outputCol="sentence").transform(good)
    ours = {(r["doc_id"], r["sentence_idx"]): (r["sentence"], r["tokens"])
            for r in WordTokenizer(inputCol="sentence").transform(split).collect()}
    assert job == ours and len(job) == 4


CORPUS = [  # counts: chase 3, cats 3, dogs 3; mice 2, bark 2; then ones; ties everywhere
    ("d1", "<p>Cats chase mice. Dogs chase cats.</p>"),
    ("d2", "<p>Dogs bark. Dogs chase mice and cats.</p>"),
    ("d3", "<p>Birds bark at the moon.</p>"),
    ("d4", None),
]


@pytest.fixture(scope="module")
def corpus(spark):
    return spark.createDataFrame(CORPUS, PAGE_SCHEMA).repartition(3)


def _pipeline(**cv) -> Pipeline:
    return Pipeline(stages=[
        HtmlToText(extract="selector"), WordTokenizer(stopwords="english"),
        PinnedCountVectorizer(outputCol="tf", **cv), IDF(inputCol="tf", outputCol="tfidf")])


def _counts() -> tuple[Counter, Counter]:
    total, docs = Counter(), Counter()
    for _, html in CORPUS:
        words = [w for w in tokens((html or "").replace("<p>", "").replace("</p>", ""))
                 if w not in ("the", "and", "at")]
        total.update(words)
        docs.update(set(words))
    return total, docs


def test_a_pipeline_with_sparks_stages_fits_the_pinned_vocabulary(corpus):
    model = _pipeline(vocabSize=5, binary=False).fit(corpus)
    cv = model.stages[2]
    total, _ = _counts()
    want = sorted(total, key=lambda w: (-total[w], w))[:5]
    assert cv.vocabulary == want == ["cats", "chase", "dogs", "bark", "mice"]
    out = {r["doc_id"]: r for r in model.transform(corpus).collect()}
    assert out["d1"]["tf"] == SparseVector(5, {0: 2.0, 1: 2.0, 2: 1.0, 4: 1.0})
    assert out["d4"]["tf"] == SparseVector(5, {}) and out["d4"]["text"] is None
    assert out["d3"]["tfidf"].size == 5


def test_min_df_counts_documents_and_the_vocabulary_function_gives_counts(corpus):
    tokenized = WordTokenizer(stopwords="english").transform(
        HtmlToText(extract="selector").transform(corpus))
    vocab = token_vocabulary(tokenized, "tokens", vocab_size=10, min_df=2).toPandas()
    total, docs = _counts()
    want = sorted((w for w in total if docs[w] >= 2), key=lambda w: (-total[w], w))
    assert vocab["word"].tolist() == want
    assert vocab["count"].tolist() == [total[w] for w in want]
    assert vocab["documents"].tolist() == [docs[w] for w in want]
    assert vocab["rank"].tolist() == list(range(1, len(want) + 1))
    fitted = PinnedCountVectorizer(minDF=0.5, vocabSize=10).fit(tokenized)  # 2 of 4 rows
    assert fitted.vocabulary == want
    with pytest.raises(InputError, match="vocabulary is empty"):
        PinnedCountVectorizer(minDF=5).fit(tokenized)


def test_sparks_count_vectorizer_agrees_but_for_the_order_of_ties(corpus):
    tokenized = WordTokenizer(stopwords="english").transform(
        HtmlToText(extract="selector").transform(corpus))
    total, _ = _counts()
    spark_cv = CountVectorizer(inputCol="tokens", outputCol="v", vocabSize=len(total),
                               minDF=1.0).fit(tokenized)
    pinned = PinnedCountVectorizer(vocabSize=len(total)).fit(tokenized)
    assert sorted(spark_cv.vocabulary) == sorted(pinned.vocabulary)
    assert [total[w] for w in spark_cv.vocabulary] == [total[w] for w in pinned.vocabulary]


def test_stages_save_and_load_with_their_params(tmp_path):
    stages = [HtmlToText(inputCol="content", titleCol=None, errorCol="why",
                         charsetCol="ctype", extract="selector", selector="div p"),
              SentenceSplitter(explodeSentences=True, outputCol="sentence", indexCol="i"),
              WordTokenizer(inputCol="sentence", stopwords="english"),
              PinnedCountVectorizer(vocabSize=7, minDF=2, binary=False)]
    for n, stage in enumerate(stages):
        path = str(tmp_path / f"stage{n}")
        stage.save(path)
        loaded = type(stage).load(path)
        assert loaded.uid == stage.uid
        assert {p.name: v for p, v in loaded.extractParamMap().items()} == {
            p.name: v for p, v in stage.extractParamMap().items()}
        stage.copy().write().overwrite().save(path)  # overwriting needs no JVM call either
        with pytest.raises(Exception, match="already exists"):
            stage.save(path)
    assert HtmlToText.load(str(tmp_path / "stage0")).getTitleCol() is None
    with pytest.raises(InputError, match="not a WordTokenizer"):
        WordTokenizer.load(str(tmp_path / "stage0"))


def test_pipelines_and_fitted_pipelines_save_and_load(corpus, tmp_path):
    pipeline = _pipeline(vocabSize=6)
    pipeline.write().overwrite().save(str(tmp_path / "pipeline"))
    loaded = Pipeline.load(str(tmp_path / "pipeline"))
    assert [type(s).__name__ for s in loaded.getStages()] == [
        "HtmlToText", "WordTokenizer", "PinnedCountVectorizer", "IDF"]
    model = loaded.fit(corpus)
    model.write().overwrite().save(str(tmp_path / "model"))
    again = PipelineModel.load(str(tmp_path / "model"))
    assert again.stages[2].vocabulary == model.stages[2].vocabulary
    want = {r["doc_id"]: r["tfidf"] for r in model.transform(corpus).collect()}
    got = {r["doc_id"]: r["tfidf"] for r in again.transform(corpus).collect()}
    assert got == want and len(got) == len(CORPUS)


def test_sentence_rows_of_a_pipeline_use_the_document_vocabulary(corpus):
    docs = HtmlToText(extract="selector").transform(corpus)
    cv = Pipeline(stages=[WordTokenizer(), PinnedCountVectorizer(vocabSize=4)]).fit(docs)
    split = split_sentences(docs, output_col="sentence", explode=True)
    vectors = cv.stages[1].transform(tokenize(split, "sentence"))
    vocab = cv.stages[1].vocabulary
    for r in vectors.collect():
        want = sorted({vocab.index(t) for t in tokens(r["sentence"]) if t in vocab})
        assert r["vector"] == SparseVector(4, dict.fromkeys(want, 1.0))
