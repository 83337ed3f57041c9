"""Sentence embeddings as a Spark column: an Arrow UDF over the text column hands each Python
worker its texts in Arrow batches; the encoder (torch or ONNX Runtime) loads once per worker
process and is reused by every later task there. Inside each Arrow batch the texts are ordered
by token length before being cut into model batches (less padding), and the results are put
back in input order. A null or blank text gets a null embedding. The embeddings go back as one
float32 buffer with offsets (no Python object per row).

Each Arrow batch's first row also carries where the worker's time went on that batch
(:class:`~sparkfield.nlp.encoder.Split`: loading, Arrow in and out, tokenising, model,
pooling); :func:`embed_texts` keeps it on request and :func:`split_seconds` sums it. A side
output of the rows, not an accumulator: it works over Spark Connect, and a retried task is not
counted twice in a cached result.

One implementation serves the Spark ML stage
(:class:`~sparkfield.nlp.embedding_stage.SentenceEmbeddings`) and the embed job
(:func:`embed_texts`; the job also keeps rows without an id of its own, null, blank or repeated,
with a null embedding and a reason). It uses the DataFrame API only, so it runs over Spark
Connect too; :func:`ready` is where classic Spark and Connect differ."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.core.columns import column
from sparkfield.core.connect import is_connect
from sparkfield.core.errors import InputError
from sparkfield.core.ship import ship_dir
from sparkfield.core.workers import in_worker
from sparkfield.nlp.encoder import Split
from sparkfield.nlp.engine import EngineSpec, worker_encoder
from sparkfield.nlp.model import check_model_dir, fingerprint

MAX_REPEATED_IDS = 100_000
EMBEDDING = "embedding"  # the job's embedding column; the stage's default output column
SPLIT = "__split"  # where a worker's time went, on the first row of each Arrow batch
SPLIT_TYPE = T.StructType([T.StructField(name, T.DoubleType(), False)
                           for name in Split.parts()])
ENCODED = T.StructType([
    T.StructField(EMBEDDING, T.ArrayType(T.FloatType(), False), True),
    T.StructField("truncated", T.BooleanType(), True),
    T.StructField(SPLIT, SPLIT_TYPE, True),
])


# what a model UDF does with one Arrow batch: (its input, the worker's model, built on first
# call, and the batch's Split) -> the result's arrays, in the order of the result struct
BatchWork = Callable[[pa.Array, Callable[[], object], Split], list[pa.Array]]


def model_udf(spec: EngineSpec, work: BatchWork,
              result: T.StructType) -> Callable[[Column], Column]:
    """An Arrow UDF running ``work`` on each Arrow batch of one column with this worker's
    model for ``spec`` (:func:`worker_encoder`), its result struct ``result`` (whose last
    field is :data:`SPLIT`, filled here). Rows keep their order."""
    names = [f.name for f in result.fields]

    def run(batches: Iterator[pa.Array]) -> Iterator[pa.Array]:
        clock = time.perf_counter
        split = Split()
        batches = iter(batches)

        def model() -> object:
            t0 = clock()
            encoder = worker_encoder(spec)
            split.load += clock() - t0
            return encoder

        while True:
            t0 = clock()
            arrays = next(batches, None)
            if arrays is None:
                return
            split.arrow_in += clock() - t0
            out = with_split(work(arrays, model, split), split, names)
            split = Split()
            t0 = clock()
            yield out
            # handing the batch back to Spark, counted with the next batch (the last
            # batch's hand-back comes after its split was sent: not counted)
            split.arrow_out += clock() - t0

    return F.arrow_udf(in_worker(run), result)


def embedding_udf(spec: EngineSpec, batch_size: int = 64,
                  bucket: bool = True) -> Callable[[Column], Column]:
    """An Arrow UDF: a string column -> struct<embedding array<float>, truncated boolean,
    __split> (:data:`ENCODED`); embedding and truncated are null for a null text. Rows keep
    their order."""

    def encode(texts: pa.Array, model: Callable[[], object], split: Split) -> list[pa.Array]:
        clock = time.perf_counter
        t0 = clock()
        present = np.flatnonzero(texts.is_valid().to_numpy(zero_copy_only=False))
        strings = texts.drop_null().to_pylist()
        split.arrow_in += clock() - t0
        vectors, cut = np.zeros((0, 0), np.float32), np.zeros(0, bool)
        if len(present):
            vectors, cut = model().encode(strings, batch_size, bucket, split)
        t0 = clock()
        result = encoded_array(len(texts), present, vectors, cut)
        split.arrow_out += clock() - t0
        return result

    return model_udf(spec, encode, ENCODED)


_EMBEDDING_ARROW = pa.list_(pa.field("element", pa.float32(), nullable=False))


def encoded_array(n: int, present: np.ndarray, vectors: np.ndarray,
                  cut: np.ndarray) -> list[pa.Array]:
    """The embedding and truncated arrays of ``n`` rows: ``vectors[k]`` and ``cut[k]`` at row
    ``present[k]``, null elsewhere. The vectors are one float32 buffer with list offsets."""
    missing = np.ones(n, dtype=bool)
    missing[present] = False
    dim = vectors.shape[1] if vectors.ndim == 2 else 0
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.where(missing, 0, dim), out=offsets[1:])
    values = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1))
    embedding = pa.ListArray.from_arrays(pa.array(offsets), values, type=_EMBEDDING_ARROW,
                                         mask=pa.array(missing))
    truncated = np.zeros(n, dtype=bool)
    truncated[present] = cut
    return [embedding, pa.array(truncated, mask=missing)]


def with_split(arrays: list[pa.Array], split: Split,
               names: list[str] | None = None) -> pa.StructArray:
    """A struct of ``arrays`` (by default :data:`ENCODED`'s embedding, truncated) and
    ``split`` on the first row, its fields ``names`` (the last one the split's)."""
    n = len(arrays[0])
    later = np.arange(n) > 0
    times = pa.StructArray.from_arrays(
        [pa.array(np.full(n, v)) for v in split.values()], names=list(Split.parts()),
        mask=pa.array(later))
    return pa.StructArray.from_arrays(
        [*arrays, times], names=names or [EMBEDDING, "truncated", SPLIT])


def split_seconds(rows: DataFrame, column: str = SPLIT) -> dict[str, float]:
    """Task seconds per part (:class:`~sparkfield.nlp.encoder.Split`) summed over ``rows``'
    ``column`` (one Spark job)."""
    sums = rows.agg(*(F.sum(F.col(column)[name]).alias(name) for name in Split.parts())).first()
    return {name: round(float(sums[name] or 0.0), 3) for name in Split.parts()}


def blank(text: Column) -> Column:
    """True for a text of spaces only (Spark's ``trim``), null for a null text: such rows get
    no embedding, in the job and in the stage alike."""
    return F.trim(text) == ""


def embedding_column(text: Column, spec: EngineSpec, batch_size: int = 64,
                     bucket: bool = True) -> Column:
    """struct<embedding, truncated> of any text column; null fields for a null or blank
    text (:func:`blank`)."""
    text = text.cast("string")
    return embedding_udf(spec, batch_size, bucket)(F.when(~blank(text), text))


def embed_texts(df: DataFrame, spec: EngineSpec, batch_size: int = 64,
                bucket: bool = True, split: bool = False) -> DataFrame:
    """``df`` (id string, text string, every text non-empty) -> id, text, embedding,
    truncated (and :data:`SPLIT` when ``split``). Row order inside each partition is kept."""
    encoded = embedding_udf(spec, batch_size, bucket)(F.col("text"))
    extra = [f"__encoded.{SPLIT}"] if split else []
    return df.select(F.col("id").cast("string").alias("id"),
                     F.col("text").cast("string").alias("text")).select(
        "id", "text", encoded.alias("__encoded")).select(
        "id", "text", f"__encoded.{EMBEDDING}", "__encoded.truncated", *extra)


def ready(spark: SparkSession, spec: EngineSpec,
          on_rebuild: Callable[[str], None] | None = None) -> EngineSpec:
    """``spec`` made ready for the executors.

    Classic Spark: the model folder checked here (``None``: the bundled model), an ONNX export
    made (or verified) here once, then the folders shipped to executors off this machine;
    executors load the driver's export and never export themselves. Spark Connect: nothing is
    checked or shipped here (a Connect client has no SparkContext, and its folders need not be
    the server's): the server's executors read ``spec.folder`` at its path (``None``: the
    bundled model of their own environment), check it, and export to ONNX there when no
    export is cached."""
    if is_connect(spark):
        return spec
    folder = check_model_dir(spec.folder)
    spec = dataclasses.replace(spec, folder=str(folder), version=fingerprint(folder))
    if spec.engine == "onnx" and spec.onnx_file is None:
        spec = exported(spec, on_rebuild)
    for path in spec.shipped_folders():
        ship_dir(spark, path, spec.version)  # executors off this machine get it as an archive
    return spec


def exported(spec: EngineSpec, on_rebuild: Callable[[str], None] | None = None) -> EngineSpec:
    """``spec`` (engine onnx, a checked folder) with its ONNX export, made or verified here."""
    from sparkfield.nlp.onnx_engine import ensure_onnx

    onnx_file = ensure_onnx(Path(str(spec.folder)), spec.onnx_dir, spec.quantize,
                            on_rebuild=on_rebuild, task=spec.export_task)
    return dataclasses.replace(spec, onnx_file=str(onnx_file))


def embed(df: DataFrame, text_col: str, id_col: str, folder: Path, device: str = "auto",
          batch_size: int = 64, max_tokens: int = 256, half: bool = False,
          threads: int | None = None, engine: str = "torch", quantize: str = "none",
          onnx_dir: str | None = None, bucket: bool = True, split: bool = False,
          precision: str = "fp32") -> DataFrame:
    """id, text, embedding (array<float>), truncated, reason — one row per input row (and
    :data:`SPLIT` when ``split``: null on rejected rows)."""
    spec = EngineSpec(str(folder), engine, device, max_tokens, half, threads, quantize,
                      onnx_dir, precision=precision)
    good, bad = split_texts(df, text_col, id_col)
    embedded = embed_texts(good, spec, batch_size, bucket, split).withColumn(
        "reason", F.lit(None).cast("string"))
    if split:
        bad = bad.withColumn(SPLIT, F.lit(None).cast(SPLIT_TYPE))
    return embedded.unionByName(bad)


def split_texts(df: DataFrame, text_col: str, id_col: str) -> tuple[DataFrame, DataFrame]:
    """(id, text of rows to embed; id, text, null embedding, truncated, reason of the rest).

    Rows whose id is null, blank or on more than one row are not embedded: later steps join
    on the id (neighbour texts, topic words), and an ambiguous id would join wrong texts."""
    text = column(text_col).cast("string")
    base = df.select(column(id_col).cast("string").alias("id"), text.alias("text"))
    repeated = repeated_ids(base, id_col)
    if repeated is None:
        base = base.withColumn("__repeated", F.lit(False))
    else:  # a broadcast join keeps the rows' partitions (a shuffle could merge them)
        base = base.join(F.broadcast(repeated), "id", "left")
    reason = (F.when(F.col("id").isNull(), "null id")
              .when(blank(F.col("id")), "empty id")
              .when(F.coalesce("__repeated", F.lit(False)), "duplicate id")
              .when(F.col("text").isNull(), "null text")
              .when(blank(F.col("text")), "empty text"))
    base = base.select("id", "text", reason.alias("reason"))
    good = base.where(F.col("reason").isNull()).select("id", "text")
    bad = base.where(F.col("reason").isNotNull()).select(
        "id", "text", F.lit(None).cast("array<float>").alias("embedding"),
        F.lit(None).cast("boolean").alias("truncated"), "reason")
    return good, bad


def repeated_ids(base: DataFrame, id_col: str) -> DataFrame | None:
    """id, __repeated (true) of the ids on more than one row of ``base``, or None when every
    id is unique. Runs a Spark job. Bad input beyond ``MAX_REPEATED_IDS`` such ids: the id
    column does not name texts (and the set is too large to broadcast)."""
    found = (base.where(F.col("id").isNotNull()).groupBy("id").count()
             .where(F.col("count") > 1).select("id", F.lit(True).alias("__repeated")))
    ids = [r["id"] for r in found.select("id").limit(MAX_REPEATED_IDS + 1).collect()]
    if not ids:
        return None
    if len(ids) > MAX_REPEATED_IDS:
        name = "doc_id:sentence_idx" if id_col.startswith("__") else repr(id_col)
        raise InputError(f"id column {name} is not unique: more than "
                         f"{MAX_REPEATED_IDS:,} ids are on several rows (pass an --id-col "
                         "that names one text per row, or none for row ids)")
    # collected once: the join below then does not aggregate the input a second time
    return base.sparkSession.createDataFrame([(i, True) for i in ids],
                                             "id string, __repeated boolean")


def worker_threads(spark: SparkSession) -> int:
    """Model threads per Python worker: the cores Spark reserves for each task (read from the
    session's conf, which a Spark Connect client can read too)."""
    return max(1, int(float(spark.conf.get("spark.task.cpus", "1") or "1")))
