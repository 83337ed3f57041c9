"""The Spark ML stage ``SentenceEmbeddings`` against the embed job and the model run directly, in
a Pipeline beside Spark ML's own stages, saved and loaded. The DataFrame API only, and the
``spark`` fixture: this file also runs over Spark Connect (tests/test_connect.py)."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

import numpy as np
import pytest
from pyspark.ml import Pipeline, PipelineModel
from pyspark.ml.clustering import KMeans
from pyspark.ml.feature import BucketedRandomProjectionLSH
from pyspark.ml.linalg import VectorUDT
from pyspark.ml.util import DefaultParamsReader
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sparkfield.core.connect import is_connect
from sparkfield.core.errors import ColumnError, ConfigError, InputError
from sparkfield.nlp import SentenceEmbeddings
from sparkfield.nlp.embed import worker_threads
from sparkfield.nlp.embedding_stage import JOB_KEYS
from sparkfield.nlp.job import compute, derive, prepare
from sparkfield.nlp.model import ModelError, check_model_dir
from sparkfield.nlp.params import EMBED
from sparkfield.text.bag_of_words.normalise import sentences
from sparkfield.text.bag_of_words.parse import page_text

N = 30  # real sentences; two rows more without text


@pytest.fixture(scope="module")
def real_sentences(wiki_pages) -> list[str]:
    html = (wiki_pages / "Natural_language_processing.html").read_bytes()
    return sentences(page_text(html.decode("utf-8"))[1])[:N]


@pytest.fixture(scope="module")
def texts(spark, real_sentences) -> DataFrame:
    rows = [(f"s{i:02d}", t) for i, t in enumerate(real_sentences)]
    return spark.createDataFrame(rows + [("null", None), ("blank", "   ")],
                                 "id string, sentence string").repartition(2)


@pytest.fixture(scope="module")
def with_text(texts) -> DataFrame:
    return texts.where(F.col("sentence").isNotNull() & (F.trim("sentence") != ""))


def _vectors(df: DataFrame, col: str = "embedding") -> dict[str, np.ndarray | None]:
    return {r["id"]: None if r[col] is None else np.asarray(r[col], dtype=np.float64)
            for r in df.select("id", col).collect()}


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def _stage(**params) -> SentenceEmbeddings:
    return SentenceEmbeddings(inputCol="sentence", device="cpu", batchSize=8, **params)


def test_defaults_and_checks_are_the_embed_jobs():
    stage = SentenceEmbeddings()
    for name, key in JOB_KEYS.items():
        assert stage.getOrDefault(name) == EMBED.by_key[key].default, name
    assert stage.getOutputCol() == "embedding" and stage.getModelPath() is None
    stage.setEngine("onnx").setQuantize("int8").setMaxTokens(64).setBucket(False)
    assert (stage.getEngine(), stage.getQuantize(), stage.getMaxTokens(),
            stage.getBucket()) == ("onnx", "int8", 64, False)
    with pytest.raises(TypeError, match="engine.*must be one of torch, onnx"):
        SentenceEmbeddings(engine="sparknlp")  # a job engine, not a stage one
    with pytest.raises(TypeError, match="batchSize.*>= 1"):
        stage.setBatchSize(0)
    with pytest.raises(TypeError, match="device.*not valid"):
        stage.setDevice("tpu")
    with pytest.raises(TypeError, match="quantize.*int8"):
        stage.setQuantize("int4")


def test_vectors_equal_the_embed_jobs_and_the_model_run_directly(spark, texts,
                                                                 real_sentences):
    from sentence_transformers import SentenceTransformer

    out = _stage().transform(texts)
    assert out.columns == ["id", "sentence", "embedding"]
    assert isinstance(out.schema["embedding"].dataType, VectorUDT)
    got = _vectors(out)
    assert len(got) == N + 2 and got["null"] is None and got["blank"] is None

    p = EMBED.parse({"input": "inline", "output": None, "id_col": "id", "device": "cpu",
                      "batch_size": 8, "neighbors": {"enabled": False},
                      "topics": {"enabled": False}, "attention": {"enabled": False}})
    d = derive(p, seed=42, task_cpus=worker_threads(spark))
    with ExitStack() as stack:
        c = compute(spark, p, d, texts, prepare(spark, p, d, check_model_dir(None)), stack)
        job = {r["id"]: r for r in c.embeddings.collect()}
    # rows without text: the job's rejects, the stage's null vectors
    assert (job["null"]["reason"], job["blank"]["reason"]) == ("null text", "empty text")
    assert job["null"]["embedding"] is None and job["blank"]["embedding"] is None
    ids = [f"s{i:02d}" for i in range(N)]
    assert min(_cos(got[i], np.asarray(job[i]["embedding"])) for i in ids) >= 0.9999

    direct = SentenceTransformer(str(check_model_dir(None)), device="cpu").encode(
        real_sentences, normalize_embeddings=True)
    assert min(_cos(got[i], direct[k]) for k, i in enumerate(ids)) >= 0.999


@pytest.mark.parametrize("native", [True, False])
def test_bf16_embeds_on_the_cpu_where_it_is_native(real_sentences, monkeypatch, native):
    """precision bf16 on a CPU that multiplies it natively: the model runs in bfloat16, each
    vector the model's run directly in bfloat16 (mean-pooled, normalised) and near float32's;
    elsewhere float32's exactly. The flag is set both ways: torch computes bfloat16 on any
    CPU."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    from sparkfield.nlp import encoder

    monkeypatch.setattr(encoder, "native_bf16", lambda: native)
    folder = check_model_dir(None)
    fp32, _ = encoder.Encoder(folder, "cpu", 256).encode(real_sentences, 1)
    model = encoder.Encoder(folder, "cpu", 256, precision="bf16")
    assert model.model.dtype == (torch.bfloat16 if native else torch.float32)
    got, _ = model.encode(real_sentences, 1)
    tok = AutoTokenizer.from_pretrained(str(folder))
    direct = AutoModel.from_pretrained(str(folder)).eval().to(torch.bfloat16)
    with torch.inference_mode():
        hidden = [direct(**tok([t], return_tensors="pt")).last_hidden_state.float()[0]
                  for t in real_sentences]
    bf16 = np.stack([torch.nn.functional.normalize(h.mean(0), dim=0).numpy() for h in hidden])
    cos = [_cos(got[i], fp32[i]) for i in range(len(real_sentences))]
    if native:
        np.testing.assert_allclose(got, bf16, atol=1e-5, rtol=0)
        assert 0.99 < min(cos) < 0.99999  # near float32, not float32
    else:
        np.testing.assert_array_equal(got, fp32)


def test_the_stage_embeds_in_bf16_where_the_cpu_has_it(with_text):
    from sparkfield.nlp.device import native_bf16

    plain, bf16 = (_vectors(_stage(**p).transform(with_text)) for p in ({}, {"precision": "bf16"}))
    assert SentenceEmbeddings(precision="bf16").getPrecision() == "bf16"
    worst = min(_cos(plain[i], bf16[i]) for i in plain)
    assert 0.99 < worst < 0.99999 if native_bf16() else worst == pytest.approx(1.0, abs=1e-12)


def test_in_a_pipeline_beside_spark_ml_stages(with_text):
    pipeline = Pipeline(stages=[
        _stage(outputCol="features"),
        BucketedRandomProjectionLSH(inputCol="features", outputCol="hashes", bucketLength=1.0,
                                    numHashTables=2, seed=7),
        KMeans(k=3, seed=1, featuresCol="features", predictionCol="topic"),
    ])
    model = pipeline.fit(with_text)
    out = model.transform(with_text).select("id", "features", "hashes", "topic").collect()
    assert len(out) == N and {r["topic"] for r in out} <= {0, 1, 2}
    assert all(len(r["hashes"]) == 2 and r["features"].size == 384 for r in out)
    assert len(model.stages[2].clusterCenters()) == 3


def test_save_and_load_keep_params_and_vectors(spark, with_text, tmp_path):
    stage = _stage(outputCol="vec", maxTokens=64, bucket=False)
    path = str(tmp_path / "stage")
    stage.save(path)
    with pytest.raises(Exception, match="already exists"):
        stage.save(path)
    stage.setBatchSize(5)
    stage.write().overwrite().save(path)
    loaded = SentenceEmbeddings.load(path)
    assert loaded.uid == stage.uid
    params = {p.name: v for p, v in stage.extractParamMap().items()}
    assert {p.name: v for p, v in loaded.extractParamMap().items()} == params
    assert loaded.getBatchSize() == 5 and loaded.getModelPath() is None
    # pyspark's own reader takes the same layout
    assert DefaultParamsReader(SentenceEmbeddings).load(path).getMaxTokens() == 64

    before, after = _vectors(stage.transform(with_text), "vec"), _vectors(
        loaded.transform(with_text), "vec")
    assert before.keys() == after.keys()
    assert all(np.allclose(before[i], after[i], atol=1e-6) for i in before)


def test_a_saved_pipeline_model_loads_with_the_stage(with_text, tmp_path):
    model = Pipeline(stages=[_stage(outputCol="vec"),
                             KMeans(k=2, seed=1, featuresCol="vec")]).fit(with_text)
    path = str(tmp_path / "pipeline")
    model.write().overwrite().save(path)
    loaded = PipelineModel.load(path)
    assert isinstance(loaded.stages[0], SentenceEmbeddings)
    assert loaded.stages[0].getOutputCol() == "vec"

    def topics(m: PipelineModel) -> dict[str, int]:
        return {r["id"]: r["prediction"] for r in m.transform(with_text).collect()}

    assert topics(loaded) == topics(model)


def test_bad_settings_say_what_is_wrong(spark, texts, tmp_path):
    with pytest.raises(InputError, match="no column 'body'") as error:
        SentenceEmbeddings(inputCol="body").transform(texts)
    assert isinstance(error.value, ColumnError)
    with pytest.raises(ConfigError, match="'id' already exists"):
        _stage(outputCol="id").transform(texts)
    with pytest.raises(ConfigError, match="quantize int8 needs engine onnx"):
        _stage(quantize="int8").transform(texts)
    missing = _stage(modelPath=str(tmp_path / "nope"))
    if is_connect(spark):  # the server's executors check the folder
        with pytest.raises(Exception, match="ModelError: model folder not found"):
            missing.transform(texts).collect()
    else:  # the driver checks it before any Spark job
        with pytest.raises(ModelError, match="model folder not found"):
            missing.transform(texts)


def test_onnx_engine_equals_torch(spark, tmp_path: Path, real_sentences):
    few = spark.createDataFrame([(f"s{i}", t) for i, t in enumerate(real_sentences[:8])],
                                "id string, sentence string").coalesce(1)
    torch_ = _vectors(_stage().transform(few))
    onnx = _vectors(_stage(engine="onnx", onnxDir=str(tmp_path)).transform(few))
    assert min(_cos(torch_[i], onnx[i]) for i in torch_) >= 0.9999


def test_a_text_column_named_with_a_dot_and_a_backtick(with_text):
    plain = _vectors(_stage().transform(with_text.limit(3)))
    odd = with_text.limit(3).withColumnRenamed("sentence", "page.`text`")
    got = _vectors(SentenceEmbeddings(inputCol="page.`text`", device="cpu",
                                      batchSize=8).transform(odd))
    assert got.keys() == plain.keys() and len(got) == 3
    assert all(np.allclose(got[k], plain[k], atol=1e-6) for k in plain)
