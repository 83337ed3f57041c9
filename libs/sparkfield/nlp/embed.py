"""Sentence embeddings as a Spark stage: ``predict_batch_udf`` loads the encoder once per Python
worker and feeds it fixed-size batches; rows without text keep a null embedding and a reason."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from pyspark.ml.functions import predict_batch_udf
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.nlp.device import choose_device, task_gpu_addresses

EMBED_SCHEMA = T.StructType([
    T.StructField("embedding", T.ArrayType(T.FloatType(), False), True),
    T.StructField("truncated", T.ByteType(), True),  # predict_batch_udf has no boolean
])


def make_predict_fn(folder: str, device: str, max_tokens: int, half: bool,
                    threads: int | None):
    """Called once per Python worker by predict_batch_udf: load the model there, not on the
    driver, and return the batch function."""

    def load():
        import torch

        from sparkfield.nlp.encoder import Encoder

        chosen = choose_device(device, task_gpu_addresses(), torch.cuda.is_available())
        encoder = Encoder(Path(folder), chosen, max_tokens, half, threads)

        def predict(texts: np.ndarray) -> dict[str, np.ndarray]:
            emb, truncated = encoder.encode([str(t) for t in texts])
            return {"embedding": emb, "truncated": truncated.astype(np.int8)}

        return predict

    return load


def embed(df: DataFrame, text_col: str, id_col: str, folder: Path, device: str = "auto",
          batch_size: int = 64, max_tokens: int = 256, half: bool = False,
          threads: int | None = None) -> DataFrame:
    """id, text, embedding (array<float>), truncated, reason — one row per input row."""
    text = F.col(text_col).cast("string")
    has_text = text.isNotNull() & (F.trim(text) != "")
    base = df.select(F.col(id_col).alias("id"), text.alias("text"), has_text.alias("__ok"))
    encode = predict_batch_udf(
        make_predict_fn(str(folder), device, max_tokens, half, threads),
        return_type=EMBED_SCHEMA, batch_size=batch_size)
    good = base.where("__ok").select("id", "text", encode("text").alias("e")).select(
        "id", "text", "e.embedding", F.col("e.truncated").cast("boolean").alias("truncated"),
        F.lit(None).cast("string").alias("reason"))
    bad = base.where(~F.col("__ok")).select(
        "id", "text", F.lit(None).cast("array<float>").alias("embedding"),
        F.lit(None).cast("boolean").alias("truncated"),
        F.when(F.col("text").isNull(), "null text").otherwise("empty text").alias("reason"))
    return good.unionByName(bad)


def worker_threads(spark) -> int:
    """Torch threads per Python worker: the cores Spark reserves for each task."""
    return max(1, int(float(spark.sparkContext.getConf().get("spark.task.cpus", "1"))))
