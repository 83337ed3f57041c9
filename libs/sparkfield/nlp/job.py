"""The embed job: texts -> sentence embeddings, then neighbours, topics and attention maps.

:func:`run` loads and prepares (the texts; the model made ready for the workers: an ONNX export
made on the driver, then the folders shipped; the embedding store's rows; the topic words),
calls :func:`compute` and writes (the store's new rows, the output). :func:`compute` takes
DataFrames and plain values and returns DataFrames and counts: it writes no files, leaves the
SparkContext and the run report alone.

Why one module: the embed job's run with its optional outputs (neighbours, topics, attention
maps), each a few lines of I/O and report entries around a building block."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.core.conf import Config
from sparkfield.core.failures import raises_input_errors
from sparkfield.core.io import AtomicOutput, optional_output, require_path
from sparkfield.core.practices import cached, cached_rows, sample
from sparkfield.core.report import RunReport, Stats
from sparkfield.core.spark_ui import publish
from sparkfield.core.stopwords import english_stopwords
from sparkfield.core.workers import in_worker
from sparkfield.nlp.attention import attention_grid_png
from sparkfield.nlp.cache import EmbeddingStore, lookup
from sparkfield.nlp.embed import (
    SPLIT,
    EngineSpec,
    embed_texts,
    exported,
    ready,
    split_seconds,
    split_texts,
    worker_threads,
)
from sparkfield.nlp.encoder import Split
from sparkfield.nlp.model import check_model_dir, embedding_size, fingerprint
from sparkfield.nlp.neighbors import approx_neighbors, exact_neighbors
from sparkfield.nlp.params import (
    EMBED,
    EmbedAttentionParams,
    EmbedNeighborsParams,
    EmbedParams,
    EmbedTopicsParams,
    check_combination,
)
from sparkfield.nlp.tables import ROW_ID, read_texts
from sparkfield.nlp.topics import topics

log = logging.getLogger("sparkfield.nlp")
ATTENTION_MAX_TOKENS = 64  # attention maps cover at most this many tokens of a text


@dataclass(frozen=True)
class Derived:
    """What a run derives from its parameters and conf (the parameters themselves, with their
    defaults, come from the schema alone)."""

    id_col: str  # the column naming each text
    seed: int  # practices.sample_seed: the sample and KMeans
    threads: int  # model threads per Python worker


def derive(p: EmbedParams, seed: int, task_cpus: int) -> Derived:
    """``task_cpus``: the cores Spark reserves per task (:func:`worker_threads`)."""
    return Derived(id_col=p.id_col or ROW_ID, seed=seed, threads=p.torch_threads or task_cpus)


@dataclass
class EmbedInputs:
    """What :func:`prepare` makes ready on the driver before :func:`compute`."""

    folder: Path  # the checked model folder, as the driver sees it
    dimensions: int
    spec: EngineSpec | None = None  # what each worker builds; None: the sparknlp engine
    store: EmbeddingStore | None = None  # where run adds the texts embedded now
    stored: DataFrame | None = None  # the store's rows for this model and engine
    words: DataFrame | None = None  # id, tokens: the words that name topics
    # what the worker computing the attention maps builds (the model folder as the executors
    # read it); None: no attention maps
    attention: EngineSpec | None = None
    stats: Stats = field(default_factory=Stats)  # the ONNX export step and its notes


@dataclass
class EmbedResult:
    embeddings: DataFrame
    report: RunReport
    output: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)


@dataclass
class EmbedComputed:
    """What :func:`compute` returns. ``embeddings`` (``embedded``, cached) and ``new_rows``
    stay cached until the ``stack`` given to compute closes, so the writers read them from
    the cache."""

    embedded: DataFrame
    embeddings: DataFrame
    stats: Stats
    new_rows: DataFrame | None = None  # text_hash, embedding, truncated: new to the store
    extras: dict[str, Any] = field(default_factory=dict)  # neighbors, topics, attention
    attention_texts: list[str] = field(default_factory=list)  # the texts of the maps


@raises_input_errors
def run(spark: SparkSession, cfg: Config) -> EmbedResult:
    """Load, prepare, compute, write. What the executors raise for the user to fix (a device
    they lack, bad input) comes back as itself: one ``error:`` line on the command line."""
    p = EMBED.parse(cfg.job)
    check_combination(p.input, p.engine, p.quantize, p.cache_dir)
    folder = check_model_dir(p.model)  # before any Spark work
    d = derive(p, cfg.practices.sample_seed, worker_threads(spark))
    report = RunReport("embed", params={**asdict(p), "seed": d.seed})
    with optional_output(spark, p.output) as out, ExitStack() as stack:
        texts = sample(read_texts(spark, p.input, p.text_col, p.id_col), p.sample, d.seed)
        inputs = prepare(spark, p, d, folder)
        report.merge(inputs.stats)
        c = compute(spark, p, d, texts, inputs, stack)
        report.merge(c.stats)
        _save(out, c, inputs.store, report)
        publish(spark, out, report, cfg.practices.skew_ratio_threshold, p.max_reject_fraction)
    log.info(report.summary())
    return EmbedResult(embeddings=c.embedded, report=report, output=p.output, extras=c.extras)


# --- load and prepare (driver) ---------------------------------------------------------------

def prepare(spark: SparkSession, p: EmbedParams, d: Derived, folder: Path) -> EmbedInputs:
    """Everything compute reads besides the texts, made ready on the driver: the engine (an
    ONNX export made here, then the folders shipped to the executors), the attention maps'
    model, the embedding store's rows and the topic words."""
    inputs = EmbedInputs(folder, embedding_size(folder), words=topic_words(spark, p.topics))
    if p.engine == "sparknlp":
        inputs.attention = _attention_spec(spark, p, d, folder, None)
        return inputs
    inputs.spec = _engine(spark, p, d, folder, inputs.stats)
    inputs.attention = _attention_spec(spark, p, d, folder, inputs.spec)
    if p.cache_dir:
        model_id = f"{folder.name}@{fingerprint(folder)}/max_tokens={p.max_tokens}"
        inputs.store = EmbeddingStore(spark, p.cache_dir, model_id, inputs.spec.engine_id)
        inputs.stored = inputs.store.read()
    return inputs


def _engine(spark: SparkSession, p: EmbedParams, d: Derived, folder: Path,
            stats: Stats) -> EngineSpec:
    """The engine each worker builds, made ready as the Spark ML stage makes it
    (:func:`~sparkfield.nlp.embed.ready`): an ONNX export made (or verified) here, once, its
    step timed, before any folder is shipped."""
    spec = EngineSpec(str(folder), p.engine, p.device, p.max_tokens, p.half, d.threads,
                      p.quantize, p.onnx_dir, precision=p.precision)
    if p.engine == "onnx":
        with stats.step("onnx export"):  # a no-op when a verified export is there
            spec = exported(spec, on_rebuild=stats.note)
    return ready(spark, spec)


def _attention_spec(spark: SparkSession, p: EmbedParams, d: Derived, folder: Path,
                    engine: EngineSpec | None) -> EngineSpec | None:
    """The attention maps' model (torch, eager attention, on the CPU) for the executors: the
    embedding engine's folder, already shipped, or (engine sparknlp) ``folder`` shipped now."""
    if not p.attention.enabled:
        return None
    spec = EngineSpec(engine.folder if engine else str(folder), "torch", "cpu",
                      min(p.max_tokens, ATTENTION_MAX_TOKENS), threads=d.threads,
                      version=engine.version if engine else None)
    return spec if engine else ready(spark, spec)


def topic_words(spark: SparkSession, tp: EmbedTopicsParams) -> DataFrame | None:
    """id (doc_id:sentence_idx), tokens less the stopwords, of the bag_of_words sentences in
    ``topics.words_from``; None when topics or their words are off, or the file lacks those
    columns."""
    if not (tp.enabled and tp.words_from):
        return None
    require_path(spark, tp.words_from, "topics.words_from")
    w = spark.read.parquet(tp.words_from)
    if not {"doc_id", "sentence_idx", "tokens"} <= set(w.columns):
        return None
    stop = set(tp.stopwords)
    if tp.english_stopwords:
        stop |= set(english_stopwords())
    return w.select(F.concat_ws(":", "doc_id", "sentence_idx").alias("id"),
                    F.filter("tokens", lambda t: ~t.isin(list(stop))).alias("tokens"))


# --- compute ---------------------------------------------------------------------------------

def compute(spark: SparkSession, p: EmbedParams, d: Derived, texts: DataFrame,
            inputs: EmbedInputs, stack: ExitStack) -> EmbedComputed:
    """Texts in; every row with its embedding (or the reason it has none), the neighbours,
    topics and attention maps, the store's new rows and what was counted out."""
    stats = Stats()
    e = _embed(spark, p, d.id_col, texts, inputs, stats, stack)
    if e.embedded_now is None:  # the model runs while the rows are cached
        with stats.step("embed"):
            emb = stack.enter_context(cached(e.rows, "embeddings", report=stats))
    else:
        emb = stack.enter_context(cached(e.rows, "embeddings", report=stats))
    n = _count(emb, e.embedded_now, inputs.dimensions, stats, e.split)
    # the timings stay out of the results (a projection of the cached rows reads the cache)
    rows, emb = (e.rows.drop(SPLIT), emb.drop(SPLIT)) if SPLIT in emb.columns else (e.rows, emb)
    c = EmbedComputed(embedded=rows, embeddings=emb, stats=stats, new_rows=e.new_rows)
    _neighbors(c, p.neighbors, n)
    _topics(c, p.topics, inputs.words, d.seed, n)
    _attention(c, p.attention, inputs.attention, n)
    return c


@dataclass
class _Embedded:
    rows: DataFrame  # id, text, embedding, truncated, reason (and SPLIT): one row per input row
    embedded_now: int | None = None  # texts the model embedded; None: known once rows cache
    new_rows: DataFrame | None = None  # text_hash, embedding, truncated: new to the store
    # the cached frame whose SPLIT column says where the workers' time went (None: in rows,
    # or no such column with the sparknlp engine)
    split: DataFrame | None = None


def _no_reason() -> Column:
    return F.lit(None).cast("string").alias("reason")


def _embed(spark: SparkSession, p: EmbedParams, id_col: str, texts: DataFrame,
           inputs: EmbedInputs, stats: Stats, stack: ExitStack) -> _Embedded:
    """Every row with its embedding or reject reason, by the job's engine."""
    if p.engine == "sparknlp":
        from sparkfield.nlp.sparknlp import embed_sparknlp

        return _Embedded(embed_sparknlp(spark, texts, p.text_col, id_col, str(inputs.folder),
                                        p.annotator))
    good, bad = split_texts(texts, p.text_col, id_col)
    if inputs.stored is None:
        rows = embed_texts(good, inputs.spec, p.batch_size, p.bucket, split=True)
        bad = bad.select("*", F.lit(None).cast(rows.schema[SPLIT].dataType).alias(SPLIT))
        return _Embedded(rows.select("*", _no_reason()).unionByName(bad))
    return _embed_unseen(good, bad, p, inputs, stats, stack)


def _embed_unseen(good: DataFrame, bad: DataFrame, p: EmbedParams, inputs: EmbedInputs,
                  stats: Stats, stack: ExitStack) -> _Embedded:
    """With a content store: texts found there are not embedded again; distinct unseen texts
    are embedded once (inside the "embed" step) and joined back."""
    looked = stack.enter_context(cached(lookup(good, inputs.stored), "store lookup",
                                        report=stats))
    hits = looked.where(F.col("embedding").isNotNull())
    misses = looked.where(F.col("embedding").isNull()).select("id", "text", "text_hash")
    todo = misses.dropDuplicates(["text_hash"]).select(F.col("text_hash").alias("id"), "text")
    with stats.step("embed"):
        fresh, new_texts = stack.enter_context(cached_rows(
            embed_texts(todo, inputs.spec, p.batch_size, p.bucket, split=True).select(
                F.col("id").alias("text_hash"), "embedding", "truncated", SPLIT),
            "embedded now", report=stats))
    stats.counts["cache_hits"] = hits.count()
    stats.counts["cache_misses"] = looked.count() - stats.counts["cache_hits"]
    stats.counts["cache_new_texts"] = new_texts
    cols = ["id", "text", "embedding", "truncated"]
    found = hits.select(*cols).unionByName(misses.join(fresh, "text_hash").select(*cols))
    return _Embedded(found.select("*", _no_reason()).unionByName(bad), new_texts,
                     fresh.drop(SPLIT) if new_texts else None, split=fresh)


def _count(emb: DataFrame, embedded_now: int | None, dimensions: int, stats: Stats,
           split: DataFrame | None = None) -> int:
    """Rows, embeddings, truncations, rejects, the embedding rate and where the workers' time
    went (from ``split``, else from ``emb``'s own timings) into ``stats``; returns the number
    of texts with an embedding."""
    embed_seconds = next(s["seconds"] for s in reversed(stats.steps) if s["step"] == "embed")
    timed = split is None and SPLIT in emb.columns  # summed in the same pass as the counts
    counted = emb.agg(
        F.count(F.lit(1)).alias("rows"),
        F.count("embedding").alias("embedded"),
        F.sum(F.col("truncated").cast("int")).alias("truncated"),
        *(F.sum(F.col(SPLIT)[name]).alias(f"{SPLIT}_{name}") for name in Split.parts()
          if timed),
    ).first()
    reasons = {r["reason"]: r["count"] for r in
               emb.where(F.col("reason").isNotNull()).groupBy("reason").count().collect()}
    now = counted["embedded"] if embedded_now is None else embedded_now
    stats.counts["embedded_now"] = now
    stats.counts["embed_seconds"] = embed_seconds
    stats.counts["embed_sentences_per_s"] = (
        round(now / embed_seconds, 1) if now and embed_seconds > 0 else None)
    stats.inputs["texts"] = counted["rows"]
    stats.outputs["embeddings"] = counted["embedded"]
    stats.counts["truncated"] = int(counted["truncated"] or 0)
    stats.counts["dimensions"] = dimensions
    if timed:
        stats.counts["embed_task_seconds"] = {
            name: round(float(counted[f"{SPLIT}_{name}"] or 0.0), 3) for name in Split.parts()}
    elif split is not None:
        stats.counts["embed_task_seconds"] = split_seconds(split)
    stats.add_rejects("texts", reasons)
    return int(counted["embedded"])


def _neighbors(c: EmbedComputed, nb: EmbedNeighborsParams, n: int) -> None:
    """The ``k`` nearest neighbours of the first ``queries`` embedded texts (by id)."""
    if not (nb.enabled and n > 1):
        return
    with c.stats.step("neighbors"):
        # embedded rows only: their ids are unique and not null (split_texts)
        embedded = c.embeddings.where(F.col("embedding").isNotNull())
        queries = embedded.orderBy("id").limit(nb.queries)
        find = exact_neighbors if nb.method == "exact" else approx_neighbors
        pairs = find(queries, c.embeddings, nb.k)
        texts = embedded.select(F.col("id").alias("neighbor_id"),
                                F.col("text").alias("neighbor_text"))
        c.extras["neighbors"] = pairs.join(texts, "neighbor_id").orderBy(
            "query_id", "rank").toPandas()


def _topics(c: EmbedComputed, tp: EmbedTopicsParams, words: DataFrame | None, seed: int,
            n: int) -> None:
    """KMeans topics of the embedded texts, when there are at least two per topic."""
    if not (tp.enabled and n >= 2 * tp.k):
        return
    with c.stats.step("topics"):
        _, summary = topics(c.embeddings, tp.k, words, seed=seed)
        c.extras["topics"] = summary.toPandas()


def _attention(c: EmbedComputed, at: EmbedAttentionParams, spec: EngineSpec | None,
               n: int) -> None:
    """Attention weights of the first ``sentences`` embedded texts (by id), computed by one
    Python worker (the model never loads in the driver process) and collected: a few small
    arrays."""
    if not (at.enabled and spec is not None and n > 0):
        return
    with c.stats.step("attention"):
        first = c.embeddings.where(F.col("embedding").isNotNull()).orderBy("id") \
            .limit(at.sentences).select("id", "text")
        maps = attention_maps(first, spec)
        c.extras["attention"] = [(i, tokens, att) for i, _, tokens, att in maps]
        c.attention_texts.extend(text for _, text, _, _ in maps)


ATTENTION_SCHEMA = T.StructType([
    T.StructField("id", T.StringType()),
    T.StructField("text", T.StringType()),
    T.StructField("tokens", T.ArrayType(T.StringType())),
    T.StructField("shape", T.ArrayType(T.IntegerType())),  # layers, heads, tokens, tokens
    T.StructField("attention", T.ArrayType(T.FloatType())),  # the weights, row-major
])
_ATTENTION_ARROW = pa.schema([
    ("id", pa.string()), ("text", pa.string()), ("tokens", pa.list_(pa.string())),
    ("shape", pa.list_(pa.int32())), ("attention", pa.list_(pa.float32())),
])


def attention_maps(texts: DataFrame,
                   spec: EngineSpec) -> list[tuple[str, str, list[str], np.ndarray]]:
    """(id, text, tokens, weights float32 [layers, heads, tokens, tokens]) of each row of
    ``texts`` (id, text: a handful of rows), in id order: what
    :meth:`~sparkfield.nlp.encoder.Encoder.attentions` gives, computed in one Python worker
    that loads the model of ``spec`` (``spec.folder`` as the executors read it)."""
    table = texts.coalesce(1).mapInArrow(_attention_batches(spec), ATTENTION_SCHEMA).toArrow()
    weights = table.column("attention").combine_chunks()
    rows = [(r["id"], r["text"], r["tokens"],
             np.array(weights[i].values, dtype=np.float32).reshape(r["shape"]))  # a copy
            for i, r in enumerate(table.drop_columns(["attention"]).to_pylist())]
    return sorted(rows, key=lambda r: r[0])


def _attention_batches(
        spec: EngineSpec) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function of :func:`attention_maps`: the model loads on the first
    row (an empty partition loads nothing)."""

    def maps(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            if not batch.num_rows:
                continue
            encoder = attention_encoder(spec)
            found = [encoder.attentions(text) for text in batch.column("text").to_pylist()]
            yield pa.RecordBatch.from_arrays([
                batch.column("id"), batch.column("text"),
                pa.array([tokens for tokens, _ in found], pa.list_(pa.string())),
                pa.array([list(att.shape) for _, att in found], pa.list_(pa.int32())),
                pa.array([att.reshape(-1) for _, att in found], pa.list_(pa.float32())),
            ], schema=_ATTENTION_ARROW)

    return in_worker(maps)


_ATTENTION_ENCODERS: dict[EngineSpec, Any] = {}


def attention_encoder(spec: EngineSpec) -> Any:
    """The attention model of this Python worker (eager attention, which returns the weights),
    built on first use and kept, as :func:`~sparkfield.nlp.embed.worker_encoder` keeps the
    embedding model."""
    if spec not in _ATTENTION_ENCODERS:
        from sparkfield.nlp.encoder import Encoder

        _ATTENTION_ENCODERS[spec] = Encoder(spec.folder_here(), spec.device, spec.max_tokens,
                                            threads=spec.threads, attention=True)
    return _ATTENTION_ENCODERS[spec]


# --- write -----------------------------------------------------------------------------------

def _save(out: AtomicOutput | None, c: EmbedComputed, store: EmbeddingStore | None,
          report: RunReport) -> None:
    """The run's writes: the texts embedded now into the store (with or without an output),
    then the output."""
    if store is not None and c.new_rows is not None:
        with report.step("store add"):
            store.add(c.new_rows)
    if out is not None:
        _write(out, c, report)


def _write(out: AtomicOutput, c: EmbedComputed, report: RunReport) -> None:
    out.write_parquet("embeddings", c.embeddings)
    if "neighbors" in c.extras:
        out.write_csv("neighbors.csv", c.extras["neighbors"][
            ["query_id", "rank", "neighbor_id", "cosine", "neighbor_text"]])
    if "topics" in c.extras:
        out.write_csv("topics.csv", _lists_as_json(c.extras["topics"]))
    for i, ((_, tokens, att), text) in enumerate(zip(c.extras.get("attention", []),
                                                     c.attention_texts, strict=True)):
        name = f"attention/sentence_{i + 1}.png"
        with report.optional(name):
            out.write_bytes(name, attention_grid_png(tokens, att, text))


def _lists_as_json(table: pd.DataFrame) -> pd.DataFrame:
    """The topic table's word and example lists as JSON text, in place (the result's table
    reads the same as the file)."""
    for col in ("words", "examples"):
        if col in table:
            table[col] = table[col].map(lambda v: json.dumps(
                list(v) if v is not None else [], ensure_ascii=False))
    return table
