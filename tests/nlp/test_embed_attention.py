"""The embed job's attention maps: computed by a Python worker, never in the driver process,
and equal to the encoder run directly in the test process (the oracle)."""

from __future__ import annotations

from contextlib import ExitStack

import numpy as np
import torch
from pyspark.sql import types as T

import sparkfield.nlp.encoder as encoder_module
from sparkfield.nlp import job
from sparkfield.nlp.embed import worker_threads
from sparkfield.nlp.encoder import Encoder
from sparkfield.nlp.model import check_model_dir
from sparkfield.nlp.params import EMBED

LONG = " ".join(["Natural language processing lets computers read and write text."] * 12)
TEXTS = [
    ("c", "Stock markets fell sharply on Monday."),
    ("a", LONG),  # over 64 tokens: the maps' cap truncates it
    ("d", "Rain is expected tomorrow."),
    ("b", "Cats chase mice in the garden."),
    ("0", None),  # no embedding: never drawn, though first by id
]


def _direct(texts: list[str], threads: int) -> list[tuple[list[str], np.ndarray]]:
    """Encoder.attentions in this process, with the workers' thread count (the last bits of
    the weights depend on it); torch's thread count is restored after."""
    before = torch.get_num_threads()
    try:
        enc = Encoder(check_model_dir(None), "cpu", job.ATTENTION_MAX_TOKENS,
                      threads=threads, attention=True)
        return [enc.attentions(t) for t in texts]
    finally:
        torch.set_num_threads(before)


def test_attention_maps_come_from_a_worker_and_equal_the_encoder(spark, monkeypatch):
    texts = spark.createDataFrame(TEXTS, T.StructType([
        T.StructField("id", T.StringType()), T.StructField("sentence", T.StringType())
    ])).repartition(2)
    p = EMBED.parse({"input": "inline", "output": None, "id_col": "id", "device": "cpu",
                      "neighbors": {"enabled": False}, "topics": {"enabled": False},
                      "attention": {"sentences": 3}})
    d = job.derive(p, seed=42, task_cpus=worker_threads(spark))
    inputs = job.prepare(spark, p, d, check_model_dir(None))
    want = _direct([dict(TEXTS)[i] for i in ("a", "b", "c")], d.threads)

    def no_model_here(*args, **kwargs):
        raise AssertionError("the attention model was loaded in the driver process")

    # the driver's Encoder only: the Python workers are processes of their own
    monkeypatch.setattr(encoder_module, "Encoder", no_model_here)
    with ExitStack() as stack:
        c = job.compute(spark, p, d, texts, inputs, stack)

    maps = c.extras["attention"]
    assert [m[0] for m in maps] == ["a", "b", "c"]
    assert c.attention_texts == [dict(TEXTS)[i] for i in ("a", "b", "c")]
    assert len(maps[0][1]) == job.ATTENTION_MAX_TOKENS  # truncated at the cap
    for (_, tokens, att), (want_tokens, want_att) in zip(maps, want, strict=True):
        assert tokens == want_tokens
        assert att.dtype == np.float32 and att.shape == want_att.shape
        assert att.shape[:2] == (6, 12) and att.shape[2] == att.shape[3] == len(tokens)
        np.testing.assert_array_equal(att, want_att)  # the same weights, bit for bit
    assert not job._ATTENTION_ENCODERS  # nothing loaded in this process


def test_no_attention_maps_when_disabled(spark):
    p = EMBED.parse({"input": "inline", "output": None, "attention": {"enabled": False},
                      "neighbors": {"enabled": False}, "topics": {"enabled": False}})
    d = job.derive(p, seed=42, task_cpus=1)
    inputs = job.prepare(spark, p, d, check_model_dir(None))
    assert inputs.attention is None


def test_attention_maps_of_no_rows_are_empty(spark):
    spec = job.EngineSpec(str(check_model_dir(None)), "torch", "cpu", 8, threads=1)
    assert job.attention_maps(spark.createDataFrame([], "id string, text string"), spec) == []
