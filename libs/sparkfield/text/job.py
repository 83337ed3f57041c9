"""The bag_of_words job: sources -> pages -> documents -> sentences -> vocabulary -> vectors.

:func:`run` loads (the earlier output's state, the pages read or fetched: fetching is the
input's I/O), calls :func:`compute` (pure: frames in, frames and stats out), writes every output
atomically and then the run report.

Why one module: the job's choice of source (crawl, saved pages, web archives), its compute and
its writers; each step is a building block of its own subpackage."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from sparkfield.core.conf import Config
from sparkfield.core.connect import default_parallelism
from sparkfield.core.errors import InputError
from sparkfield.core.io import (
    AtomicOutput,
    optional_output,
    path_exists,
    rejects_of,
    require_path,
)
from sparkfield.core.practices import (
    cached,
    cached_rows,
    local_checkpoint,
    place,
    sample,
    skew_stats,
)
from sparkfield.core.report import RunReport, Stats
from sparkfield.core.spark_ui import publish
from sparkfield.core.worker_parquet import ArrowRows
from sparkfield.core.workers import in_worker
from sparkfield.text.bag_of_words.duplicates import find_duplicates, signatures
from sparkfield.text.bag_of_words.functions import (
    html_to_text,
    sentence_token_rows,
    sentence_vector_rows,
    sentence_vector_source,
    stopword_set,
)
from sparkfield.text.bag_of_words.parse import DOC_SCHEMA
from sparkfield.text.bag_of_words.vectorise import (
    idf_weighted,
    term_counts,
    term_vectors,
    token_vectors,
    top_vocabulary,
)
from sparkfield.text.crawl.fetch import conform_pages, fetch_batches, fetch_schema
from sparkfield.text.crawl.state import (
    HASH,
    CrawlState,
    check_parquet,
    revalidated,
    unreadable,
    warn,
)
from sparkfield.text.pages.charset import REPLACEMENT
from sparkfield.text.pages.saved import pages_from_html_dir, parse_partitions
from sparkfield.text.params import BAG_OF_WORDS, BagOfWordsParams, Derived, derive
from sparkfield.text.warc.files import list_warc_files, on_default_fs
from sparkfield.text.warc.read import (
    TEXT_TYPE,
    read_warc,
    warc_counts,
    warc_pages,
    warc_rejects,
)
from sparkfield.text.warc.write import CAPTURE_COLS, warc_target, with_capture, write_warc

log = logging.getLogger("sparkfield.text")
__all__ = ["BagOfWordsParams", "BagOfWordsResult", "compute", "conform_pages", "load",
           "pages_from_html_dir", "parse_documents", "parse_partitions", "run", "sentence_rows"]

# the parameters a stored parse depends on: a change makes the next run parse every page again
PARSE_PARAMS = ("selector", "extract")
# what a reject's record holds of a failed page, and of a page without a document
PAGE_RECORD = ("url", "final_url", "status", "content_type", "attempts", "error_detail")
DOC_RECORD = ("doc_id", "url")
# the document columns the term counts keep
DOC_KEEP = ("doc_id", "url", "title")


def _parse_fingerprint(p: BagOfWordsParams) -> dict:
    return {**{k: getattr(p, k) for k in PARSE_PARAMS}, "documents": DOC_SCHEMA.names}


@dataclass
class BagOfWordsResult:
    """What :func:`run` returns: its Parquet outputs (pages with their doc_id), vocabulary and
    report. Read from the output when the run wrote one; without an output, the same frames
    unwritten, which Spark computes again from the source when they are read."""

    pages: DataFrame
    sentences: DataFrame
    documents: DataFrame
    vocabulary: pd.DataFrame
    report: RunReport
    output: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)


def _doc_id(url_col: Column) -> Column:
    return F.substring(F.sha2(url_col, 256), 1, 16)


# ---- load -------------------------------------------------------------------------------

@dataclass
class Loaded:
    """What :func:`load` read: the pages (with doc_id, content_hash and change), the earlier
    output's state, what reading counted and what it rejected (a web archive's broken
    records; None for the other sources, whose failed pages are rows of ``pages``), and the
    fetched pages with what their WARC records need (CAPTURE_COLS) when the fetch is written
    as WARC."""

    pages: DataFrame
    state: CrawlState
    stats: Stats
    rejects: DataFrame | None = None
    captures: DataFrame | None = None


def writes_warc(p: BagOfWordsParams, d: Derived) -> bool:
    """Whether the run writes what it fetches as WARC: only a fetch has requests to record."""
    return bool(p.warc_output and p.output and d.source == "urls")


def load(spark: SparkSession, p: BagOfWordsParams, d: Derived, stack: ExitStack) -> Loaded:
    """The earlier output's state and the pages of the source, fetched as they are cached;
    the cache and the copies of the earlier output are kept until ``stack`` closes."""
    stats = Stats()
    state = CrawlState.load(spark, p.output, _parse_fingerprint(p), p.refresh, stats, stack)
    rejects = None
    # the fetch runs as the pages are cached; what reading keeps only until then is released
    with stats.step("pages"), ExitStack() as reading:
        if d.source == "warc":
            raw, rejects = _archived_pages(spark, p, d, stats, stack, reading)
        else:
            raw = _read_pages(spark, p, d, stats, stack)
        annotated = state.annotate(raw.withColumn("doc_id", _doc_id(F.col("url"))))
        if d.source == "pages":
            annotated = spread_pages(annotated)
        pages, n_pages = stack.enter_context(cached_rows(annotated, "pages", report=stats))
    stats.outputs["pages"] = n_pages
    if writes_warc(p, d):
        return Loaded(pages=pages.drop(*CAPTURE_COLS), state=state, stats=stats,
                      rejects=rejects, captures=pages)
    return Loaded(pages=pages, state=state, stats=stats, rejects=rejects)


def spread_pages(pages: DataFrame) -> DataFrame:
    """``pages`` hashed by doc_id into 4 partitions per task slot, so that the Python steps
    after them get even shares whatever the input's file layout. A Parquet file of pages
    written in one row group is read by one of its splits: every later step (parse,
    sentences, signatures, term counts, writes) then ran in one task while the other cores
    idled. (Saved HTML is laid out by the files' sizes, a fetch by host and a web archive by
    file: they keep their own partitions.)"""
    return pages.repartition(4 * default_parallelism(pages.sparkSession), "doc_id")


def _read_pages(spark: SparkSession, p: BagOfWordsParams, d: Derived, stats: Stats,
                stack: ExitStack) -> DataFrame:
    """The pages of the configured source (lazy: a fetch runs when they are first read); what
    reading them counted goes into ``stats``."""
    if d.source == "pages":
        require_path(spark, d.path, "pages")
        pages = conform_pages(sample(spark.read.parquet(d.path), p.sample, d.seed))
        stats.inputs["pages"] = pages.count()
        return pages
    if d.source == "html_dir":
        return _saved_pages(spark, p, d, stats)
    return _fetched_pages(spark, p, d, stats, stack)


def _saved_pages(spark: SparkSession, p: BagOfWordsParams, d: Derived, stats: Stats
                 ) -> DataFrame:
    pages, stats.inputs["html_files"], hidden = pages_from_html_dir(
        spark, d.path, p.sample, d.seed, stats)
    if hidden:
        stats.counts["hidden_files_skipped"] = hidden
        stats.note(f"{hidden} hidden file(s) under {d.path} (dot files, folders starting "
                   "with . or _) were not read")
    return pages


def _archived_pages(spark: SparkSession, p: BagOfWordsParams, d: Derived, stats: Stats,
                    stack: ExitStack, reading: ExitStack) -> tuple[DataFrame, DataFrame]:
    """The pages and rejects of a web archive, one page a URL (:func:`_latest_captures`). The
    records are read once: cached until ``reading`` closes (once the pages are cached), the
    rejects kept until ``stack`` closes."""
    listing = list_warc_files(on_default_fs(spark, d.path))
    if listing.revisits:
        stats.counts["directory_links_not_followed"] = listing.revisits
        stats.note(f"{listing.revisits} directory link(s) under {d.path} lead to a folder read "
                   "already (a loop, say): each folder is read once")
    records = reading.enter_context(cached(
        read_warc(spark, d.path, p.fetch.max_bytes, listing), "warc_records", report=stats))
    counts = warc_counts(records)
    stats.inputs["warc_records"] = sum(counts.records.values()) + sum(counts.rejects.values())
    stats.counts["warc_files"] = counts.files
    stats.counts["warc_records"] = counts.records
    stats.counts["warc_responses_not_pages"] = counts.skipped
    stats.add_rejects("warc", counts.rejects)
    rejects = local_checkpoint(warc_rejects(records), stack)
    pages = records.where(F.col("kind") == "page")
    earlier = _earlier_captures(pages)
    stats.counts["warc_earlier_captures"] = earlier
    if earlier:
        stats.note(f"{earlier} capture(s) of URLs the archive holds a later capture of were "
                   "not read: each URL is one page, its latest capture")
    return sample(warc_pages(_latest_captures(pages)), p.sample, d.seed), rejects


def _latest_captures(records: DataFrame) -> DataFrame:
    """Page records of :func:`read_warc` with one capture a URL: the latest by WARC-Date
    (``fetched_at``); of captures with the same date, the last one listed (by file, then
    offset). A re-crawl or a merged archive holds a URL more than once, and the pages,
    documents and sentences are keyed by URL. Records without a URL are all kept."""
    order = Window.partitionBy("url").orderBy(
        F.col("fetched_at").desc_nulls_last(), F.col("file").desc_nulls_last(),
        F.col("offset").desc_nulls_last())
    ranked = records.withColumn("_capture", F.row_number().over(order))
    return ranked.where(F.col("url").isNull() | (F.col("_capture") == 1)).drop("_capture")


def _earlier_captures(records: DataFrame) -> int:
    """How many records :func:`_latest_captures` leaves out (a Spark action)."""
    row = records.where(F.col("url").isNotNull()).agg(
        F.count(F.lit(1)).alias("n"), F.countDistinct("url").alias("urls")).first()
    return int(row["n"] - row["urls"])


def _fetched_pages(spark: SparkSession, p: BagOfWordsParams, d: Derived, stats: Stats,
                   stack: ExitStack) -> DataFrame:
    """The pages of the URL list: fetched, or revalidated (conditional requests) where the
    earlier output holds a good page."""
    urls = _url_list(spark, p, d, stats)
    previous = None
    if p.output and not p.refresh and path_exists(spark, f"{p.output}/pages"):
        previous = _stored_pages(spark, f"{p.output}/pages", urls, stats, stack)

    def fetch(todo: DataFrame) -> DataFrame:
        if not writes_warc(p, d):
            return fetch_pages(spark, todo, p, stats)
        return with_capture(fetch_pages(spark, todo, p, stats, capture=True), previous)

    if previous is None:
        return fetch(urls)
    return revalidated(urls, previous, fetch, stats, stack)


def _url_list(spark: SparkSession, p: BagOfWordsParams, d: Derived, stats: Stats
              ) -> DataFrame:
    """The sampled URL list, each URL once; its lines and repeated URLs go into ``stats``."""
    urls = sample(read_url_list(spark, d.path), p.sample, d.seed)
    n_lines = urls.count()
    urls = urls.dropDuplicates(["url"])
    stats.inputs["urls"] = n_lines
    stats.counts["duplicate_urls"] = n_lines - urls.count()
    return urls


def read_url_list(spark: SparkSession, path: str) -> DataFrame:
    require_path(spark, path, "URL list")
    # spaces and control characters at either end, as requests strips them
    url = F.regexp_replace("value", r"^[\x00-\x20]+|[\x00-\x20]+$", "")
    lines = spark.read.text(path).select(url.alias("url"))
    return lines.where((F.col("url") != "") & ~F.col("url").startswith("#"))


# scheme://, user info up to the authority's last @, then the host name: a bracketed IPv6
# address (group 1) or what runs to a port, path, query or fragment (group 2), as urllib's
# ``hostname`` reads it
_HOST = r"^[A-Za-z][A-Za-z0-9+.\-]*://(?:[^/?#]*@)?(?:\[([^\]/?#]*)\]|([^:/?#]*))"


def url_host(col: str) -> Column:
    """The host name politeness counts by (``fetch.server_of``), lower case; "" for a URL
    without one. A pattern, not ``parse_url``: a URL that does not parse (a space in its
    path) still has its host."""
    # as urllib: tabs and line breaks anywhere, and controls and spaces in front, do not count
    url = F.regexp_replace(F.regexp_replace(F.col(col), r"[\t\r\n]", ""), r"^[\x00-\x20]+", "")
    host = F.concat(F.regexp_extract(url, _HOST, 1), F.regexp_extract(url, _HOST, 2))
    return F.coalesce(F.lower(host), F.lit(""))


def fetch_pages(spark: SparkSession, urls: DataFrame, p: BagOfWordsParams,
                stats: Stats, capture: bool = False) -> DataFrame:
    """Fetch ``urls`` with every host pinned to one partition, hosts packed by URL count;
    the host counts and skew go into ``stats``. ``capture`` keeps each exchange for WARC
    (fetch.CAPTURED_SCHEMA)."""
    with_host = urls.select(*urls.columns, url_host("url").alias("host"))
    counts = {r["host"]: r["n"] for r in
              with_host.groupBy("host").agg(F.count(F.lit(1)).alias("n")).collect()}
    if not counts:
        return spark.createDataFrame([], fetch_schema(capture))
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
        in_worker(fetch_batches(p.fetch, capture)), fetch_schema(capture))


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


# ---- compute ----------------------------------------------------------------------------

@dataclass
class BagOfWordsComputed:
    """What :func:`compute` returns. The documents, duplicates and term counts stay cached
    until the ``stack`` given to compute closes, so the writer reads them from the cache. The
    sentences are split as ``sentence_vectors`` is read (written, counted): a corpus has
    several times more sentence rows than documents, and caching them cost more than
    splitting them (see :func:`_sentences`)."""

    documents: DataFrame  # every parsed page, errors included
    terms: DataFrame  # term counts of every good document
    counted: DataFrame  # the term rows the vocabulary counts (near-duplicates left out)
    word_stats: DataFrame
    vocabulary: pd.DataFrame
    duplicates: DataFrame  # page, duplicate_of, similarity (unordered: written by page)
    rejects: DataFrame
    sentence_vectors: DataFrame
    sentence_rows: ArrowRows | None  # sentence_vectors as the pass that makes them, if one
    document_vectors: DataFrame
    stats: Stats


def compute(spark: SparkSession, p: BagOfWordsParams, pages: DataFrame, state: CrawlState,
            stack: ExitStack) -> BagOfWordsComputed:
    """Pages in (with doc_id, content_hash and change, see ``CrawlState.annotate``); their
    documents, sentences, vocabulary, vectors, rejects and what was counted out. Reads no
    file and writes nothing; raises InputError when no word passes ``min_df``."""
    stats = Stats()
    state.count_changes(pages, stats)
    stats.counts["pages_failed"] = pages.where(F.col("error").isNotNull()).count()
    ok = pages.where(F.col("error").isNull() & F.col("html").isNotNull())
    _count_suspect(ok, stats)
    docs = _documents(p, ok, state, stats, stack)
    rejects = _rejects(pages, docs)
    stats.add_rejects("pages", {r["reason"]: r["count"] for r in
                                rejects.groupBy("reason").count().collect()})
    good = docs.where(F.col("error").isNull())
    # as many rows as near-duplicate pages: they stay in Spark (counted, left out, written)
    with stats.step("duplicates"):
        sigs = stack.enter_context(cached(signatures(good, p.duplicates), "signatures",
                                          report=stats))
        dups, n_dups = stack.enter_context(cached_rows(
            find_duplicates(good, p.duplicates, sigs=sigs), "duplicates", report=stats))
    stats.outputs["duplicates"] = n_dups
    terms, counted = _terms(p, good, dups if n_dups else None, state, stats, stack)
    word_stats, vocab = _vocabulary(p, terms, counted, state, stats, stack)
    words = vocab["word"].tolist()
    sentence_vectors, sentence_rows = _sentences(p, docs, words, state, stats, stack)
    return BagOfWordsComputed(
        documents=docs, terms=terms, counted=counted, word_stats=word_stats, vocabulary=vocab,
        duplicates=dups, rejects=rejects,
        sentence_vectors=sentence_vectors, sentence_rows=sentence_rows,
        document_vectors=_with_text(term_vectors(terms.drop(HASH), words, p.vector), good),
        stats=stats)


def _documents(p: BagOfWordsParams, ok: DataFrame, state: CrawlState, stats: Stats,
               stack: ExitStack) -> DataFrame:
    """The documents of the ``ok`` pages (every parsed page, errors included), cached until
    ``stack`` closes."""
    with stats.step("parse"):
        parsed = state.parsed(
            ok, lambda todo: parse_documents(todo, p.extract, p.selector, keep=(HASH,)),
            stats)
    return stack.enter_context(cached(parsed, "documents", report=stats))


def _sentences(p: BagOfWordsParams, docs: DataFrame, words: list[str], state: CrawlState,
               stats: Stats, stack: ExitStack) -> tuple[DataFrame, ArrowRows | None]:
    """The sentences of the good documents with their vectors, split where they are read: by
    the sentences/ write, which counts them (:func:`_count_sentences`); and, when they come
    from the documents in one Python pass (counts or presence, no earlier output reused), that
    pass, for the Python workers to write them (:meth:`AtomicOutput.write_arrow_rows`). The
    counts (or presence) vectors are built as the sentences are split; cached only for TF-IDF
    weights, whose IDF is fitted on them before the write reads them again.

    On the 372 Gutenberg books (2.4 M sentences, 2 cores), splitting, caching and then writing
    the vectors from the cache took 33.4 and 35.7 s; splitting as the vectors are written,
    28.5 s. At scale the cache also went to disk: 5,952 books have 38.9 M sentences. Spark ML's
    ``CountVectorizerModel`` on the split sentences cost the JVM about a third more CPU in that
    write than the vectors built in the split (25.4 and 22.9 s against 15.5 and 19.8 s).
    Spark's Parquet writer then took 15.8 and 18.1 s for the rows the Python workers write in
    9.2 and 13.4 s (same session, alternated)."""
    tf_col = "__tf" if p.vector == "tfidf" else "vector"
    binary = p.vector == "binary"
    good = docs.where(F.col("error").isNull())
    if p.vector != "tfidf" and not state.reusable:
        rows = sentence_vector_source(good, words, binary, tf_col)
        return rows.frame(), rows
    split = state.sentences_of(
        good, lambda fresh: sentence_vector_rows(fresh, words, binary, tf_col),
        lambda stored: token_vectors(stored, words, "binary" if binary else "count",
                                     out_col=tf_col))
    if p.vector != "tfidf":
        return split, None
    sentences, n_sentences = stack.enter_context(cached_rows(split, "sentences",
                                                             report=stats))
    stats.outputs["sentences"] = n_sentences
    return idf_weighted(sentences, tf_col, "vector"), None


def _count_sentences(spark: SparkSession, c: BagOfWordsComputed, out: AtomicOutput | None,
                    report: RunReport) -> None:
    """The sentence rows into ``report`` (outputs.sentences) unless compute counted them: from
    the Parquet footers of the written sentences/, or, with no output, by splitting them."""
    if "sentences" in c.stats.outputs:
        return
    with report.step("count sentences"):
        frame = c.sentence_vectors if out is None else spark.read.parquet(
            f"{out.staging}/sentences")  # written, not yet committed
        report.outputs["sentences"] = frame.count()


def parse_documents(pages: DataFrame, extract: str, selector: str,
                    keep: Sequence[str] = ()) -> DataFrame:
    """Pages (doc_id, url, html) -> documents (DOC_SCHEMA, then the pages' ``keep`` columns):
    what ``HtmlToText`` gives, with the reason of a page without text in ``error``. Pages whose
    ``content_type`` is ``text/plain`` (a web archive's text conversions, WET) hold their text
    already: it is the document's text as it is."""
    keep = list(keep)
    if "content_type" not in pages.columns:
        return _html_documents(pages, extract, selector, keep)
    is_text = F.coalesce(F.col("content_type") == TEXT_TYPE, F.lit(False))
    return _html_documents(pages.where(~is_text), extract, selector, keep).unionByName(
        _text_documents(pages.where(is_text), keep))


def _html_documents(pages: DataFrame, extract: str, selector: str, keep: list[str]
                    ) -> DataFrame:
    docs = html_to_text(pages.select("doc_id", "url", "html", *keep), extract=extract,
                        selector=selector, error_col="error")
    return docs.select(*DOC_SCHEMA.names, *keep)


def _text_documents(pages: DataFrame, keep: list[str]) -> DataFrame:
    """Documents of pages that hold text: no title; an empty text is a reject as a page
    without text is."""
    empty = F.trim(F.coalesce(F.col("html"), F.lit(""))) == ""
    return pages.select(
        "doc_id", "url", F.lit(None).cast("string").alias("title"),
        F.when(~empty, F.col("html")).alias("text"),
        F.when(empty, F.lit("no text")).alias("error"), *keep)


def sentence_rows(docs: DataFrame) -> DataFrame:
    """Documents (doc_id, url, text) -> one row per sentence with every token (SENT_SCHEMA):
    what ``SentenceSplitter(explodeSentences=True)`` and ``WordTokenizer`` give."""
    return sentence_token_rows(docs)


def _rejects(pages: DataFrame, docs: DataFrame) -> DataFrame:
    """The failed pages and the pages without a document (their reason in ``error``)."""
    return rejects_of(pages, "pages", reason_col="error", fields=PAGE_RECORD).unionByName(
        rejects_of(docs, "documents", reason_col="error", fields=DOC_RECORD))


def _terms(p: BagOfWordsParams, good: DataFrame, dups: DataFrame | None, state: CrawlState,
           stats: Stats, stack: ExitStack) -> tuple[DataFrame, DataFrame]:
    """The term counts of the ``good`` documents (cached until ``stack`` closes) and the rows
    of them the vocabulary counts: the near-duplicate pages (``dups``, None when there are
    none) left out unless kept."""
    # documents are counted where they are tokenised: one row per distinct term reaches the JVM
    terms, n_documents = stack.enter_context(cached_rows(
        state.term_counts(good, lambda d: term_counts(d, "text", keep=(*DOC_KEEP, HASH)),
                          DOC_KEEP), "term_counts", report=stats))
    stats.outputs["documents"] = n_documents
    if dups is None or p.keep_duplicates:
        return terms, terms
    # no broadcast hint: the pages grow with the data; Spark broadcasts them while they are small
    return terms, terms.join(dups.select(F.col("page").alias("url")), "url", "left_anti")


def _vocabulary(p: BagOfWordsParams, terms: DataFrame, counted: DataFrame, state: CrawlState,
                stats: Stats, stack: ExitStack) -> tuple[DataFrame, pd.DataFrame]:
    """The word statistics of the ``counted`` rows (kept until ``stack`` closes) and the
    vocabulary; InputError when it is empty."""
    with stats.step("vocabulary"):
        stop = sorted(stopword_set(p.stopwords))  # the words WordTokenizer leaves out
        word_stats = local_checkpoint(state.word_stats(terms, counted, stats), stack)
        vocab = top_vocabulary(word_stats, p.vocab_size, p.min_df, stop).toPandas()
    if vocab.empty:
        raise InputError(
            f"the vocabulary is empty: no word of {stats.outputs['documents']} documents "
            f"passes min_df={p.min_df}" + (" without stopwords" if stop else ""))
    stats.outputs["vocabulary"] = len(vocab)
    return word_stats, vocab


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


# ---- write and report -------------------------------------------------------------------

def run(spark: SparkSession, cfg: Config) -> BagOfWordsResult:
    """Load, compute, write the output atomically when there is one, report. The result is
    the same with and without an output (see :func:`_result`)."""
    p = BAG_OF_WORDS.parse(cfg.job)
    d = derive(p, cfg.practices.sample_seed)
    report = RunReport("bag_of_words", params={**asdict(p), "seed": d.seed})
    with optional_output(spark, p.output) as out, ExitStack() as stack:
        warc_dir = warc_target(spark, out.path("warc"), p.output) \
            if out is not None and writes_warc(p, d) else None
        loaded = load(spark, p, d, stack)
        report.merge(loaded.stats)
        c = compute(spark, p, loaded.pages, loaded.state, stack)
        report.merge(c.stats)
        if loaded.rejects is not None:
            c.rejects = c.rejects.unionByName(loaded.rejects)
        frames = _parquet_outputs(loaded.pages, c)
        if out is not None:
            with report.step("write"):
                _write(out, frames, c, loaded.state, report)
                if warc_dir is not None and loaded.captures is not None:
                    report.counts["warc_out"] = write_warc(loaded.captures, warc_dir)
        _count_sentences(spark, c, out, report)
        publish(spark, out, report, cfg.practices.skew_ratio_threshold, p.max_reject_fraction)
    log.info(report.summary())
    return _result(spark, frames, c.vocabulary, report, p.output)


def _parquet_outputs(pages: DataFrame, c: BagOfWordsComputed) -> dict[str, DataFrame]:
    """The Parquet outputs that the result returns too, by name."""
    return {"pages": pages.drop("doc_id"), "sentences": c.sentence_vectors,
            "documents": c.document_vectors}


def _write(out: AtomicOutput, frames: dict[str, DataFrame], c: BagOfWordsComputed,
           state: CrawlState, report: RunReport) -> None:
    for name, df in frames.items():
        if name == "sentences" and c.sentence_rows is not None:
            out.write_arrow_rows(name, c.sentence_rows)
        else:
            out.write_parquet(name, df)
    out.write_csv("vocabulary.csv", c.vocabulary)
    with report.optional("top_words.png"):
        out.write_bytes("top_words.png", _top_words_png(c.vocabulary))
    out.write_parquet("rejects", c.rejects, partitions=1)
    out.write_single_csv("duplicates.csv", c.duplicates.orderBy("page"))
    state.write(out, c.documents, c.terms, c.counted, c.word_stats)


def _result(spark: SparkSession, frames: dict[str, DataFrame], vocabulary: pd.DataFrame,
            report: RunReport, output: str | None) -> BagOfWordsResult:
    """The run's outputs, pages with their doc_id: read from the output when the run wrote
    one (its caches and its copies of the earlier output are released by then), otherwise
    the same frames unwritten."""
    if output:
        frames = {name: spark.read.parquet(f"{output}/{name}") for name in frames}
    return BagOfWordsResult(
        pages=frames["pages"].withColumn("doc_id", _doc_id(F.col("url"))),
        sentences=frames["sentences"], documents=frames["documents"], vocabulary=vocabulary,
        report=report, output=output)


def _top_words_png(vocab: pd.DataFrame, n: int = 30) -> bytes:
    """A bar chart of the ``n`` most frequent words, drawn on its own canvas (no pyplot, no
    global backend)."""
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    top = vocab.head(n)
    fig = Figure(figsize=(8, max(3, 0.25 * len(top))), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    ax.barh(top["word"][::-1], top["count"][::-1], color="#4c72b0")
    ax.set_xlabel("occurrences in the corpus")
    ax.set_title(f"Top {len(top)} words")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return buf.getvalue()
