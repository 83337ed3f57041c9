"""The ``TokenClassifier`` stage and ``classify_tokens`` against the Hugging Face
token-classification pipeline run directly on the same model folder (a tiny random-weight
BertForTokenClassification built here), for every aggregation strategy, on real Wikipedia
sentences; batching and bucketing leave entities unchanged; null, blank and long texts are
kept and counted; save and load."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.ml import Pipeline
from pyspark.sql import DataFrame

from sparkfield.core.errors import ColumnError
from sparkfield.nlp import TokenClassifier, classify_tokens, count_outcomes
from sparkfield.nlp.aggregation import STRATEGIES, entities, tokens_of
from sparkfield.nlp.heads import TokenTagger
from sparkfield.nlp.model import ModelError
from sparkfield.text.bag_of_words.normalise import sentences
from sparkfield.text.bag_of_words.parse import page_text
from tests.nlp.tiny_models import NER_LABELS, build

N = 16


@pytest.fixture(scope="module")
def real_sentences(wiki_pages) -> list[str]:
    html = (wiki_pages / "Machine_translation.html").read_bytes()
    return sentences(page_text(html.decode("utf-8"))[1])[:N]


@pytest.fixture(scope="module")
def tagger(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("ner"), "ForTokenClassification", NER_LABELS, seed=2)


@pytest.fixture(scope="module")
def texts(spark, real_sentences) -> DataFrame:
    rows = [(f"s{i:02d}", t) for i, t in enumerate(real_sentences)]
    return spark.createDataFrame(rows, "id string, text string").repartition(2)


def _oracle(folder: Path, texts: list[str], strategy: str) -> list[list[dict]]:
    from transformers import pipeline

    pipe = pipeline("token-classification", model=str(folder), device="cpu",
                    aggregation_strategy=strategy)
    return [pipe(t) for t in texts]


def _same(text: str, mine: list[dict], theirs: list[dict], strategy: str) -> None:
    key = "entity" if strategy == "none" else "entity_group"
    assert [(e["label"], e["start"], e["end"]) for e in mine] == [
        (t[key], t["start"], t["end"]) for t in theirs]
    for e, t in zip(mine, theirs, strict=True):
        assert e["word"] == text[e["start"]:e["end"]]
        assert e["score"] == pytest.approx(float(t["score"]), abs=1e-4)
        assert e["index"] == (t["index"] if strategy == "none" else None)


def test_every_strategy_equals_the_hf_pipeline(texts, real_sentences, tagger):
    stages = [TokenClassifier(modelPath=str(tagger), outputCol=s, aggregationStrategy=s,
                              device="cpu", batchSize=5) for s in STRATEGIES]
    rows = {r["id"]: r for r in Pipeline(stages=stages).fit(texts).transform(texts).collect()}
    for strategy in STRATEGIES:
        oracle = _oracle(tagger, real_sentences, strategy)
        assert sum(len(o) for o in oracle) > N  # entities to compare
        for i, (text, theirs) in enumerate(zip(real_sentences, oracle, strict=True)):
            out = rows[f"s{i:02d}"][strategy]
            assert out["truncated"] is False and out["reason"] is None
            _same(text, [e.asDict() for e in out["entities"]], theirs, strategy)
    # words of several tokens: first, average and max can differ from simple
    words = {s: [len(rows[k][s]["entities"]) for k in sorted(rows)] for s in STRATEGIES}
    assert words["first"] != words["none"]


@pytest.mark.parametrize("bucket", [False, True])
@pytest.mark.parametrize("batch_size", [1, 7, 64])
def test_batch_size_and_bucketing_leave_entities_unchanged(tagger, real_sentences,
                                                           batch_size, bucket):
    model = TokenTagger(tagger, "cpu", None)
    prefix = model.tokenizer.backend_tokenizer.model.continuing_subword_prefix

    def found(tagged, k: int, text: str) -> list:
        toks = tokens_of(text, tagged.tokens.encodings[k], tagged.scores[k],
                         model.tokenizer.unk_token_id, prefix)
        return entities(text, toks, tagged.labels, "average")

    got = model.tag(real_sentences, batch_size, bucket)
    for k, text in enumerate(real_sentences):
        alone = found(model.tag([text]), 0, text)
        mine = found(got, k, text)
        assert [(e.label, e.start, e.end) for e in mine] == [
            (e.label, e.start, e.end) for e in alone]
        assert [e.score for e in mine] == pytest.approx([e.score for e in alone], abs=1e-5)


def test_null_blank_and_long_texts_are_kept_and_counted(spark, tagger):
    long = "Machine translation in Paris and Berlin " * 10
    df = spark.createDataFrame([("a", "Ada Lovelace lived in London."), ("b", None),
                                ("c", ""), ("d", long)], "id string, text string")
    cut = classify_tokens(df, str(tagger), device="cpu", maxTokens=16,
                          aggregationStrategy="none")
    out = {r["id"]: r["entities"] for r in cut.collect()}
    assert out["b"].asDict() == {"entities": None, "truncated": None, "reason": "null text"}
    assert out["c"]["reason"] == "empty text"
    assert out["d"]["truncated"] is True
    assert max(e["index"] for e in out["d"]["entities"]) <= 14  # 16 tokens, [CLS] and [SEP]
    assert count_outcomes(cut, "entities") == {"classified": 2, "truncated": 1,
                                               "null text": 1, "empty text": 1}
    rejected = classify_tokens(df, str(tagger), device="cpu", maxTokens=16,
                               onLongText="reject")
    d = rejected.where("id = 'd'").first()["entities"].asDict()
    assert d == {"entities": None, "truncated": True, "reason": "too long"}


def test_params_checks_and_save_load(texts, tagger, tmp_path):
    stage = TokenClassifier()
    assert (stage.getAggregationStrategy(), stage.getIgnoreLabels(), stage.getOutputCol(),
            stage.getOnLongText()) == ("simple", ["O"], "entities", "truncate")
    with pytest.raises(TypeError, match="aggregationStrategy.*none, simple, first"):
        stage.setAggregationStrategy("longest")
    stage = TokenClassifier(modelPath=str(tagger), aggregationStrategy="max",
                            ignoreLabels=[], device="cpu")
    stage.save(str(tmp_path / "stage"))
    loaded = TokenClassifier.load(str(tmp_path / "stage"))
    assert loaded.extractParamMap() == stage.extractParamMap()
    first = loaded.transform(texts).where("id = 's00'").first()["entities"]["entities"]
    assert {e["label"] for e in first} & {"O"}  # nothing ignored
    seq = build(tmp_path / "seq", "ForSequenceClassification", ("a", "b"))
    with pytest.raises(ModelError, match="not a \\*ForTokenClassification model"):
        TokenClassifier(modelPath=str(seq)).transform(texts)
    with pytest.raises(ColumnError, match="no column 'body'"):
        TokenClassifier(inputCol="body", modelPath=str(tagger)).transform(texts)
