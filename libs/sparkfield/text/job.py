"""The bag_of_words job: sources -> pages -> documents -> sentences -> vocabulary -> vectors."""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sparkfield.core.conf import Config, ConfigError
from sparkfield.core.io import (
    AtomicOutput,
    InputError,
    optional_output,
    path_exists,
    require_path,
)
from sparkfield.core.practices import balance, cached, partition_keys, sample, skew_stats
from sparkfield.core.report import RunReport
from sparkfield.core.stages import publish
from sparkfield.core.stopwords import english_stopwords
from sparkfield.text.fetch import PAGES_SCHEMA, FetchSettings, decode_html, fetch_batches
from sparkfield.text.parse import DOC_SCHEMA, SENT_SCHEMA, parse_batches, sentence_batches
from sparkfield.text.vectorise import (
    VECTOR_MODES,
    term_counts,
    term_vectors,
    token_vectors,
    vocabulary,
)

log = logging.getLogger("sparkfield.text")


@dataclass
class BagOfWordsParams:
    output: str | None
    urls: str | None = None
    html_dir: str | None = None
    pages: str | None = None
    vocab_size: int = 200
    vector: str = "binary"
    stopwords: str = "none"
    min_df: int = 1
    selector: str = "p"
    sample: float | None = None
    seed: int = 42
    refresh: bool = False
    fetch: FetchSettings = field(default_factory=FetchSettings)
    fetch_partitions: int | None = None

    @classmethod
    def from_config(cls, cfg: Config) -> BagOfWordsParams:
        j = cfg.job
        src = j.get("source") or {}
        p = cls(
            output=j.get("output"), urls=src.get("urls"), html_dir=src.get("html_dir"),
            pages=src.get("pages"), vocab_size=int(j.get("vocab_size", 200)),
            vector=j.get("vector", "binary"), stopwords=j.get("stopwords", "none"),
            min_df=int(j.get("min_df", 1)), selector=j.get("selector", "p"),
            sample=j.get("sample"), seed=cfg.practices.sample_seed,
            refresh=bool(j.get("refresh", False)), fetch=FetchSettings.from_dict(j.get("fetch")),
            fetch_partitions=j.get("fetch_partitions"),
        )
        given = [k for k in ("urls", "html_dir", "pages") if getattr(p, k)]
        if len(given) != 1:
            raise ConfigError("give exactly one source: --urls FILE, --html-dir DIR or "
                              f"--pages PARQUET (got {given or 'none'})")
        if p.vector not in VECTOR_MODES:
            raise ConfigError(f"vector must be one of {VECTOR_MODES}")
        if p.stopwords not in ("none", "english"):
            raise ConfigError("stopwords must be none or english")
        if p.vocab_size < 1 or p.min_df < 1:
            raise ConfigError("vocab_size and min_df must be >= 1")
        return p


@dataclass
class BagOfWordsResult:
    pages: DataFrame
    sentences: DataFrame
    documents: DataFrame
    vocabulary: pd.DataFrame
    report: RunReport
    output: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)


def _doc_id(url_col) -> Any:
    return F.substring(F.sha2(url_col, 256), 1, 16)


def read_url_list(spark: SparkSession, path: str) -> DataFrame:
    require_path(spark, path, "URL list")
    lines = spark.read.text(path).select(F.trim("value").alias("url"))
    return lines.where((F.col("url") != "") & ~F.col("url").startswith("#"))


def pages_from_html_dir(spark: SparkSession, path: str) -> DataFrame:
    """Saved pages as if fetched: url = the file's URI, status 200."""
    require_path(spark, path, "HTML directory")
    files = spark.sparkContext.binaryFiles(path.rstrip("/") + "/*")
    rows = files.map(lambda kv: (kv[0], decode_html(kv[1], None)))
    df = spark.createDataFrame(rows, "url string, html string")
    return df.select(
        "url", F.col("url").alias("final_url"), F.lit(200).alias("status"),
        F.current_timestamp().cast("timestamp").alias("fetched_at"),
        F.lit("text/html").alias("content_type"), "html",
        F.lit(None).cast("string").alias("error"), F.lit(0).alias("attempts"))


def fetch_pages(spark: SparkSession, urls: DataFrame, p: BagOfWordsParams,
                report: RunReport) -> DataFrame:
    """Fetch ``urls`` with every host pinned to one partition, hosts packed by URL count."""
    host = F.lower(F.concat_ws("://", F.expr("try_parse_url(url, 'PROTOCOL')"),
                               F.expr("try_parse_url(url, 'AUTHORITY')")))
    with_host = urls.select("url", F.coalesce(host, F.lit("")).alias("host"))
    counts = {r["host"]: r["n"] for r in
              with_host.groupBy("host").agg(F.count(F.lit(1)).alias("n")).collect()}
    if not counts:
        return spark.createDataFrame([], PAGES_SCHEMA)
    hosts = list(counts)
    parts = max(1, min(len(hosts), p.fetch_partitions
                       or 4 * spark.sparkContext.defaultParallelism))
    bins = balance([counts[h] for h in hosts], parts)
    keys = partition_keys(spark, parts)
    loads = [0] * parts
    for h, b in zip(hosts, bins, strict=True):
        loads[b] += counts[h]
    report.skew["fetch.urls_per_host"] = skew_stats(list(counts.values()))
    report.skew["fetch.urls_per_partition"] = skew_stats(loads)
    report.counts["hosts"] = len(hosts)
    if max(loads) > 2 * (sum(loads) / parts):
        top = max(counts, key=counts.get)
        report.note(f"host skew: {top} has {counts[top]} URLs; politeness allows one request "
                    f"at a time per host, so it bounds the fetch time at about "
                    f"{counts[top] * p.fetch.delay_s:.0f}s")
    placement = spark.createDataFrame(
        [(h, keys[b]) for h, b in zip(hosts, bins, strict=True)], "host string, pkey int")
    placed = with_host.join(F.broadcast(placement), "host")
    return placed.repartition(parts, "pkey").select("url").mapInPandas(
        fetch_batches(p.fetch), PAGES_SCHEMA)


def _collect_pages(spark: SparkSession, p: BagOfWordsParams, report: RunReport) -> DataFrame:
    if p.pages:
        require_path(spark, p.pages, "pages")
        return sample(spark.read.parquet(p.pages), p.sample, p.seed)
    if p.html_dir:
        return sample(pages_from_html_dir(spark, p.html_dir), p.sample, p.seed)
    urls = sample(read_url_list(spark, p.urls), p.sample, p.seed)
    n_lines = urls.count()
    urls = urls.dropDuplicates(["url"])
    n_unique = urls.count()
    report.inputs["urls"] = n_lines
    report.counts["duplicate_urls"] = n_lines - n_unique
    previous = None
    if p.output and not p.refresh and path_exists(spark, f"{p.output}/pages"):
        previous = spark.read.parquet(f"{p.output}/pages").join(urls, "url", "left_semi")
        previous = previous.where(F.col("error").isNull() & (F.col("status") == 200))
        previous = previous.localCheckpoint()  # the old output is replaced by this run
    to_fetch = urls if previous is None else urls.join(previous.select("url"), "url",
                                                       "left_anti")
    fetched = fetch_pages(spark, to_fetch, p, report)
    if previous is not None:
        report.counts["pages_reused"] = previous.count()
        return previous.unionByName(fetched)
    return fetched


def run(spark: SparkSession, cfg: Config) -> BagOfWordsResult:
    p = BagOfWordsParams.from_config(cfg)
    report = RunReport("bag_of_words", params=asdict(p))
    with optional_output(spark, p.output) as out:
        with report.step("pages"):
            pages_raw = _collect_pages(spark, p, report)
        with cached(pages_raw.withColumn("doc_id", _doc_id(F.col("url"))), "pages",
                    report=report) as pages:
            n_pages = report.cached[-1]["rows"]
            report.outputs["pages"] = n_pages
            report.counts["pages_failed"] = pages.where(F.col("error").isNotNull()).count()
            ok = pages.where(F.col("error").isNull() & F.col("html").isNotNull())
            with report.step("parse"):
                docs_all = ok.select("doc_id", "url", "html").mapInPandas(
                    parse_batches(p.selector), DOC_SCHEMA)
            with cached(docs_all, "documents", report=report) as docs:
                good = docs.where(F.col("error").isNull())
                with report.step("sentences"):
                    sents = good.select("doc_id", "url", "text").mapInPandas(
                        sentence_batches, SENT_SCHEMA)
                with cached(sents, "sentences", report=report) as sentences:
                    result = _vectorise(spark, p, pages, docs, sentences, report, out)
        publish(spark, out, report, cfg.practices.skew_ratio_threshold,
                cfg.job.get("max_reject_fraction"))
    log.info(report.summary())
    return result


def _vectorise(spark: SparkSession, p: BagOfWordsParams, pages: DataFrame, docs: DataFrame,
               sentences: DataFrame, report: RunReport, out: AtomicOutput | None
               ) -> BagOfWordsResult:
    rejects = pages.where(F.col("error").isNotNull()).select(
        F.lit("pages").alias("source"), F.col("error").alias("reason"),
        F.to_json(F.struct("url", "final_url", "status", "content_type", "attempts"))
        .alias("record")).unionByName(docs.where(F.col("error").isNotNull()).select(
            F.lit("documents").alias("source"), F.col("error").alias("reason"),
            F.to_json(F.struct("doc_id", "url")).alias("record")))
    reasons = {r["reason"]: r["count"] for r in rejects.groupBy("reason").count().collect()}
    report.add_rejects("pages", reasons)
    report.outputs["sentences"] = report.cached[-1]["rows"]
    good = docs.where(F.col("error").isNull())
    # documents are counted where they are tokenised: one row per distinct term reaches the JVM
    with cached(term_counts(good, "text", keep=("doc_id", "url", "title")), "term_counts",
                report=report) as terms:
        report.outputs["documents"] = report.cached[-1]["rows"]
        with report.step("vocabulary"):
            stop = english_stopwords() if p.stopwords == "english" else ()
            vocab = vocabulary(terms, p.vocab_size, p.min_df, stop).toPandas()
        words = vocab["word"].tolist()
        if not words:
            raise InputError(
                f"the vocabulary is empty: no word of {report.outputs['documents']} documents "
                f"passes min_df={p.min_df}" + (" without stopwords" if stop else ""))
        report.outputs["vocabulary"] = len(words)
        sent_vec = token_vectors(sentences, words, p.vector)
        doc_vec = term_vectors(terms, words, p.vector)
        if out is not None:
            with report.step("write"):
                out.write_parquet("pages", pages.drop("doc_id"))
                out.write_parquet("sentences", sent_vec)
                out.write_parquet("documents", doc_vec)
                out.write_csv("vocabulary.csv", vocab)
                out.write_bytes("top_words.png", _top_words_png(vocab))
                out.write_parquet("rejects", rejects, partitions=1)
    return BagOfWordsResult(pages=pages, sentences=sent_vec, documents=doc_vec,
                            vocabulary=vocab, report=report, output=p.output)


def _top_words_png(vocab: pd.DataFrame, n: int = 30) -> bytes:
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    top = vocab.head(n)
    fig, ax = plt.subplots(figsize=(8, max(3, 0.25 * len(top))), dpi=110)
    ax.barh(top["word"][::-1], top["count"][::-1], color="#4c72b0")
    ax.set_xlabel("occurrences in the corpus")
    ax.set_title(f"Top {len(top)} words")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


