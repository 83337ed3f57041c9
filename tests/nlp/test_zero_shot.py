"""The ``ZeroShotClassifier`` stage and ``classify_zero_shot`` against the Hugging Face
zero-shot-classification pipeline run directly on the same model folder (tiny random-weight
NLI models built here, their entailment label found by name in either order and case), on real
Wikipedia sentences: single and multi-label, a custom template, one label; batching and
bucketing leave results unchanged; null, blank and long texts are kept and counted; params
checked; save, load and Pipeline use; ``transform`` runs no Spark job."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pyspark.ml import Pipeline, PipelineModel
from pyspark.sql import DataFrame

from sparkfield.core.errors import ColumnError, ConfigError
from sparkfield.nlp import count_outcomes
from sparkfield.nlp.heads import SequenceClassifier
from sparkfield.nlp.model import ModelError
from sparkfield.nlp.zero_shot import TEMPLATE, ZeroShotClassifier, classify_zero_shot, zero_shot
from sparkfield.text.bag_of_words.normalise import sentences
from sparkfield.text.bag_of_words.parse import page_text
from tests.nlp.tiny_models import build

CANDIDATES = ["sports", "politics", "science", "arts", "computing"]
N = 12


@pytest.fixture(scope="module")
def real_sentences(wiki_pages) -> list[str]:
    html = (wiki_pages / "Machine_translation.html").read_bytes()
    return sentences(page_text(html.decode("utf-8"))[1])[:N]


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    """NLI models: entailment first (contradiction last), and upper case entailment last."""
    root = tmp_path_factory.mktemp("nli")
    return {
        "lower": build(root / "lower", "ForSequenceClassification",
                       ("entailment", "neutral", "contradiction")),
        "upper": build(root / "upper", "ForSequenceClassification",
                       ("CONTRADICTION", "NEUTRAL", "ENTAILMENT"), seed=1),
    }


@pytest.fixture(scope="module")
def texts(spark, real_sentences) -> DataFrame:
    rows = [(f"s{i:02d}", t) for i, t in enumerate(real_sentences)]
    return spark.createDataFrame(rows, "id string, text string").repartition(2)


def _pipe(folder: Path, max_length: int | None = None):
    from transformers import pipeline

    pipe = pipeline("zero-shot-classification", model=str(folder), device="cpu")
    if max_length is not None:  # the pipeline cuts premises to the tokenizer's length
        pipe.tokenizer.model_max_length = max_length
    return pipe


def _by_id(df: DataFrame, col: str = "zero_shot") -> dict[str, dict]:
    return {r["id"]: r[col].asDict() for r in df.select("id", col).collect()}


def _same(mine: dict, theirs: dict) -> None:
    assert mine["labels"] == theirs["labels"]
    np.testing.assert_allclose(mine["scores"], theirs["scores"], atol=1e-4, rtol=0)
    assert mine["label"] == theirs["labels"][0]
    assert mine["score"] == pytest.approx(theirs["scores"][0], abs=1e-4)


CASES = {
    "single label": ("lower", CANDIDATES, {}),
    "single label, entailment last": ("upper", CANDIDATES, {}),
    "multi-label": ("lower", CANDIDATES, {"multiLabel": True}),
    "multi-label, custom template": ("upper", CANDIDATES,
                                     {"multiLabel": True, "hypothesisTemplate": "About {}."}),
    "one label": ("upper", ["politics"], {}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_equals_the_hf_pipeline(texts, real_sentences, models, case):
    name, labels, params = CASES[case]
    out = _by_id(classify_zero_shot(texts, str(models[name]), labels, device="cpu",
                                    batchSize=7, **params))
    oracle = _pipe(models[name])(real_sentences, candidate_labels=labels,
                                 multi_label=params.get("multiLabel", False),
                                 hypothesis_template=params.get("hypothesisTemplate", TEMPLATE))
    for i, theirs in enumerate(oracle):
        mine = out[f"s{i:02d}"]
        _same(mine, theirs)
        assert mine["truncated"] is False and mine["reason"] is None
    tops = {o["label"] for o in out.values()}
    sums = [sum(o["scores"]) for o in out.values()]
    if len(labels) > 1:
        assert len(tops) > 1  # a test that can tell labels apart
    if params.get("multiLabel") or len(labels) == 1:
        assert any(abs(s - 1.0) > 0.1 for s in sums)  # each label on its own
    else:
        assert sums == pytest.approx([1.0] * len(sums), abs=1e-6)


def test_the_template_reaches_the_model(models, real_sentences):
    head = SequenceClassifier(models["lower"], "cpu", None, function="none")
    plain, _ = zero_shot(head, real_sentences[:4], [TEMPLATE.format(c) for c in CANDIDATES],
                         False)
    other, _ = zero_shot(head, real_sentences[:4], [f"About {c}." for c in CANDIDATES], False)
    assert np.abs(plain - other).max() > 1e-3


HYPOTHESES = [TEMPLATE.format(c) for c in CANDIDATES]


@pytest.fixture(scope="module")
def head(models) -> SequenceClassifier:
    return SequenceClassifier(models["upper"], "cpu", None, function="none")


@pytest.fixture(scope="module")
def alone(head, real_sentences) -> np.ndarray:
    """Scores of each text run on its own, one pair per model batch."""
    return np.concatenate([zero_shot(head, [t], HYPOTHESES, False, 1)[0]
                           for t in real_sentences])


@pytest.mark.parametrize("bucket", [False, True])
@pytest.mark.parametrize("batch_size", [1, 7, 64])
def test_batch_size_and_bucketing_leave_results_unchanged(head, alone, real_sentences,
                                                          batch_size, bucket):
    got, cut = zero_shot(head, real_sentences, HYPOTHESES, False, batch_size, bucket)
    assert not cut.any()
    assert (got.argmax(axis=1) == alone.argmax(axis=1)).all()
    np.testing.assert_allclose(got, alone, atol=1e-5, rtol=0)


def test_null_blank_and_long_texts_are_kept_and_counted(spark, models):
    long = "natural language processing " * 20
    df = spark.createDataFrame(
        [("a", "A short sentence."), ("b", None), ("c", "   "), ("d", long)],
        "id string, text string")
    stage = ZeroShotClassifier(modelPath=str(models["lower"]), candidateLabels=CANDIDATES,
                               device="cpu", maxTokens=16)
    cut = stage.transform(df)
    out = _by_id(cut)
    assert out["b"] == {"labels": None, "scores": None, "label": None, "score": None,
                        "truncated": None, "reason": "null text"}
    assert out["c"]["labels"] is None and out["c"]["reason"] == "empty text"
    assert out["d"]["truncated"] is True and out["a"]["truncated"] is False
    # only the premise is cut: as the pipeline cuts it to the same length
    _same(out["d"], _pipe(models["lower"], 16)(long, candidate_labels=CANDIDATES))
    _same(out["a"], _pipe(models["lower"])("A short sentence.", candidate_labels=CANDIDATES))
    assert count_outcomes(cut, "zero_shot") == {
        "classified": 2, "truncated": 1, "null text": 1, "empty text": 1}

    rejected = stage.copy({stage.onLongText: "reject"}).transform(df)
    assert _by_id(rejected)["d"] == {"labels": None, "scores": None, "label": None,
                                     "score": None, "truncated": True, "reason": "too long"}
    assert count_outcomes(rejected, "zero_shot") == {
        "classified": 1, "truncated": 0, "null text": 1, "empty text": 1, "too long": 1}


def test_params_defaults_and_checks():
    stage = ZeroShotClassifier()
    assert (stage.getInputCol(), stage.getOutputCol(), stage.getModelPath(),
            stage.getHypothesisTemplate(), stage.getMultiLabel(), stage.getMaxTokens(),
            stage.getBatchSize(), stage.getBucket(), stage.getOnLongText(),
            stage.getPrecision(), stage.getDevice()) == (
        "text", "zero_shot", None, "This example is {}.", False, None, 64, True, "truncate",
        "fp32", "auto")
    assert not stage.isDefined(stage.candidateLabels)
    with pytest.raises(TypeError, match="candidateLabels.*at least one label"):
        ZeroShotClassifier(candidateLabels=[])
    with pytest.raises(TypeError, match="candidateLabels.*repeat a label, got 'arts'"):
        stage.setCandidateLabels(["arts", "science", "arts"])
    with pytest.raises(TypeError, match="candidateLabels.*blank label"):
        stage.setCandidateLabels(["arts", " "])
    with pytest.raises(TypeError, match="hypothesisTemplate.*must hold \\{\\}"):
        ZeroShotClassifier(hypothesisTemplate="This example is a label.")
    with pytest.raises(TypeError, match="hypothesisTemplate.*must hold \\{\\}"):
        stage.setHypothesisTemplate("About {label}.")
    with pytest.raises(TypeError, match="onLongText.*truncate, reject"):
        stage.setOnLongText("drop")
    assert stage.setCandidateLabels("arts, science ,").getCandidateLabels() == [
        "arts", "science"]  # comma-separated, as the pipeline reads a string


def test_bad_settings_say_what_is_wrong(spark, texts, models, tmp_path):
    folder = str(models["lower"])
    with pytest.raises(ConfigError, match="needs candidateLabels"):
        ZeroShotClassifier(modelPath=folder).transform(texts)
    with pytest.raises(ConfigError, match="needs modelPath"):
        ZeroShotClassifier(candidateLabels=CANDIDATES).transform(texts)
    with pytest.raises(ColumnError, match="no column 'body'"):
        ZeroShotClassifier(inputCol="body", modelPath=folder,
                           candidateLabels=CANDIDATES).transform(texts)
    with pytest.raises(ConfigError, match="'id' already exists"):
        ZeroShotClassifier(outputCol="id", modelPath=folder,
                           candidateLabels=CANDIDATES).transform(texts)
    sentiment = build(tmp_path / "sentiment", "ForSequenceClassification",
                      ("negative", "neutral", "positive"))
    with pytest.raises(ModelError, match="not an NLI model: no label starting with 'entail'"):
        classify_zero_shot(texts, str(sentiment), CANDIDATES)
    tagger = build(tmp_path / "tagger", "ForTokenClassification", ("O", "entailment"))
    with pytest.raises(ModelError, match="not a \\*ForSequenceClassification model"):
        classify_zero_shot(texts, str(tagger), CANDIDATES)
    head = SequenceClassifier(models["lower"], "cpu", 8, function="none")
    with pytest.raises(ConfigError, match="takes 9 tokens with the special tokens, maxTokens "
                                          "is 8: no room for the text"):
        zero_shot(head, ["A text."], ["This example is about sports."], False)
    # a hypothesis that fills the window exactly leaves no token for the text either
    with pytest.raises(ConfigError, match="takes 8 tokens .* maxTokens is 8"):
        zero_shot(head, ["A longer text than one token."], ["This example is sports."], False)


def test_transform_runs_no_spark_job(spark, texts, models):
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        pytest.skip("no job tracker over Spark Connect")
    context, group = spark.sparkContext, "zero-shot transform"
    context.setJobGroup(group, group)
    try:
        out = ZeroShotClassifier(modelPath=str(models["lower"]),
                                 candidateLabels=CANDIDATES).transform(texts)
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    assert list(context.statusTracker().getJobIdsForGroup(group)) == []
    assert "zero_shot" in out.columns


def test_save_load_and_a_pipeline(texts, models, tmp_path):
    stage = ZeroShotClassifier(modelPath=str(models["upper"]), outputCol="z", device="cpu",
                               candidateLabels=CANDIDATES[:3], multiLabel=True,
                               hypothesisTemplate="Topic: {}.", batchSize=5, maxTokens=64)
    path = str(tmp_path / "stage")
    stage.save(path)
    loaded = ZeroShotClassifier.load(path)
    assert loaded.uid == stage.uid and loaded.extractParamMap() == stage.extractParamMap()
    assert loaded.getCandidateLabels() == CANDIDATES[:3]
    model = Pipeline(stages=[stage]).fit(texts)
    model.write().overwrite().save(str(tmp_path / "pipe"))
    again = PipelineModel.load(str(tmp_path / "pipe"))
    assert _by_id(again.transform(texts), "z") == _by_id(loaded.transform(texts), "z")


def test_every_param_is_in_the_manual(repo_root):
    manual = (repo_root / "docs" / "classifiers.md").read_text()
    section = manual.split("## `ZeroShotClassifier`")[1].split("\n## ")[0]
    for param in ZeroShotClassifier().params:
        assert f"`{param.name}`" in section, param.name
