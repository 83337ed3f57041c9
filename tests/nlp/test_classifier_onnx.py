"""The classifiers on the ONNX Runtime engine: fp32 exports equal the torch engine (labels,
entities and offsets identical, scores to 1e-4) on real Wikipedia sentences, whatever the batch
size and bucketing; the int8 accuracy check passes a model int8 keeps (the bundled MiniLM with a
topic head fitted here) silently and trips on one whose weight outliers int8 destroys (a warning
with the figures, or an ``InputError``); exports are cached per task and rebuilt when cut
short; bad settings say what is wrong."""

from __future__ import annotations

import logging
import shutil
import uuid
import warnings
from pathlib import Path

import numpy as np
import pytest
from pyspark.sql import DataFrame

from sparkfield.core.errors import ConfigError, InputError
from sparkfield.nlp import TextClassifier, TokenClassifier
from sparkfield.nlp.embed import EngineSpec
from sparkfield.nlp.heads import SequenceClassifier
from sparkfield.nlp.int8_check import Int8DisagreementWarning, int8_agreement
from sparkfield.nlp.model import default_model_dir
from sparkfield.nlp.onnx_engine import ensure_onnx, export_dir, onnx_session
from sparkfield.nlp.onnx_heads import OnnxSequenceClassifier, OnnxTokenTagger
from sparkfield.text.bag_of_words.normalise import sentences
from sparkfield.text.bag_of_words.parse import page_text
from tests.nlp.tiny_models import NER_LABELS, TOKENIZER_FILES, build

LABELS = ("negative", "neutral", "positive")
PER_PAGE = 16  # sentences of each Wikipedia page in the int8 sample


@pytest.fixture(scope="module")
def real_sentences(wiki_pages) -> list[str]:
    html = (wiki_pages / "Sentiment_analysis.html").read_bytes()
    return sentences(page_text(html.decode("utf-8"))[1])[:24]


@pytest.fixture(scope="module")
def topics(wiki_pages) -> tuple[list[str], list[int]]:
    """Sentences of each page and the page they come from."""
    texts, pages = [], []
    for k, page in enumerate(sorted(wiki_pages.iterdir())):
        found = [s for s in sentences(page_text(page.read_bytes().decode("utf-8"))[1])
                 if len(s.split()) >= 3][:PER_PAGE]
        texts += found
        pages += [k] * len(found)
    return texts, pages


@pytest.fixture(scope="module")
def single(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("single"), "ForSequenceClassification", LABELS)


@pytest.fixture(scope="module")
def tagger(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("tagger"), "ForTokenClassification", NER_LABELS)


@pytest.fixture(scope="module")
def texts(spark, real_sentences) -> DataFrame:
    rows = [(f"s{i:02d}", t) for i, t in enumerate(real_sentences)]
    rows += [("null", None), ("blank", "  "), ("long", "natural language processing " * 40)]
    return spark.createDataFrame(rows, "id string, text string").repartition(2)


def _with_outliers(folder: Path, auto: str) -> Path:
    """The model with a weight of 1000 in every output channel of the quantised MatMuls
    (query, key, value, intermediate), on a hidden dimension every LayerNorm sets to 0: fp32
    outputs are those of a sound model, but int8's per-channel scales leave the other
    weights no resolution."""
    import torch
    import transformers

    model = getattr(transformers, auto).from_pretrained(str(folder)).eval()
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.weight[0], module.bias[0] = 0.0, 0.0
        for name, module in model.named_modules():
            if name.endswith(("query", "key", "value", "intermediate.dense")):
                module.weight[:, 0] = 1000.0
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def broken(tmp_path_factory) -> Path:
    return _with_outliers(build(tmp_path_factory.mktemp("broken"), "ForSequenceClassification",
                                LABELS), "AutoModelForSequenceClassification")


@pytest.fixture(scope="module")
def topic_model(tmp_path_factory, topics) -> Path:
    """The bundled MiniLM with a classification head fitted to tell the pages apart: a
    realistic fine-tuned model (trained encoder, a head with clear margins)."""
    import torch
    import transformers

    folder = tmp_path_factory.mktemp("topics")
    texts, pages = topics
    labels = {i: f"page{i}" for i in sorted(set(pages))}
    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification.from_pretrained(
        str(default_model_dir()), id2label=labels,
        label2id={v: k for k, v in labels.items()}).eval()
    tok = transformers.AutoTokenizer.from_pretrained(str(default_model_dir()))
    with torch.no_grad():
        pooled = model.bert(**tok(texts, padding=True, truncation=True, max_length=64,
                                  return_tensors="pt")).pooler_output
    target, head = torch.tensor(pages), model.classifier
    fit = torch.optim.LBFGS(head.parameters(), max_iter=100)

    def loss():
        fit.zero_grad()
        value = torch.nn.functional.cross_entropy(head(pooled), target)
        value = value + 1e-3 * head.weight.pow(2).sum()
        value.backward()
        return value

    fit.step(loss)
    model.save_pretrained(folder)
    for name in TOKENIZER_FILES:
        shutil.copy(default_model_dir() / name, folder / name)
    return folder


def _by_id(df: DataFrame, col: str) -> dict[str, dict]:
    return {r["id"]: r[col].asDict(recursive=True) for r in df.select("id", col).collect()}


def _jobs(spark, call) -> list[int]:
    """The Spark jobs ``call()`` ran (classic Spark only)."""
    context, group = spark.sparkContext, f"onnx classifier {uuid.uuid4().hex}"
    context.setJobGroup(group, group)
    try:
        call()
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    return list(context.statusTracker().getJobIdsForGroup(group))


def _classic(spark) -> bool:
    return not type(spark).__module__.startswith("pyspark.sql.connect")


# --- fp32 exports equal the torch engine ---------------------------------------------------

def test_onnx_text_classifier_equals_torch(spark, texts, single):
    stage = TextClassifier(modelPath=str(single), probabilities=True, device="cpu",
                           batchSize=7, maxTokens=32)
    torch_out = _by_id(stage.transform(texts), "classification")
    onnx = stage.copy({stage.engine: "onnx"})
    if _classic(spark):
        assert _jobs(spark, lambda: onnx.transform(texts)) == []
    got = _by_id(onnx.transform(texts), "classification")
    assert got.keys() == torch_out.keys()
    assert len({o["label"] for o in got.values()} - {None}) > 1
    for key, mine in got.items():
        theirs = torch_out[key]
        assert (mine["label"], mine["truncated"], mine["reason"]) == (
            theirs["label"], theirs["truncated"], theirs["reason"]), key
        if theirs["score"] is not None:
            assert mine["score"] == pytest.approx(theirs["score"], abs=1e-4)
            for label, score in theirs["probabilities"].items():
                assert mine["probabilities"][label] == pytest.approx(score, abs=1e-4)
    assert got["long"]["truncated"] is True and got["null"]["reason"] == "null text"
    fp = export_dir(single, None)
    assert (fp / "sequence-classification.onnx").is_file()


def test_onnx_token_classifier_equals_torch(texts, tagger):
    stage = TokenClassifier(modelPath=str(tagger), device="cpu", aggregationStrategy="none",
                            ignoreLabels=[], batchSize=5, maxTokens=48)
    theirs = _by_id(stage.transform(texts), "entities")
    mine = _by_id(stage.copy({stage.engine: "onnx"}).transform(texts), "entities")
    assert mine.keys() == theirs.keys()
    assert sum(len(r["entities"] or []) for r in mine.values()) > 100
    for key, row in mine.items():
        other = theirs[key]
        assert (row["truncated"], row["reason"]) == (other["truncated"], other["reason"])
        if other["entities"] is None:
            assert row["entities"] is None
            continue
        strip = [{k: e[k] for k in ("label", "word", "start", "end", "index")}
                 for e in row["entities"]]
        assert strip == [{k: e[k] for k in ("label", "word", "start", "end", "index")}
                         for e in other["entities"]], key
        np.testing.assert_allclose([e["score"] for e in row["entities"]],
                                   [e["score"] for e in other["entities"]], atol=1e-4)


@pytest.mark.parametrize("bucket", [False, True])
@pytest.mark.parametrize("batch_size", [1, 7, 64])
def test_batch_size_and_bucketing_leave_onnx_results_unchanged(single, tagger, real_sentences,
                                                               batch_size, bucket):
    model = OnnxSequenceClassifier(single, "cpu", None, threads=1)
    alone = np.stack([model.classify([t]).scores[0] for t in real_sentences])
    got = model.classify(real_sentences, None, batch_size, bucket)
    assert (got.best == alone.argmax(axis=1)).all()
    np.testing.assert_allclose(got.scores, alone, atol=1e-5, rtol=0)
    tags = OnnxTokenTagger(tagger, "cpu", None, threads=1)
    one = [tags.tag([t]).scores[0] for t in real_sentences[:8]]
    many = tags.tag(real_sentences[:8], batch_size, bucket).scores
    for a, b in zip(one, many, strict=True):
        np.testing.assert_allclose(b, a, atol=1e-5, rtol=0)


def test_text_pairs_reach_the_export(single, real_sentences):
    first, second = real_sentences[:6], real_sentences[6:12]
    onnx = OnnxSequenceClassifier(single, "cpu", None, threads=1)
    assert "token_type_ids" in onnx.inputs
    ref = SequenceClassifier(single, "cpu", None, threads=1).classify(first, second)
    got = onnx.classify(first, second, 4, True)
    np.testing.assert_allclose(got.scores, ref.scores, atol=1e-4, rtol=0)
    assert not np.allclose(got.scores, onnx.classify(first).scores, atol=1e-3)


# --- the int8 accuracy check ---------------------------------------------------------------

@pytest.fixture(scope="module")
def topic_texts(spark, topics) -> DataFrame:
    rows = [(f"t{i:03d}", t) for i, t in enumerate(topics[0])] + [("null", None)]
    return spark.createDataFrame(rows, "id string, text string").repartition(2)


def test_int8_of_a_model_it_keeps_passes_silently(spark, topic_texts, topic_model, topics,
                                                  caplog):
    stage = TextClassifier(modelPath=str(topic_model), device="cpu", engine="onnx",
                           quantize="int8", int8Check="refuse", maxTokens=64,
                           int8SampleRows=len(topics[0]))
    found = int8_agreement(topic_texts, stage)
    print(f"int8 against fp32, fitted MiniLM: {found}")
    assert (found.rows, found.units, found.unit) == (len(topics[0]), len(topics[0]), "rows")
    assert found.share <= 0.02
    assert 0 < found.max_score_difference < 0.2  # really quantised, and close
    with warnings.catch_warnings(), caplog.at_level(logging.WARNING, "sparkfield.nlp"):
        warnings.simplefilter("error", Int8DisagreementWarning)
        scored = stage.transform(topic_texts)
    assert not [r for r in caplog.records if "int8" in r.getMessage()]
    assert "classification" in scored.columns


def test_int8_that_breaks_a_model_trips_the_check(spark, texts, broken, real_sentences,
                                                  caplog):
    # the outliers leave fp32 sound (the export equals torch) and int8 flips many labels
    torch_model = SequenceClassifier(broken, "cpu", 32, threads=1)
    fp32 = OnnxSequenceClassifier(broken, "cpu", 32, threads=1)
    int8 = OnnxSequenceClassifier(broken, "cpu", 32, threads=1, quantize="int8")
    ref, full, small = (m.classify(real_sentences) for m in (torch_model, fp32, int8))
    np.testing.assert_allclose(full.scores, ref.scores, atol=1e-4)
    assert (small.best != full.best).mean() >= 0.2

    stage = TextClassifier(modelPath=str(broken), device="cpu", engine="onnx",
                           quantize="int8", maxTokens=32)
    found = int8_agreement(texts, stage)
    assert found.rows == len(real_sentences) + 1  # every non-blank row: the long one too
    assert found.share == pytest.approx((small.best != full.best).sum() / found.rows, abs=0.05)
    figures = rf"changed {found.differing} of {found.rows} labels \({found.share:.1%}"
    with caplog.at_level(logging.WARNING, "sparkfield.nlp"), \
            pytest.warns(Int8DisagreementWarning, match=figures + r".*over int8MaxDisag"):
        stage.transform(texts)
    assert any("int8MaxDisagreement 2.0%" in r.getMessage() for r in caplog.records)
    with pytest.raises(InputError, match=figures + r".*2\.0%.*quantize none.*raise int8Max"):
        stage.copy({stage.int8Check: "refuse"}).transform(texts)
    with warnings.catch_warnings():
        warnings.simplefilter("error", Int8DisagreementWarning)
        lenient = stage.copy({stage.int8MaxDisagreement: 0.95})
        quiet = stage.copy({stage.int8Check: "off"})
        if _classic(spark):
            assert _jobs(spark, lambda: lenient.transform(texts)) != []  # the check's job
            assert _jobs(spark, lambda: quiet.transform(texts)) == []
        else:
            lenient.transform(texts)
            quiet.transform(texts)


def test_int8_check_of_a_token_classifier_counts_tokens(texts, tagger, tmp_path):
    broken_tagger = _with_outliers(build(tmp_path / "t", "ForTokenClassification", NER_LABELS),
                                   "AutoModelForTokenClassification")
    stage = TokenClassifier(modelPath=str(broken_tagger), device="cpu", engine="onnx",
                            quantize="int8", int8Check="refuse", maxTokens=32,
                            int8SampleRows=8)
    with pytest.raises(InputError, match=r"of the tokens\) on 8 sampled rows"):
        stage.transform(texts)
    found = int8_agreement(texts, stage)
    assert found.unit == "tokens" and found.rows == 8 and found.units > 8
    assert found.share > 0.2


def test_zero_shot_runs_on_onnx_and_its_int8_check_reads_pairs(texts, tmp_path):
    from sparkfield.nlp import ZeroShotClassifier

    nli = build(tmp_path / "nli", "ForSequenceClassification",
                ("entailment", "neutral", "contradiction"), seed=2)
    labels = ["science", "politics", "arts"]
    ask = {"modelPath": str(nli), "device": "cpu", "candidateLabels": labels, "maxTokens": 32}
    torch_rows = _by_id(ZeroShotClassifier(**ask).transform(texts), "zero_shot")
    onnx_rows = _by_id(ZeroShotClassifier(engine="onnx", **ask).transform(texts), "zero_shot")
    assert {k: v["labels"] for k, v in onnx_rows.items()} == {
        k: v["labels"] for k, v in torch_rows.items()}
    for k, v in torch_rows.items():
        if v["scores"] is not None:
            np.testing.assert_allclose(onnx_rows[k]["scores"], v["scores"], atol=1e-4)
    broken_nli = _with_outliers(nli, "AutoModelForSequenceClassification")
    stage = ZeroShotClassifier(**{**ask, "modelPath": str(broken_nli)}, engine="onnx",
                               quantize="int8", int8Check="refuse", int8SampleRows=8)
    with pytest.raises(InputError, match=r"ZeroShotClassifier with quantize int8"):
        stage.transform(texts)
    # the check compares the stage's own label: the best candidate, its score a probability
    found = int8_agreement(texts, stage)
    assert found.unit == "rows" and found.share > 0 and found.max_score_difference <= 1.0


def test_signed_int8_weights_where_the_cpu_has_vnni():
    from sparkfield.nlp.onnx_engine import export_name, signed_int8

    assert signed_int8("processor: 0\nflags\t\t: fpu sse avx2 avx512f avx512_vnni\n")
    assert signed_int8("flags : avx2 avx_vnni")
    assert not signed_int8("flags\t: fpu sse avx2 avx512f\n")
    assert export_name("sequence-classification", "int8", signed=True) == \
        "sequence-classification_int8_s8.onnx"
    assert export_name("embedding", "int8") == "model_int8.onnx"


# --- exports, params ---------------------------------------------------------------------------

def test_a_cached_export_cut_short_is_rebuilt(single, tmp_path, real_sentences):
    path = ensure_onnx(single, tmp_path, task="sequence-classification")
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) // 2])
    said: list[str] = []
    assert ensure_onnx(single, tmp_path, task="sequence-classification",
                       on_rebuild=said.append) == path
    assert len(said) == 1 and "rebuilt" in said[0] and str(path) in said[0]
    assert path.stat().st_size == len(whole)
    got = OnnxSequenceClassifier(single, "cpu", None, threads=1, path=path)
    ref = SequenceClassifier(single, "cpu", None, threads=1)
    np.testing.assert_allclose(got.classify(real_sentences[:4]).scores,
                               ref.classify(real_sentences[:4]).scores, atol=1e-4)


def test_sequence_and_embedding_exports_of_one_folder_do_not_collide(single, tmp_path):
    embedding = ensure_onnx(single, tmp_path)
    sequence = ensure_onnx(single, tmp_path, task="sequence-classification")
    assert embedding != sequence and embedding.parent == sequence.parent
    assert ensure_onnx(single, tmp_path) == embedding  # each still there, verified
    outputs = {p.name: [o.name for o in onnx_session(p, "cpu", 1).get_outputs()]
               for p in (embedding, sequence)}
    assert outputs == {"model.onnx": ["embedding"], "sequence-classification.onnx": ["logits"]}


def test_params_defaults_and_bad_settings(spark, texts, single):
    stage = TokenClassifier()
    assert (stage.getEngine(), stage.getQuantize(), stage.getInt8Check(),
            stage.getInt8MaxDisagreement(), stage.getInt8SampleRows()) == (
        "torch", "none", "warn", 0.02, 256)
    with pytest.raises(TypeError, match="engine.*torch, onnx"):
        TextClassifier(engine="tensorrt")
    with pytest.raises(TypeError, match="quantize.*none, int8"):
        stage.setQuantize("int4")
    with pytest.raises(TypeError, match="int8Check.*warn, refuse, off"):
        stage.setInt8Check("fail")
    with pytest.raises(TypeError, match="int8MaxDisagreement.*share from 0 to 1"):
        stage.setInt8MaxDisagreement(2)
    with pytest.raises(TypeError, match="int8SampleRows.*>= 1"):
        stage.setInt8SampleRows(0)
    with pytest.raises(ConfigError, match="quantize int8 needs engine onnx"):
        TextClassifier(modelPath=str(single), quantize="int8").transform(texts)
    with pytest.raises(ConfigError, match="precision fp16 needs the torch engine"):
        TextClassifier(modelPath=str(single), engine="onnx", precision="fp16").transform(texts)
    with pytest.raises(ConfigError, match="int8_agreement needs quantize int8"):
        int8_agreement(texts, TextClassifier(modelPath=str(single), engine="onnx"))
    with pytest.raises(ConfigError, match="question-answering runs on the torch engine only"):
        EngineSpec("m", "onnx", task="question-answering")
    assert EngineSpec("m", "onnx", task="zero-shot-classification").export_task == \
        "sequence-classification"


def test_save_and_load_keep_the_engine_params(single, tmp_path):
    stage = TextClassifier(modelPath=str(single), engine="onnx", quantize="int8",
                           int8Check="refuse", int8MaxDisagreement=0.1, int8SampleRows=32)
    stage.save(str(tmp_path / "stage"))
    loaded = TextClassifier.load(str(tmp_path / "stage"))
    assert loaded.extractParamMap() == stage.extractParamMap()
    assert (loaded.getEngine(), loaded.getInt8MaxDisagreement()) == ("onnx", 0.1)
