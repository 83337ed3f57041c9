"""The bag_of_words job: sources -> pages -> documents -> sentences -> vocabulary -> vectors."""

from __future__ import annotations

import logging
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sparkfield.core.conf import Config
from sparkfield.core.errors import ConfigError, InputError
from sparkfield.core.io import optional_output, path_exists, require_path
from sparkfield.core.practices import (
    cached,
    cached_rows,
    local_checkpoint,
    place,
    sample,
    skew_stats,
)
from sparkfield.core.report import RunReport, Stats
from sparkfield.core.stages import publish
from sparkfield.core.stopwords import english_stopwords
from sparkfield.core.workers import in_worker
from sparkfield.text.charset import REPLACEMENT
from sparkfield.text.crawl_state import (
    HASH,
    CrawlState,
    check_parquet,
    revalidated,
    unreadable,
    warn,
)
from sparkfield.text.duplicates import DuplicateSettings, find_duplicates
from sparkfield.text.fetch import PAGES_SCHEMA, FetchSettings, conform_pages, fetch_batches
from sparkfield.text.params import SCHEMA
from sparkfield.text.parse import (
    DOC_SCHEMA,
    EXTRACT_MODES,
    SENT_SCHEMA,
    parse_documents,
    sentence_batches,
)
from sparkfield.text.saved_pages import pages_from_html_dir, parse_partitions
from sparkfield.text.vectorise import (
    VECTOR_MODES,
    term_counts,
    term_vectors,
    token_vectors,
    top_vocabulary,
)

log = logging.getLogger("sparkfield.text")
__all__ = ["BagOfWordsParams", "BagOfWordsResult", "compute", "conform_pages",
           "pages_from_html_dir", "parse_partitions", "run"]


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
    extract: str = "main"  # main (trafilatura) | selector (the text of `selector` elements)
    selector: str = "p"
    sample: float | None = None
    seed: int = 42
    refresh: bool = False
    fetch: FetchSettings = field(default_factory=FetchSettings)
    fetch_partitions: int | None = None
    keep_duplicates: bool = False
    duplicates: DuplicateSettings = field(default_factory=DuplicateSettings)

    @classmethod
    def from_config(cls, cfg: Config) -> BagOfWordsParams:
        j = SCHEMA.validate(cfg.job)  # unknown keys, types and ranges
        src = j["source"]
        p = cls(
            output=j["output"], urls=src["urls"], html_dir=src["html_dir"],
            pages=src["pages"], vocab_size=j["vocab_size"],
            vector=j["vector"], stopwords=j["stopwords"],
            min_df=j["min_df"], selector=j["selector"],
            extract=j["extract"],
            sample=j["sample"], seed=cfg.practices.sample_seed,
            refresh=j["refresh"], fetch=FetchSettings.from_dict(j["fetch"]),
            fetch_partitions=j["fetch_partitions"],
            keep_duplicates=j["keep_duplicates"],
            duplicates=_duplicate_settings(j["duplicates"]),
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
        if p.extract not in EXTRACT_MODES:
            raise ConfigError(f"extract must be one of {EXTRACT_MODES}, got {p.extract!r}")
        if p.extract == "selector" and not (p.selector or "").strip():
            raise ConfigError("extract: selector needs a CSS selector")
        f = p.fetch
        if min(f.total_timeout_s, f.connect_timeout_s, f.read_timeout_s) <= 0 \
                or min(f.max_bytes, f.robots_max_bytes) <= 0:
            raise ConfigError("fetch timeouts, max_bytes and robots_max_bytes must be > 0")
        return p


def _duplicate_settings(d: dict | None) -> DuplicateSettings:
    try:
        return DuplicateSettings.from_dict(d)
    except (TypeError, ValueError) as exc:
        raise ConfigError(str(exc)) from exc


# the parameters a stored parse depends on: a change makes the next run parse every page again
PARSE_PARAMS = ("selector", "extract")


def _parse_fingerprint(p: BagOfWordsParams) -> dict:
    fp = {k: getattr(p, k, None) for k in PARSE_PARAMS}
    return {**fp, "documents": DOC_SCHEMA.names}


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


def fetch_pages(spark: SparkSession, urls: DataFrame, p: BagOfWordsParams,
                stats: Stats) -> DataFrame:
    """Fetch ``urls`` with every host pinned to one partition, hosts packed by URL count;
    the host counts and skew go into ``stats``."""
    host = F.lower(F.concat_ws("://", F.expr("try_parse_url(url, 'PROTOCOL')"),
                               F.expr("try_parse_url(url, 'AUTHORITY')")))
    with_host = urls.select(*urls.columns, F.coalesce(host, F.lit("")).alias("host"))
    counts = {r["host"]: r["n"] for r in
              with_host.groupBy("host").agg(F.count(F.lit(1)).alias("n")).collect()}
    if not counts:
        return spark.createDataFrame([], PAGES_SCHEMA)
    hosts = list(counts)
    parts = max(1, min(len(hosts), p.fetch_partitions
                       or 4 * spark.sparkContext.defaultParallelism))
    placed, loads = place(with_host, "host", counts, parts)
    stats.skew["fetch.urls_per_host"] = skew_stats(list(counts.values()))
    stats.skew["fetch.urls_per_partition"] = skew_stats(loads)
    stats.counts["hosts"] = len(hosts)
    if max(loads) > 2 * (sum(loads) / parts):
        top = max(counts, key=counts.get)
        stats.note(f"host skew: {top} has {counts[top]} URLs; politeness allows one request "
                   f"at a time per host, so it bounds the fetch time at about "
                   f"{counts[top] * p.fetch.delay_s:.0f}s")
    return placed.select(*urls.columns).mapInPandas(
        in_worker(fetch_batches(p.fetch)), PAGES_SCHEMA)


def _collect_pages(spark: SparkSession, p: BagOfWordsParams, stack: ExitStack
                   ) -> tuple[DataFrame, Stats]:
    """The pages of the configured source (fetched as they are first read) and what reading
    them counted; copies of the earlier output are kept until ``stack`` closes."""
    stats = Stats()
    if p.pages:
        require_path(spark, p.pages, "pages")
        pages = conform_pages(sample(spark.read.parquet(p.pages), p.sample, p.seed))
        stats.inputs["pages"] = pages.count()
        return pages, stats
    if p.html_dir:
        pages, stats.inputs["html_files"], hidden = pages_from_html_dir(
            spark, p.html_dir, p.sample, p.seed, stats)
        if hidden:
            stats.counts["hidden_files_skipped"] = hidden
            stats.note(f"{hidden} hidden file(s) under {p.html_dir} (dot files, folders "
                       "starting with . or _) were not read")
        return pages, stats
    urls = sample(read_url_list(spark, p.urls), p.sample, p.seed)
    n_lines = urls.count()
    urls = urls.dropDuplicates(["url"])
    n_unique = urls.count()
    stats.inputs["urls"] = n_lines
    stats.counts["duplicate_urls"] = n_lines - n_unique
    previous = None
    if p.output and not p.refresh and path_exists(spark, f"{p.output}/pages"):
        previous = _stored_pages(spark, f"{p.output}/pages", urls, stats, stack)
    if previous is None:
        return fetch_pages(spark, urls, p, stats), stats
    # stored pages are revalidated (conditional requests), the others fetched
    return revalidated(urls, previous, lambda u: fetch_pages(spark, u, p, stats), stats,
                       stack), stats


def _stored_pages(spark: SparkSession, path: str, urls: DataFrame, stats: Stats,
                  stack: ExitStack) -> DataFrame | None:
    """The good pages of the earlier output for ``urls`` (kept until ``stack`` closes: this
    run replaces them), or None with a warning when they cannot be read."""
    try:
        check_parquet(spark, path)
        previous = conform_pages(spark.read.parquet(path)).join(urls, "url", "left_semi")
        previous = previous.where(F.col("error").isNull() & (F.col("status") == 200))
        return local_checkpoint(previous, stack)
    except Exception as exc:  # a damaged earlier output: fetch every URL again
        warn(stats, f"the earlier pages in {path} cannot be read ({unreadable(exc)}): every "
             "URL is fetched again")
        return None


@dataclass
class BagOfWordsComputed:
    """What :func:`compute` returns. The documents, sentences and term counts stay cached
    until the ``stack`` given to compute closes, so the writer reads them from the cache."""

    documents: DataFrame  # every parsed page, errors included
    terms: DataFrame  # term counts of every good document
    counted: DataFrame  # the term rows the vocabulary counts (near-duplicates left out)
    word_stats: DataFrame
    vocabulary: pd.DataFrame
    duplicates: pd.DataFrame
    rejects: DataFrame
    sentence_vectors: DataFrame
    document_vectors: DataFrame
    stats: Stats


def run(spark: SparkSession, cfg: Config) -> BagOfWordsResult:
    p = BagOfWordsParams.from_config(cfg)
    report = RunReport("bag_of_words", params=asdict(p))
    with optional_output(spark, p.output) as out, ExitStack() as stack:
        state = CrawlState.load(spark, p.output, _parse_fingerprint(p), p.refresh, report,
                                stack)
        with report.step("pages"):  # the fetch runs as the pages are cached
            raw, read = _collect_pages(spark, p, stack)
            report.merge(read)
            pages, n_pages = stack.enter_context(cached_rows(
                state.annotate(raw.withColumn("doc_id", _doc_id(F.col("url")))), "pages",
                report=report))
        report.outputs["pages"] = n_pages
        c = compute(spark, p, pages, state, stack)
        report.merge(c.stats)
        if out is not None:
            with report.step("write"):
                out.write_parquet("pages", pages.drop("doc_id"))
                out.write_parquet("sentences", c.sentence_vectors)
                out.write_parquet("documents", c.document_vectors)
                out.write_csv("vocabulary.csv", c.vocabulary)
                with report.optional("top_words.png"):
                    out.write_bytes("top_words.png", _top_words_png(c.vocabulary))
                out.write_parquet("rejects", c.rejects, partitions=1)
                out.write_csv("duplicates.csv", c.duplicates)
                state.write(out, c.documents, c.terms, c.counted, c.word_stats)
        publish(spark, out, report, cfg.practices.skew_ratio_threshold,
                cfg.job.get("max_reject_fraction"))
    log.info(report.summary())
    sentences, documents = c.sentence_vectors, c.document_vectors
    if p.output:  # what was written: the run's caches and copies of the earlier output are gone
        pages, sentences, documents = (spark.read.parquet(f"{p.output}/{name}")
                                       for name in ("pages", "sentences", "documents"))
        pages = pages.withColumn("doc_id", _doc_id(F.col("url")))
    return BagOfWordsResult(pages=pages, sentences=sentences, documents=documents,
                            vocabulary=c.vocabulary, report=report, output=p.output)


def compute(spark: SparkSession, p: BagOfWordsParams, pages: DataFrame, state: CrawlState,
            stack: ExitStack) -> BagOfWordsComputed:
    """Pages in (with doc_id, content_hash and change, see ``CrawlState.annotate``); their
    documents, sentences, vocabulary, vectors, rejects and what was counted out. Writes
    nothing; raises InputError when no word passes ``min_df``."""
    stats = Stats()
    state.count_changes(pages, stats)
    stats.counts["pages_failed"] = pages.where(F.col("error").isNotNull()).count()
    ok = pages.where(F.col("error").isNull() & F.col("html").isNotNull())
    _count_suspect(ok, stats)
    with stats.step("parse"):
        docs_all = state.parsed(
            ok, lambda todo: parse_documents(todo, p.extract, p.selector), stats)
    docs = stack.enter_context(cached(docs_all, "documents", report=stats))
    good = docs.where(F.col("error").isNull())
    with stats.step("sentences"):
        sents = state.sentences_of(good, lambda g: g.select(
            "doc_id", "url", "text").mapInPandas(in_worker(sentence_batches), SENT_SCHEMA))
    sentences, n_sentences = stack.enter_context(cached_rows(sents, "sentences",
                                                             report=stats))
    rejects = pages.where(F.col("error").isNotNull()).select(
        F.lit("pages").alias("source"), F.col("error").alias("reason"),
        F.to_json(F.struct("url", "final_url", "status", "content_type", "attempts",
                           "error_detail"))
        .alias("record")).unionByName(docs.where(F.col("error").isNotNull()).select(
            F.lit("documents").alias("source"), F.col("error").alias("reason"),
            F.to_json(F.struct("doc_id", "url")).alias("record")))
    reasons = {r["reason"]: r["count"] for r in rejects.groupBy("reason").count().collect()}
    stats.add_rejects("pages", reasons)
    stats.outputs["sentences"] = n_sentences
    with stats.step("duplicates"):
        dups = find_duplicates(good, p.duplicates).orderBy("page").toPandas()
    stats.outputs["duplicates"] = len(dups)
    keep = ("doc_id", "url", "title")
    # documents are counted where they are tokenised: one row per distinct term reaches the JVM
    terms, n_documents = stack.enter_context(cached_rows(
        state.term_counts(good, lambda d: term_counts(d, "text", keep=(*keep, HASH)), keep),
        "term_counts", report=stats))
    stats.outputs["documents"] = n_documents
    counted = terms
    if len(dups) and not p.keep_duplicates:  # near-duplicates stay out of the vocabulary
        dup_urls = spark.createDataFrame(dups[["page"]].rename(columns={"page": "url"}))
        counted = terms.join(F.broadcast(dup_urls), "url", "left_anti")
    with stats.step("vocabulary"):
        stop = english_stopwords() if p.stopwords == "english" else ()
        word_stats = local_checkpoint(state.word_stats(terms, counted, stats), stack)
        vocab = top_vocabulary(word_stats, p.vocab_size, p.min_df, stop).toPandas()
    words = vocab["word"].tolist()
    if not words:
        raise InputError(
            f"the vocabulary is empty: no word of {n_documents} documents "
            f"passes min_df={p.min_df}" + (" without stopwords" if stop else ""))
    stats.outputs["vocabulary"] = len(words)
    return BagOfWordsComputed(
        documents=docs, terms=terms, counted=counted, word_stats=word_stats, vocabulary=vocab,
        duplicates=dups, rejects=rejects,
        sentence_vectors=token_vectors(sentences, words, p.vector),
        document_vectors=_with_text(term_vectors(terms.drop(HASH), words, p.vector), good),
        stats=stats)


def _count_suspect(ok: DataFrame, stats: Stats) -> None:
    """Pages kept whose text may be wrong: bytes that did not decode, a charset guessed (not
    declared, not UTF-8), no Content-Type (taken as HTML by their bytes)."""
    row = ok.agg(
        F.count_if(F.col("html").contains(REPLACEMENT)).alias("replacement"),
        F.count_if(F.col("charset_source") == "guess").alias("guessed"),
        F.count_if(F.col("content_type").isNull()).alias("untyped")).first()
    stats.counts["pages_with_replacement_chars"] = int(row["replacement"])
    stats.counts["pages_charset_guessed"] = int(row["guessed"])
    stats.counts["pages_without_content_type"] = int(row["untyped"])
    if row["guessed"]:
        stats.note(f"{row['guessed']} page(s) declare no charset and are not UTF-8: decoded "
                   "with a guessed one (charset_source = guess in pages/)")


def _with_text(doc_vec: DataFrame, docs: DataFrame) -> DataFrame:
    """Document vectors with each document's counted text next to its url."""
    cols = doc_vec.columns
    i = cols.index("url") + 1
    return doc_vec.join(docs.select("doc_id", "text"), "doc_id").select(
        *cols[:i], "text", *cols[i:])


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


