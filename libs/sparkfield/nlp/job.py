"""The embed job: texts -> sentence embeddings, then neighbours, topics and attention maps."""

from __future__ import annotations

import json
import logging
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sparkfield.core.conf import Config
from sparkfield.core.errors import ConfigError, InputError
from sparkfield.core.io import AtomicOutput, optional_output, require_path
from sparkfield.core.practices import cached, cached_rows, sample
from sparkfield.core.report import RunReport, Stats
from sparkfield.core.ship import ship_dir
from sparkfield.core.stages import publish
from sparkfield.core.stopwords import english_stopwords
from sparkfield.nlp.attention import attention_grid_png
from sparkfield.nlp.cache import EmbeddingStore, lookup
from sparkfield.nlp.embed import EngineSpec, embed_texts, split_texts, worker_threads
from sparkfield.nlp.model import check_model_dir, embedding_size, fingerprint
from sparkfield.nlp.neighbors import approx_neighbors, exact_neighbors
from sparkfield.nlp.params import SCHEMA
from sparkfield.nlp.topics import topics

log = logging.getLogger("sparkfield.nlp")


@dataclass
class EmbedParams:
    input: str | None
    output: str | None
    text_col: str = "sentence"
    id_col: str | None = None
    model: str | None = None
    engine: str = "torch"
    annotator: str = "minilm"
    device: str = "auto"
    half: bool = False
    batch_size: int = 64
    max_tokens: int = 256
    sample: float | None = None
    seed: int = 42
    torch_threads: int | None = None
    quantize: str = "none"
    onnx_dir: str | None = None
    bucket: bool = True
    cache_dir: str | None = None
    neighbors: dict[str, Any] = field(default_factory=dict)
    topics: dict[str, Any] = field(default_factory=dict)
    attention: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_config(cls, cfg: Config) -> EmbedParams:
        j = SCHEMA.validate(cfg.job)  # unknown keys, types and ranges
        p = cls(input=j.get("input"), output=j.get("output"),
                text_col=j.get("text_col", "sentence"), id_col=j.get("id_col"),
                model=j.get("model"), engine=j.get("engine", "torch"),
                annotator=j.get("annotator", "minilm"), device=j.get("device", "auto"),
                half=bool(j.get("half", False)), batch_size=int(j.get("batch_size", 64)),
                max_tokens=int(j.get("max_tokens", 256)), sample=j.get("sample"),
                seed=cfg.practices.sample_seed, torch_threads=j.get("torch_threads"),
                quantize=j.get("quantize") or "none", onnx_dir=j.get("onnx_dir"),
                bucket=bool(j.get("bucket", True)), cache_dir=j.get("cache_dir"),
                neighbors=j.get("neighbors") or {}, topics=j.get("topics") or {},
                attention=j.get("attention") or {})
        if not p.input:
            raise ConfigError("embed needs --input (Parquet or CSV)")
        if p.engine not in ("torch", "onnx", "sparknlp"):
            raise ConfigError("engine must be torch, onnx or sparknlp")
        if p.quantize != "none" and p.engine != "onnx":
            raise ConfigError("--quantize int8 needs --engine onnx")
        if p.cache_dir and p.engine == "sparknlp":
            raise ConfigError("cache_dir works with the torch and onnx engines")
        if p.batch_size < 1 or p.max_tokens < 8:
            raise ConfigError("batch_size must be >= 1 and max_tokens >= 8")
        return p


@dataclass
class EmbedResult:
    embeddings: DataFrame
    report: RunReport
    output: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)


def read_texts(spark: SparkSession, path: str, text_col: str, id_col: str | None) -> DataFrame:
    require_path(spark, path, "input")
    df = spark.read.option("header", "true").option("multiLine", "true").option(
        "escape", '"').csv(path) if path.endswith((".csv", ".csv.gz")) \
        else spark.read.parquet(path)
    if text_col not in df.columns:
        raise InputError(f"{path}: no column {text_col!r} (columns: {', '.join(df.columns)})")
    if id_col and id_col not in df.columns:
        raise InputError(f"{path}: no column {id_col!r}")
    if not id_col:
        # bag_of_words sentences: doc_id + sentence_idx identify a sentence (null when
        # either is null: such a row is rejected, not given a partial id)
        if {"doc_id", "sentence_idx"} <= set(df.columns):
            df = df.withColumn("__id", F.concat(F.col("doc_id").cast("string"), F.lit(":"),
                                                F.col("sentence_idx").cast("string")))
        else:
            df = df.withColumn("__id", F.monotonically_increasing_id().cast("string"))
    return df


@dataclass
class EmbedComputed:
    """What :func:`compute` returns. ``embeddings`` (``embedded``, cached) stays cached until
    the ``stack`` given to compute closes, so the writer reads it from the cache."""

    embedded: DataFrame
    embeddings: DataFrame
    stats: Stats
    extras: dict[str, Any] = field(default_factory=dict)  # neighbors, topics, attention
    attention_texts: list[str] = field(default_factory=list)  # the texts of the maps


def run(spark: SparkSession, cfg: Config) -> EmbedResult:
    p = EmbedParams.from_config(cfg)
    report = RunReport("embed", params=asdict(p))
    folder = check_model_dir(p.model)  # before any Spark work
    with optional_output(spark, p.output) as out, ExitStack() as stack:
        texts = sample(read_texts(spark, p.input, p.text_col, p.id_col), p.sample, p.seed)
        c = compute(spark, p, texts, folder, stack)
        report.merge(c.stats)
        result = EmbedResult(embeddings=c.embedded, report=report, output=p.output,
                             extras=c.extras)
        if out is not None:
            _write(out, c, report)
        publish(spark, out, report, cfg.practices.skew_ratio_threshold,
                cfg.job.get("max_reject_fraction"))
    log.info(report.summary())
    return result


def compute(spark: SparkSession, p: EmbedParams, texts: DataFrame, folder: Path,
            stack: ExitStack) -> EmbedComputed:
    """Texts in; every row with its embedding (or the reason it has none), the neighbours,
    topics and attention maps, and what was counted out. Writes nothing."""
    stats = Stats()
    id_col = p.id_col or "__id"
    if p.engine == "sparknlp":
        from sparkfield.nlp.sparknlp import embed_sparknlp

        embedded = embed_sparknlp(spark, texts, p.text_col, id_col, str(folder), p.annotator)
        fresh_rows = None
    else:
        embedded, fresh_rows = _embed(spark, p, texts, id_col, folder, stats, stack)
    if fresh_rows is None:  # the model runs while the cache fills
        with stats.step("embed"):
            emb = stack.enter_context(cached(embedded, "embeddings", report=stats))
    else:
        emb = stack.enter_context(cached(embedded, "embeddings", report=stats))
    embed_seconds = next(s["seconds"] for s in reversed(stats.steps) if s["step"] == "embed")
    counted = emb.agg(
        F.count(F.lit(1)).alias("rows"),
        F.count("embedding").alias("embedded"),
        F.sum(F.col("truncated").cast("int")).alias("truncated"),
    ).first()
    reasons = {r["reason"]: r["count"] for r in
               emb.where(F.col("reason").isNotNull()).groupBy("reason").count().collect()}
    fresh_rows = counted["embedded"] if fresh_rows is None else fresh_rows
    stats.counts["embedded_now"] = fresh_rows
    stats.counts["embed_seconds"] = embed_seconds
    stats.counts["embed_sentences_per_s"] = (
        round(fresh_rows / embed_seconds, 1) if fresh_rows and embed_seconds > 0 else None)
    stats.inputs["texts"] = counted["rows"]
    stats.outputs["embeddings"] = counted["embedded"]
    stats.counts["truncated"] = int(counted["truncated"] or 0)
    stats.counts["dimensions"] = embedding_size(folder)
    stats.add_rejects("texts", reasons)
    c = EmbedComputed(embedded=embedded, embeddings=emb, stats=stats)
    _stages(spark, p, c, folder, int(counted["embedded"]))
    return c


def _embed(spark: SparkSession, p: EmbedParams, texts: DataFrame, id_col: str, folder: Path,
           stats: Stats, stack: ExitStack) -> tuple[DataFrame, int | None]:
    """All rows (id, text, embedding, truncated, reason) and the number of texts the model
    embedded in this run, or None when that happens later, as the result is cached.

    With a content store: texts found there are not embedded again; distinct unseen texts are
    embedded once (inside the "embed" step), added to the store and joined back."""
    spec = EngineSpec(str(folder), p.engine, p.device, p.max_tokens, p.half,
                      p.torch_threads or worker_threads(spark), p.quantize, p.onnx_dir)
    ship_dir(spark, folder)  # executors off this machine get the model as an archive
    if p.engine == "onnx":
        from sparkfield.nlp.onnx_engine import ensure_onnx

        with stats.step("onnx export"):  # once, on the driver; a no-op when already there
            ensure_onnx(folder, p.onnx_dir, p.quantize, on_rebuild=stats.note)
    good, bad = split_texts(texts, p.text_col, id_col)
    no_reason = F.lit(None).cast("string").alias("reason")
    if not p.cache_dir:
        return embed_texts(good, spec, p.batch_size, p.bucket).select("*", no_reason) \
            .unionByName(bad), None
    model_id = f"{folder.name}@{fingerprint(folder)}/max_tokens={p.max_tokens}"
    store = EmbeddingStore(spark, p.cache_dir, model_id, spec.engine_id)
    looked = stack.enter_context(cached(lookup(good, store), "store lookup", report=stats))
    hits = looked.where(F.col("embedding").isNotNull())
    misses = looked.where(F.col("embedding").isNull()).select("id", "text", "text_hash")
    todo = misses.dropDuplicates(["text_hash"]).select(F.col("text_hash").alias("id"), "text")
    with stats.step("embed"):
        fresh, new_texts = stack.enter_context(cached_rows(
            embed_texts(todo, spec, p.batch_size, p.bucket).select(
                F.col("id").alias("text_hash"), "embedding", "truncated"),
            "embedded now", report=stats))
    if new_texts:
        with stats.step("store add"):
            store.add(fresh)
    stats.counts["cache_hits"] = hits.count()
    stats.counts["cache_misses"] = looked.count() - stats.counts["cache_hits"]
    stats.counts["cache_new_texts"] = new_texts
    cols = ["id", "text", "embedding", "truncated"]
    found = hits.select(*cols).unionByName(misses.join(fresh, "text_hash").select(*cols))
    return found.select("*", no_reason).unionByName(bad), new_texts


def _stages(spark: SparkSession, p: EmbedParams, c: EmbedComputed, folder: Path,
            n: int) -> None:
    """Neighbours, topics and attention maps of the ``n`` embedded texts, into ``c.extras``
    (each step only when enabled and there are texts enough)."""
    emb, stats = c.embeddings, c.stats
    nb = p.neighbors
    if nb.get("enabled", True) and n > 1:
        with stats.step("neighbors"):
            queries = emb.where(F.col("embedding").isNotNull()).orderBy("id").limit(
                int(nb.get("queries", 100)))
            k = int(nb.get("k", 5))
            method = nb.get("method", "exact")
            pairs = exact_neighbors(queries, emb, k) if method == "exact" \
                else approx_neighbors(queries, emb, k)
            # embedded rows only: their ids are unique and not null (split_texts)
            texts = emb.where(F.col("embedding").isNotNull()).select(
                F.col("id").alias("neighbor_id"), F.col("text").alias("neighbor_text"))
            c.extras["neighbors"] = pairs.join(texts, "neighbor_id").orderBy(
                "query_id", "rank").toPandas()
    tp = p.topics
    k = int(tp.get("k", 8))
    if tp.get("enabled", True) and n >= 2 * k:
        with stats.step("topics"):
            words = None
            if tp.get("words_from"):
                w = spark.read.parquet(tp["words_from"])
                if {"doc_id", "sentence_idx", "tokens"} <= set(w.columns):
                    stop = set(tp.get("stopwords") or [])
                    if tp.get("english_stopwords", True):
                        stop |= set(english_stopwords())
                    words = w.select(F.concat_ws(":", "doc_id", "sentence_idx").alias("id"),
                                     F.filter("tokens", lambda t: ~t.isin(list(stop)))
                                     .alias("tokens"))
            _, summary = topics(emb, k, words, seed=p.seed)
            c.extras["topics"] = summary.toPandas()
    at = p.attention
    count = int(at.get("sentences", 3))
    if at.get("enabled", True) and count > 0 and n > 0:
        with stats.step("attention"):
            from sparkfield.nlp.encoder import Encoder

            enc = Encoder(folder, "cpu", min(p.max_tokens, 64), attention=True)
            rows = emb.where(F.col("embedding").isNotNull()).orderBy("id").limit(count) \
                .select("id", "text").collect()
            maps = []
            for r in rows:
                tokens, att = enc.attentions(r["text"])
                maps.append((r["id"], tokens, att))
                c.attention_texts.append(r["text"])
            c.extras["attention"] = maps


def _write(out: AtomicOutput, c: EmbedComputed, report: RunReport) -> None:
    out.write_parquet("embeddings", c.embeddings)
    if "neighbors" in c.extras:
        out.write_csv("neighbors.csv", c.extras["neighbors"][
            ["query_id", "rank", "neighbor_id", "cosine", "neighbor_text"]])
    if "topics" in c.extras:
        table = c.extras["topics"]  # lists become JSON text, in the result's table too
        for col in ("words", "examples"):
            if col in table:
                table[col] = table[col].map(lambda v: json.dumps(
                    list(v) if v is not None else [], ensure_ascii=False))
        out.write_csv("topics.csv", table)
    for i, ((_, tokens, att), text) in enumerate(zip(c.extras.get("attention", []),
                                                     c.attention_texts, strict=True)):
        name = f"attention/sentence_{i + 1}.png"
        with report.optional(name):
            out.write_bytes(name, attention_grid_png(tokens, att, text))
