"""The ``TextGenerator`` stage and ``generate_texts`` against ``model.generate`` run directly on
each text alone, for tiny random-weight Marian, T5 and BART models built here (their tokenizers
trained on real Wikipedia sentences); greedy and beam search; batching and bucketing leave the
texts unchanged; cross-attention weights equal a direct forward pass and draw as a PNG; null,
blank and long texts are kept and counted; params, save, load and Pipeline use."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from pyspark.ml import Pipeline, PipelineModel
from pyspark.sql import DataFrame

from sparkfield.core.errors import ColumnError, ConfigError
from sparkfield.nlp import count_outcomes
from sparkfield.nlp.cross_attention import cross_attention_png
from sparkfield.nlp.generation import TextGenerator, generate_texts
from sparkfield.nlp.model import ModelError
from sparkfield.nlp.seq2seq import Seq2SeqGenerator
from sparkfield.text.bag_of_words.normalise import sentences
from sparkfield.text.bag_of_words.parse import page_text
from tests.nlp import tiny_models
from tests.nlp.tiny_seq2seq import FAMILIES, build

N = 10
NEW = 8  # maxNewTokens of the tests
PAGES = ("Machine_translation.html", "Linguistics.html", "Text_mining.html")


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One torch thread here, as each Spark task gets (spark.task.cpus): on a shared machine
    more threads are slower."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def corpus(wiki_pages) -> list[str]:
    found: list[str] = []
    for name in PAGES:
        found += sentences(page_text((wiki_pages / name).read_text("utf-8"))[1])
    return found


@pytest.fixture(scope="module")
def real_sentences(corpus) -> list[str]:
    return [s for s in corpus if 30 < len(s) < 160][:N]


@pytest.fixture(scope="module")
def models(tmp_path_factory, corpus) -> dict[str, Path]:
    return {f: build(tmp_path_factory.mktemp(f), f, corpus[:400], seed=i)
            for i, f in enumerate(FAMILIES)}


@pytest.fixture(scope="module")
def texts(spark, real_sentences) -> DataFrame:
    rows = [(f"s{i:02d}", t) for i, t in enumerate(real_sentences)]
    return spark.createDataFrame(rows, "id string, text string").repartition(2)


_DIRECT: dict[tuple, list[tuple[str, list[int]]]] = {}


def _direct(folder: Path, texts: list[str], beams: int = 1, max_tokens: int | None = None,
            **options) -> list[tuple[str, list[int]]]:
    """(text, generated ids after the decoder start) of ``model.generate`` on each text
    alone, decoded as ``batch_decode`` with special tokens skipped."""
    key = (str(folder), tuple(texts), beams, max_tokens, tuple(sorted(options.items())))
    if key not in _DIRECT:
        tok, model = _hf(folder)
        out = []
        for text in texts:
            enc = tok([text], return_tensors="pt", truncation=max_tokens is not None,
                      max_length=max_tokens)
            seq = model.generate(**enc, num_beams=beams, max_new_tokens=NEW, do_sample=False,
                                 **options)
            ids = seq[0, 1:].tolist()
            if tok.eos_token_id in ids:
                ids = ids[:ids.index(tok.eos_token_id) + 1]
            out.append((tok.batch_decode(seq, skip_special_tokens=True)[0], ids))
        _DIRECT[key] = out
    return _DIRECT[key]


_HF: dict[tuple[str, bool], tuple] = {}


def _hf(folder: Path, eager: bool = False) -> tuple:
    key = (str(folder), eager)
    if key not in _HF:
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        kwargs = {"attn_implementation": "eager"} if eager else {}
        _HF[key] = (AutoTokenizer.from_pretrained(str(folder)),
                    AutoModelForSeq2SeqLM.from_pretrained(str(folder), **kwargs).eval())
    return _HF[key]


def _by_id(df: DataFrame, col: str = "generated") -> dict[str, dict]:
    return {r["id"]: r[col].asDict() for r in df.select("id", col).collect()}


@pytest.mark.parametrize("family", FAMILIES)
def test_greedy_and_beam_search_equal_generate_run_directly(family, models, texts,
                                                            real_sentences):
    folder = str(models[family])
    both = generate_texts(generate_texts(texts, folder, output_col="greedy", device="cpu",
                                         maxNewTokens=NEW, batchSize=7),
                          folder, output_col="beam", numBeams=3, maxNewTokens=NEW,
                          device="cpu", batchSize=4, bucket=False)
    rows = {r["id"]: r for r in both.collect()}
    for col, beams in (("greedy", 1), ("beam", 3)):
        oracle = _direct(models[family], real_sentences, beams)
        assert len({t for t, _ in oracle}) > 1  # a test that can tell texts apart
        for i, (text, ids) in enumerate(oracle):
            got = rows[f"s{i:02d}"][col].asDict()
            assert got["text"] == text, (col, i)
            assert got["tokens"] == len(ids)
            assert got["stopped"] == ("max_new_tokens" if len(ids) == NEW else "eos")
            assert got["truncated"] is False and got["reason"] is None
    stops = {rows[k]["greedy"]["stopped"] for k in rows}
    assert stops == ({"max_new_tokens"} if family == "t5" else {"eos", "max_new_tokens"})


@pytest.mark.parametrize("family", FAMILIES)
def test_batch_size_and_bucketing_leave_the_texts_unchanged(family, models, real_sentences):
    model = Seq2SeqGenerator(models[family], "cpu", None, threads=1)
    oracle = _direct(models[family], real_sentences)
    for batch_size in (1, 7, 64):
        for bucket in (False, True):
            got = model.generate(real_sentences, batch_size, bucket, max_new_tokens=NEW)
            assert got.texts == [t for t, _ in oracle], (batch_size, bucket)
            assert got.ids == [i for _, i in oracle]
    beam = model.generate(real_sentences, 7, True, num_beams=3, max_new_tokens=NEW)
    assert beam.texts == [t for t, _ in _direct(models[family], real_sentences, 3)]


def test_generation_options_reach_generate(models, real_sentences):
    folder = models["bart"]
    model = Seq2SeqGenerator(folder, "cpu", None, threads=1)
    options = {"no_repeat_ngram_size": 2, "length_penalty": 2.0}
    got = model.generate(real_sentences, 4, True, num_beams=3, max_new_tokens=NEW, **options)
    oracle = _direct(folder, real_sentences, 3, **options)
    assert got.texts == [t for t, _ in oracle]
    for ids in got.ids:
        pairs = list(zip(ids, ids[1:], strict=False))
        assert len(pairs) == len(set(pairs))  # no bigram twice
    assert [len(i) for i in got.ids] == got.counts.tolist()


def _cross_direct(folder: Path, text: str, target: list[int], start: int) -> np.ndarray:
    import torch

    tok, model = _hf(folder, eager=True)
    enc = tok([text], return_tensors="pt")
    with torch.inference_mode():
        out = model(**enc, decoder_input_ids=torch.tensor([[start, *target[:-1]]]),
                    output_attentions=True)
    return torch.stack([a[0] for a in out.cross_attentions]).numpy()


@pytest.mark.parametrize("family", FAMILIES)
def test_cross_attention_equals_a_direct_forward_pass(family, models, real_sentences):
    folder = models[family]
    model = Seq2SeqGenerator(folder, "cpu", None, threads=1)
    some = real_sentences[:4]
    made = model.generate(some, 4, True, max_new_tokens=NEW)
    maps = model.cross_attention(some, made.ids, batch_size=3)
    tok, _ = _hf(folder)
    start = model.model.config.decoder_start_token_id
    for text, ids, got in zip(some, made.ids, maps, strict=True):
        assert got.source_tokens == tok.convert_ids_to_tokens(tok(text)["input_ids"])
        assert got.target_tokens == tok.convert_ids_to_tokens(ids)
        assert got.weights.shape == (2, 2, len(ids), len(got.source_tokens))
        np.testing.assert_allclose(got.weights, _cross_direct(folder, text, ids, start),
                                   atol=1e-5, rtol=0)
        np.testing.assert_allclose(got.weights.sum(axis=-1), 1.0, atol=1e-5)
    assert model.model.config._attn_implementation != "eager"  # generation keeps its kernels


def test_cross_attention_without_switchable_kernels_loads_an_eager_copy(models,
                                                                       real_sentences):
    model = Seq2SeqGenerator(models["t5"], "cpu", None, threads=1)
    some = real_sentences[:2]
    made = model.generate(some, max_new_tokens=NEW)
    switched = model.cross_attention(some, made.ids)
    model.model.set_attn_implementation = lambda *_: None  # as some releases leave T5
    copied = model.cross_attention(some, made.ids)
    assert model._eager is not None and model._eager is not model.model
    for a, b in zip(switched, copied, strict=True):
        np.testing.assert_allclose(a.weights, b.weights, atol=1e-6)


def test_the_stage_carries_cross_attention_and_it_draws(spark, models, real_sentences):
    from PIL import Image

    folder = models["t5"]
    prefix = "translate English to German: "
    df = spark.createDataFrame([("a", real_sentences[0]), ("b", None)], "id string, text string")
    out = _by_id(TextGenerator(modelPath=str(folder), crossAttention=True, prefix=prefix,
                               maxNewTokens=NEW, device="cpu").transform(df))
    got = out["a"]
    text, ids = _direct(folder, [prefix + real_sentences[0]])[0]
    assert got["text"] == text and got["tokens"] == len(ids)
    tok, _ = _hf(folder)
    assert got["source_tokens"][:4] == tok.convert_ids_to_tokens(tok(prefix)["input_ids"])[:4]
    weights = np.array(got["cross_attention"], dtype=np.float32)
    assert weights.shape == (2, 2, len(ids), len(got["source_tokens"]))
    start = _hf(folder)[1].config.decoder_start_token_id
    np.testing.assert_allclose(
        weights, _cross_direct(folder, prefix + real_sentences[0], ids, start), atol=1e-5)
    assert out["b"]["cross_attention"] is None and out["b"]["reason"] == "null text"
    png = cross_attention_png(got["source_tokens"], got["target_tokens"],
                              got["cross_attention"], "t5")
    image = Image.open(io.BytesIO(png))
    assert image.format == "PNG" and image.size[0] > 100
    with pytest.raises(ValueError, match="do not fit"):
        cross_attention_png(["a"], ["b"], weights, "wrong")


def test_null_blank_and_long_texts_are_kept_and_counted(spark, models):
    folder = models["marian"]
    long = "machine translation of natural language " * 12
    df = spark.createDataFrame(
        [("a", "A short sentence."), ("b", None), ("c", "   "), ("d", long)],
        "id string, text string")
    cut = generate_texts(df, str(folder), device="cpu", maxTokens=16, maxNewTokens=NEW)
    out = _by_id(cut)
    assert out["b"] == {"text": None, "tokens": None, "stopped": None, "truncated": None,
                        "reason": "null text"}
    assert out["c"]["text"] is None and out["c"]["reason"] == "empty text"
    assert out["a"]["truncated"] is False
    text, ids = _direct(folder, [long], max_tokens=16)[0]  # truncated as the tokenizer does
    assert out["d"]["truncated"] is True and out["d"]["text"] == text
    assert out["d"]["tokens"] == len(ids)
    assert count_outcomes(cut, "generated") == {
        "classified": 2, "truncated": 1, "null text": 1, "empty text": 1}

    rejected = generate_texts(df, str(folder), device="cpu", maxTokens=16, maxNewTokens=NEW,
                              onLongText="reject")
    assert _by_id(rejected)["d"] == {"text": None, "tokens": None, "stopped": None,
                                     "truncated": True, "reason": "too long"}
    assert count_outcomes(rejected, "generated") == {
        "classified": 1, "truncated": 0, "null text": 1, "empty text": 1, "too long": 1}


def test_params_defaults_and_checks():
    stage = TextGenerator()
    assert (stage.getInputCol(), stage.getOutputCol(), stage.getModelPath(),
            stage.getNumBeams(), stage.getMaxNewTokens(), stage.getPrefix(),
            stage.getLengthPenalty(), stage.getNoRepeatNgramSize(), stage.getCrossAttention(),
            stage.getMaxTokens(), stage.getBatchSize(), stage.getBucket(),
            stage.getOnLongText(), stage.getPrecision(), stage.getDevice()) == (
        "text", "generated", None, 1, 128, "", 1.0, 0, False, None, 64, True, "truncate",
        "fp32", "auto")
    with pytest.raises(TypeError, match="numBeams.*>= 1"):
        stage.setNumBeams(0)
    with pytest.raises(TypeError, match="maxNewTokens.*>= 1"):
        TextGenerator(maxNewTokens=0)
    with pytest.raises(TypeError, match="noRepeatNgramSize.*>= 0"):
        stage.setNoRepeatNgramSize(-1)
    with pytest.raises(TypeError, match="onLongText.*truncate, reject"):
        stage.setOnLongText("drop")
    with pytest.raises(TypeError, match="maxTokens.*>= 8"):
        stage.setMaxTokens(4)
    stage.setMaxTokens(32).setMaxTokens(None)
    assert stage.getMaxTokens() is None


def test_bad_settings_say_what_is_wrong(texts, models, tmp_path):
    folder = str(models["bart"])
    with pytest.raises(ConfigError, match="needs modelPath"):
        TextGenerator().transform(texts)
    with pytest.raises(ColumnError, match="no column 'body'"):
        TextGenerator(inputCol="body", modelPath=folder).transform(texts)
    with pytest.raises(ConfigError, match="'id' already exists"):
        TextGenerator(outputCol="id", modelPath=folder).transform(texts)
    classifier = tiny_models.build(tmp_path / "bert", "ForSequenceClassification", ("a", "b"))
    with pytest.raises(ModelError, match="not a sequence-to-sequence model"):
        TextGenerator(modelPath=str(classifier)).transform(texts)
    with pytest.raises(ModelError, match="model folder not found"):
        TextGenerator(modelPath=str(tmp_path / "nothing")).transform(texts)
    with pytest.raises(ConfigError, match="torch engine only"):
        TextGenerator(modelPath=folder).setEngine("onnx").transform(texts)
    with pytest.raises(ModelError, match="max tokens 300 is over the 256 positions"):
        TextGenerator(modelPath=folder, maxTokens=300).transform(texts)


def test_transform_runs_no_spark_job(spark, texts, models):
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        pytest.skip("no job tracker over Spark Connect")
    context, group = spark.sparkContext, "generation transform"
    context.setJobGroup(group, group)
    try:
        out = TextGenerator(modelPath=str(models["t5"]), crossAttention=True).transform(texts)
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    assert list(context.statusTracker().getJobIdsForGroup(group)) == []
    assert out.schema["generated"].dataType.names == [
        "text", "tokens", "stopped", "source_tokens", "target_tokens", "cross_attention",
        "truncated", "reason"]


def test_save_load_and_a_pipeline(texts, models, tmp_path):
    stage = TextGenerator(modelPath=str(models["marian"]), outputCol="g", numBeams=2,
                          maxNewTokens=4, noRepeatNgramSize=2, lengthPenalty=0.5,
                          device="cpu", batchSize=3, maxTokens=64)
    path = str(tmp_path / "stage")
    stage.save(path)
    loaded = TextGenerator.load(path)
    assert loaded.uid == stage.uid and loaded.extractParamMap() == stage.extractParamMap()
    model = Pipeline(stages=[stage]).fit(texts)
    model.write().overwrite().save(str(tmp_path / "pipe"))
    again = PipelineModel.load(str(tmp_path / "pipe"))
    assert _by_id(again.transform(texts), "g") == _by_id(loaded.transform(texts), "g")


def test_the_engine_imports_without_pyspark(repo_root):
    code = ("import sys; import sparkfield.nlp.seq2seq, sparkfield.nlp.cross_attention; "
            "assert 'pyspark' not in sys.modules, 'pyspark imported'")
    done = subprocess.run([sys.executable, "-c", code], cwd=repo_root, capture_output=True,
                          text=True, env={"PYTHONPATH": str(repo_root / "libs")})
    assert done.returncode == 0, done.stderr


def test_every_param_is_in_the_manual(repo_root):
    manual = (repo_root / "docs" / "generation.md").read_text()
    for param in TextGenerator().params:
        assert f"`{param.name}`" in manual, param.name
