"""The ``TextClassifier`` stage and ``classify_texts`` against the Hugging Face
text-classification pipeline run directly on the same model folder (a tiny random-weight
BertForSequenceClassification built here), on real Wikipedia sentences; batching and bucketing
leave results unchanged; null, blank and long texts are kept and counted; save, load and
Pipeline use; the engine imports without pyspark."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from pyspark.ml import Pipeline, PipelineModel
from pyspark.sql import DataFrame

from sparkfield.core.errors import ColumnError, ConfigError, InputError
from sparkfield.nlp import TextClassifier, classify_texts, count_outcomes
from sparkfield.nlp.heads import SequenceClassifier
from sparkfield.nlp.model import ModelError
from sparkfield.text.bag_of_words.normalise import sentences
from sparkfield.text.bag_of_words.parse import page_text
from tests.nlp.tiny_models import NER_LABELS, build

LABELS = ("negative", "neutral", "positive")
TOPICS = ("sports", "politics", "science", "arts")
N = 24


@pytest.fixture(scope="module")
def real_sentences(wiki_pages) -> list[str]:
    html = (wiki_pages / "Sentiment_analysis.html").read_bytes()
    return sentences(page_text(html.decode("utf-8"))[1])[:N]


@pytest.fixture(scope="module")
def single(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("single"), "ForSequenceClassification", LABELS)


@pytest.fixture(scope="module")
def multi(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("multi"), "ForSequenceClassification", TOPICS,
                 seed=1, problem_type="multi_label_classification")


@pytest.fixture(scope="module")
def texts(spark, real_sentences) -> DataFrame:
    rows = [(f"s{i:02d}", t) for i, t in enumerate(real_sentences)]
    return spark.createDataFrame(rows, "id string, text string").repartition(2)


def _oracle(folder: Path, inputs: list, **kwargs) -> list[dict[str, float]]:
    """label -> score of every label, from the pipeline run directly."""
    from transformers import pipeline

    pipe = pipeline("text-classification", model=str(folder), top_k=None, device="cpu",
                    **kwargs)
    return [{d["label"]: d["score"] for d in out} for out in pipe(inputs)]


def _by_id(df: DataFrame, col: str = "classification") -> dict[str, dict]:
    return {r["id"]: r[col].asDict() for r in df.select("id", col).collect()}


def _same(mine: dict, theirs: dict[str, float]) -> None:
    best = max(theirs, key=lambda k: theirs[k])
    assert mine["label"] == best
    assert mine["score"] == pytest.approx(theirs[best], abs=1e-4)
    probs = mine.get("probabilities")
    if probs is not None:
        assert set(probs) == set(theirs)
        for label, score in theirs.items():
            assert probs[label] == pytest.approx(score, abs=1e-4), label


def test_single_label_equals_the_hf_pipeline(texts, real_sentences, single):
    out = _by_id(classify_texts(texts, str(single), probabilities=True, device="cpu",
                                batchSize=7))
    oracle = _oracle(single, real_sentences)
    assert len({o["label"] for o in out.values()}) > 1  # a test that can tell labels apart
    for i, theirs in enumerate(oracle):
        mine = out[f"s{i:02d}"]
        _same(mine, theirs)
        assert mine["truncated"] is False and mine["reason"] is None
        assert sum(mine["probabilities"].values()) == pytest.approx(1.0, abs=1e-6)


def test_multi_label_takes_sigmoid_as_the_hf_pipeline(texts, real_sentences, multi):
    stage = TextClassifier(modelPath=str(multi), probabilities=True, device="cpu")
    out = _by_id(stage.transform(texts))
    oracle = _oracle(multi, real_sentences)  # its default for a multi-label model: sigmoid
    assert oracle == _oracle(multi, real_sentences, function_to_apply="sigmoid")
    for i, theirs in enumerate(oracle):
        _same(out[f"s{i:02d}"], theirs)
    assert any(sum(o["probabilities"].values()) > 1.5 for o in out.values())  # not softmax


def test_text_pairs_equal_the_hf_pipeline(spark, real_sentences, single):
    pairs = list(zip(real_sentences[:8], real_sentences[8:16], strict=True))
    df = spark.createDataFrame([(f"p{i}", a, b) for i, (a, b) in enumerate(pairs)],
                               "id string, premise string, hypothesis string")
    out = _by_id(TextClassifier(inputCol="premise", pairCol="hypothesis", device="cpu",
                                modelPath=str(single)).transform(df))
    oracle = _oracle(single, [{"text": a, "text_pair": b} for a, b in pairs])
    single_texts = _oracle(single, [a for a, _ in pairs])
    assert oracle != single_texts  # the second text reaches the model
    for i, theirs in enumerate(oracle):
        _same(out[f"p{i}"], theirs)


@pytest.mark.parametrize("bucket", [False, True])
@pytest.mark.parametrize("batch_size", [1, 7, 64])
def test_batch_size_and_bucketing_leave_results_unchanged(single, real_sentences, batch_size,
                                                          bucket):
    model = SequenceClassifier(single, "cpu", None)
    alone = np.stack([model.classify([t]).scores[0] for t in real_sentences])
    got = model.classify(real_sentences, None, batch_size, bucket)
    assert (got.best == alone.argmax(axis=1)).all()
    np.testing.assert_allclose(got.scores, alone, atol=1e-5, rtol=0)


def test_cpu_bf16_flags():
    from sparkfield.nlp.device import native_bf16

    assert native_bf16("processor: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16 avx512_vnni\n")
    assert native_bf16("flags : avx2 amx_bf16 amx_tile")
    assert not native_bf16("flags\t: fpu sse avx2 avx512f avx512_vnni\n")
    assert not native_bf16("")


@pytest.mark.parametrize("native", [True, False])
def test_bf16_runs_on_the_cpu_where_it_is_native(single, real_sentences, monkeypatch, native):
    """bf16 on a CPU that multiplies it natively runs the model in bfloat16: one text a batch,
    its scores are the model's run directly in bfloat16, not float32's; on another CPU it runs
    float32, as fp16 does on every CPU. The flag is set both ways: torch computes bfloat16 on
    any CPU, natively or not."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from sparkfield.nlp import encoder

    monkeypatch.setattr(encoder, "native_bf16", lambda: native)
    bf16 = SequenceClassifier(single, "cpu", None, precision="bf16")
    fp16 = SequenceClassifier(single, "cpu", None, precision="fp16")
    assert bf16.runs == ("bf16" if native else "fp32")
    assert fp16.runs == "fp32" and fp16.model.dtype == torch.float32
    assert bf16.model.dtype == (torch.bfloat16 if native else torch.float32)
    got = bf16.classify(real_sentences, None, 1)
    tok = AutoTokenizer.from_pretrained(str(single))
    model = AutoModelForSequenceClassification.from_pretrained(str(single)).eval()
    direct = {}
    for dtype in (torch.float32, torch.bfloat16):
        model = model.to(dtype)
        with torch.inference_mode():
            direct[dtype] = np.concatenate([model(**tok([t], return_tensors="pt")).logits
                                            .float().softmax(-1).numpy() for t in real_sentences])
    expected = direct[torch.bfloat16] if native else direct[torch.float32]
    np.testing.assert_allclose(got.scores, expected, atol=1e-5, rtol=0)
    assert np.abs(direct[torch.bfloat16] - direct[torch.float32]).max() > 1e-2  # told apart
    # bfloat16 rounds differently in batches padded to another length (this model's wide
    # weights magnify it: see docs/classifiers.md for a real one's)
    batched = bf16.classify(real_sentences, None, 7, True).scores
    np.testing.assert_allclose(batched, expected, atol=5e-2 if native else 1e-5, rtol=0)
    assert encoder.run_precision("bf16", "cuda:0") == "bf16"
    assert encoder.run_precision("fp16", "cuda:1") == "fp16"


def test_the_stage_runs_bf16_where_the_cpu_has_it(texts, single):
    """The stage's precision reaches the workers: on this CPU bf16 is native (scores move from
    float32's) or not (scores equal float32's)."""
    from sparkfield.nlp.device import native_bf16

    plain = _by_id(classify_texts(texts, str(single), device="cpu"))
    half = _by_id(classify_texts(texts, str(single), device="cpu", precision="bf16"))
    moved = max(abs(half[i]["score"] - plain[i]["score"]) for i in plain)
    assert moved > 1e-2 if native_bf16() else moved == 0


def test_null_blank_and_long_texts_are_kept_and_counted(spark, single):
    long = "natural language processing " * 20
    df = spark.createDataFrame(
        [("a", "A short sentence."), ("b", None), ("c", "   "), ("d", long)],
        "id string, text string")
    cut = TextClassifier(modelPath=str(single), device="cpu", maxTokens=16).transform(df)
    out = _by_id(cut)
    assert out["b"] == {"label": None, "score": None, "truncated": None,
                        "reason": "null text"}
    assert out["c"]["label"] is None and out["c"]["reason"] == "empty text"
    assert out["d"]["truncated"] is True and out["d"]["label"] in LABELS
    assert out["a"]["truncated"] is False
    from transformers import pipeline

    pipe = pipeline("text-classification", model=str(single), top_k=None, device="cpu")
    theirs = {d["label"]: d["score"] for d in pipe([long], truncation=True, max_length=16)[0]}
    _same(out["d"], theirs)  # truncated as the tokenizer truncates
    assert count_outcomes(cut, "classification") == {
        "classified": 2, "truncated": 1, "null text": 1, "empty text": 1}

    rejected = TextClassifier(modelPath=str(single), device="cpu", maxTokens=16,
                              onLongText="reject").transform(df)
    assert _by_id(rejected)["d"] == {"label": None, "score": None, "truncated": True,
                                     "reason": "too long"}
    assert count_outcomes(rejected, "classification") == {
        "classified": 1, "truncated": 0, "null text": 1, "empty text": 1, "too long": 1}


def test_a_blank_pair_is_a_reason_too(spark, single):
    df = spark.createDataFrame([("a", "One.", None), ("b", "Two.", " ")],
                               "id string, text string, other string")
    out = _by_id(TextClassifier(modelPath=str(single), pairCol="other",
                                device="cpu").transform(df))
    assert out["a"]["reason"] == "null text pair" and out["a"]["label"] is None
    assert out["b"]["reason"] == "empty text pair"


def test_params_defaults_and_checks():
    stage = TextClassifier()
    assert (stage.getInputCol(), stage.getOutputCol(), stage.getModelPath(),
            stage.getMaxTokens(), stage.getBatchSize(), stage.getBucket(),
            stage.getOnLongText(), stage.getFunction(), stage.getProbabilities(),
            stage.getPrecision(), stage.getPairCol(), stage.getDevice()) == (
        "text", "classification", None, None, 64, True, "truncate", "auto", False, "fp32",
        None, "auto")
    with pytest.raises(TypeError, match="onLongText.*truncate, reject"):
        stage.setOnLongText("drop")
    with pytest.raises(TypeError, match="batchSize.*>= 1"):
        stage.setBatchSize(0)
    with pytest.raises(TypeError, match="device.*not valid"):
        stage.setDevice("tpu")
    with pytest.raises(TypeError, match="function.*softmax"):
        TextClassifier(function="relu")
    stage.setMaxTokens(32).setMaxTokens(None)
    assert stage.getMaxTokens() is None


def test_bad_settings_say_what_is_wrong(spark, texts, single, tmp_path):
    with pytest.raises(ConfigError, match="needs modelPath"):
        TextClassifier().transform(texts)
    with pytest.raises(InputError, match="no column 'body'") as error:
        TextClassifier(inputCol="body", modelPath=str(single)).transform(texts)
    assert isinstance(error.value, ColumnError)
    with pytest.raises(ColumnError, match="no column 'other'"):
        TextClassifier(pairCol="other", modelPath=str(single)).transform(texts)
    with pytest.raises(ConfigError, match="'id' already exists"):
        TextClassifier(outputCol="id", modelPath=str(single)).transform(texts)
    tagger = build(tmp_path / "tagger", "ForTokenClassification", NER_LABELS)
    with pytest.raises(ModelError, match="not a \\*ForSequenceClassification model"):
        TextClassifier(modelPath=str(tagger)).transform(texts)
    with pytest.raises(ModelError, match="model folder not found"):
        TextClassifier(modelPath=str(tmp_path / "nothing")).transform(texts)
    with pytest.raises(ModelError, match="max tokens 600 is over the 512 positions"):
        TextClassifier(modelPath=str(single), maxTokens=600).transform(texts)


def test_save_load_and_a_pipeline(texts, single, tmp_path):
    stage = TextClassifier(modelPath=str(single), outputCol="c", probabilities=True,
                           device="cpu", batchSize=5, maxTokens=64)
    path = str(tmp_path / "stage")
    stage.save(path)
    loaded = TextClassifier.load(path)
    assert loaded.uid == stage.uid and loaded.extractParamMap() == stage.extractParamMap()
    model = Pipeline(stages=[stage]).fit(texts)
    model.write().overwrite().save(str(tmp_path / "pipe"))
    again = PipelineModel.load(str(tmp_path / "pipe"))
    assert _by_id(again.transform(texts), "c") == _by_id(loaded.transform(texts), "c")


def test_the_engine_imports_without_pyspark(repo_root):
    code = ("import sys; import sparkfield.nlp.heads, sparkfield.nlp.aggregation; "
            "import sparkfield.nlp; assert 'pyspark' not in sys.modules, 'pyspark imported'")
    done = subprocess.run([sys.executable, "-c", code], cwd=repo_root, capture_output=True,
                          text=True, env={"PYTHONPATH": str(repo_root / "libs")})
    assert done.returncode == 0, done.stderr


def test_the_gpu_benchmark_runs_its_cpu_smoke_mode(repo_root):
    script = str(repo_root / "benchmarks" / "gpu_inference.py")
    env = {"PYTHONPATH": str(repo_root / "libs"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, script, "--smoke", "--procs", "2", "--seconds",
                           "0.2"], cwd=repo_root, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line.split() for line in done.stdout.splitlines()]
    engine = [r for r in rows if r[:2] == ["sparkfield", "engine"]]
    assert [r[2:4] for r in engine] == [["fp32", "2"]] and float(engine[0][4]) > 0
    assert sum(r[0] == "transformers," for r in rows) == 2
    import torch

    if not torch.cuda.is_available():
        done = subprocess.run([sys.executable, script], cwd=repo_root, capture_output=True,
                              text=True, env=env)
        assert done.returncode == 77  # make bench goes on past it
        assert done.stdout.splitlines() == [done.stdout.strip()]
        assert done.stdout.startswith("error: no CUDA device")


def test_every_param_is_in_the_manual(repo_root):
    from sparkfield.nlp import TokenClassifier

    manual = (repo_root / "docs" / "classifiers.md").read_text()
    for stage in (TextClassifier(), TokenClassifier()):
        for param in stage.params:
            assert f"`{param.name}`" in manual, param.name


def test_a_model_saved_again_in_the_same_folder_is_loaded_again(texts, real_sentences,
                                                                 tmp_path):
    # a notebook retrains and saves into the same folder: the workers, kept between jobs,
    # must not go on with the encoder they built for the folder's earlier model
    folder = build(tmp_path / "model", "ForSequenceClassification", LABELS, seed=3)
    first = _by_id(classify_texts(texts, str(folder), probabilities=True, device="cpu"))
    build(folder, "ForSequenceClassification", LABELS, seed=4)
    again = _by_id(classify_texts(texts, str(folder), probabilities=True, device="cpu"))
    oracle = _oracle(folder, real_sentences)
    for i, theirs in enumerate(oracle):
        _same(again[f"s{i:02d}"], theirs)
    assert any(again[k]["probabilities"] != first[k]["probabilities"] for k in first)
