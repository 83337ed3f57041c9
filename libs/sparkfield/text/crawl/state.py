"""What a bag_of_words output keeps so that the next run into it does only the changed work.

``state/`` in the output holds every parsed page with its content hash (``documents``), the
term counts of every good document and whether it was counted in the vocabulary (``terms``),
the corpus-wide statistics of every word (``word_stats``: total count, documents) and the
settings the parse depended on (``meta.json``). A re-run:

* tells pages apart by content hash (SHA-256 of the page's HTML): new, changed, unchanged, gone
  (had a stored page, has none now: dropped from the source or failed);
* parses and counts only pages whose (doc_id, content hash) is not in the state, reusing the
  stored parse, sentences and term counts of the others;
* updates ``word_stats`` from the change: minus the documents no longer counted, plus the ones
  newly counted, so the vocabulary equals the one a fresh run computes.

The state is reused only when the parse settings and its layout match; otherwise the run
recomputes everything (and says so). A state that cannot be read (a folder missing, a cut
Parquet file, a broken ``meta.json``) means the same: a full run, with a warning, that writes
a whole state again; ``--refresh`` does not read the old state at all.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sparkfield.core.failures import spark_input_error
from sparkfield.core.io import AtomicOutput, hadoop_fs, path_exists, read_bytes, read_text_file
from sparkfield.core.practices import local_checkpoint
from sparkfield.core.report import Stats
from sparkfield.text.bag_of_words.vectorise import COUNTS, TERMS

STATE_VERSION = 1
HASH = "content_hash"
KEY = ["doc_id", HASH]
STATS_SCHEMA = "word string, count long, documents long"
log = logging.getLogger("sparkfield.text")


def unreadable(exc: BaseException) -> str:
    """One line saying why an earlier output could not be read."""
    reason = spark_input_error(exc)
    if reason:
        return reason
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return (lines[0] if lines else type(exc).__name__)[:300]


def warn(report: Stats, text: str) -> None:
    """A warning on the console and in the run report's notes."""
    log.warning(text)
    report.notes.append(text)


def content_hash(html_col: str = "html") -> F.Column:
    return F.sha2(F.col(html_col), 256)


def word_stats(terms: DataFrame) -> DataFrame:
    """word, count (occurrences), documents (rows containing it) of ``term_counts`` rows."""
    pairs = terms.select(F.explode(F.arrays_zip(TERMS, COUNTS)).alias("t")).select(
        F.col(f"t.{TERMS}").alias("word"), F.col(f"t.{COUNTS}").cast("long").alias("n"))
    return pairs.groupBy("word").agg(F.sum("n").alias("count"),
                                     F.count(F.lit(1)).alias("documents"))


def update_word_stats(old: DataFrame, added: DataFrame, removed: DataFrame) -> DataFrame:
    """``old`` statistics plus those of the ``added`` term rows minus those of ``removed``;
    words left in no document are dropped."""
    delta = word_stats(added).unionByName(word_stats(removed).select(
        "word", (-F.col("count")).alias("count"), (-F.col("documents")).alias("documents")))
    return old.unionByName(delta).groupBy("word").agg(
        F.sum("count").alias("count"), F.sum("documents").alias("documents")) \
        .where(F.col("documents") > 0)


@dataclass
class CrawlState:
    """The previous run's state (None parts: there is none) and this run's use of it."""

    fingerprint: dict
    documents: DataFrame | None = None  # every parsed page of the previous run
    terms: DataFrame | None = None  # doc_id, content_hash, counted, terms, counts
    stats: DataFrame | None = None
    sentences: DataFrame | None = None  # the previous output's sentences/, vectors dropped
    reusable: bool = False

    @classmethod
    def load(cls, spark: SparkSession, output: str | None, fingerprint: dict, refresh: bool,
             report: Stats, stack: ExitStack) -> CrawlState:
        """Read (and cut from the old files: this run replaces them) the state of ``output``;
        the copies are released when ``stack`` closes."""
        st = cls(fingerprint=fingerprint)
        base = f"{output}/state" if output else None
        if base and refresh:
            report.counts["incremental"] = "refresh: full run"
            return st
        if not base or not path_exists(spark, f"{base}/meta.json"):
            report.counts["incremental"] = "no earlier state: full run"
            return st
        try:
            st._read(spark, output, report, stack)
        except Exception as exc:  # a damaged state is recomputed, never a failed run
            warn(report, f"the earlier state in {base} cannot be read ({unreadable(exc)}): "
                 "this run parses and counts every page again and writes a new state")
            report.counts["incremental"] = "earlier state unreadable: full run"
            return cls(fingerprint=fingerprint)
        return st

    def _read(self, spark: SparkSession, output: str, report: Stats, stack: ExitStack) -> None:
        base = f"{output}/state"
        try:
            meta = json.loads(read_text_file(spark, f"{base}/meta.json"))
        except ValueError as exc:
            raise ValueError(f"{base}/meta.json is not JSON ({exc})") from None
        self.documents = _read_parquet(spark, f"{base}/documents", KEY, stack)
        if meta != {"version": STATE_VERSION, **self.fingerprint}:
            report.counts["incremental"] = "parse settings changed: full run"
            report.note(f"earlier state was made with {meta}, this run uses "
                        f"{self.fingerprint}: every page is parsed again")
            return
        self.terms = _read_parquet(spark, f"{base}/terms", [*KEY, "counted", TERMS, COUNTS],
                                   stack)
        self.stats = _read_parquet(spark, f"{base}/word_stats", ["word", "count", "documents"],
                                   stack)
        self.sentences = _read_parquet(spark, f"{output}/sentences", ["doc_id", "sentence_idx"],
                                       stack, drop=("vector",))
        self.reusable = True
        report.counts["incremental"] = "reused the earlier state"

    def annotate(self, pages: DataFrame) -> DataFrame:
        """``pages`` (with doc_id) plus content_hash and change (new / changed / unchanged for
        pages with HTML and no error, null for the others)."""
        pages = pages.drop(HASH, "change").withColumn(
            HASH, F.when(F.col("error").isNull(), content_hash()))
        if self.documents is None:
            return pages.withColumn("change", F.when(F.col(HASH).isNotNull(), F.lit("new")))
        prev = self.documents.select("doc_id", F.col(HASH).alias("_prev"))
        return pages.join(prev, "doc_id", "left").withColumn("change", F.when(
            F.col(HASH).isNull(), None).when(F.col("_prev").isNull(), "new").when(
            F.col("_prev") == F.col(HASH), "unchanged").otherwise("changed")).drop("_prev")

    def count_changes(self, pages: DataFrame, report: Stats) -> None:
        """new / changed / unchanged / gone page counts into the run report."""
        got = {r["change"]: r["count"] for r in
               pages.where(F.col("change").isNotNull()).groupBy("change").count().collect()}
        gone = 0
        if self.documents is not None:
            now = pages.where(F.col(HASH).isNotNull()).select("doc_id")
            gone = self.documents.select("doc_id").join(now, "doc_id", "left_anti").count()
        for k in ("new", "changed", "unchanged"):
            report.counts[f"pages_{k}"] = int(got.get(k, 0))
        report.counts["pages_gone"] = int(gone)

    def parsed(self, ok: DataFrame, parse: Callable[[DataFrame], DataFrame],
               report: Stats) -> DataFrame:
        """Documents of the ``ok`` pages (with content_hash): stored ones for pages whose
        content is unchanged, ``parse`` for the others. ``parse`` keeps the pages'
        content_hash: joined back by doc_id instead, every document's text was shuffled and
        sorted (1.1 GB for 5,952 books). A page without a doc_id (no URL) has no document."""
        ok = ok.where(F.col("doc_id").isNotNull())
        if not self.reusable:
            return parse(ok)
        todo = ok.join(self.documents.select(*KEY), KEY, "left_anti")
        fresh = parse(todo)
        kept = self.documents.join(ok.select(*KEY), KEY, "left_semi").select(*fresh.columns)
        report.counts["pages_parsed"] = todo.count()
        return fresh.unionByName(kept)

    def sentences_of(self, good: DataFrame, split: Callable[[DataFrame], DataFrame],
                     vectorise: Callable[[DataFrame], DataFrame] | None = None) -> DataFrame:
        """Sentences of the ``good`` documents: stored ones for reused documents. The stored
        ones get the columns ``split`` adds (this run's vectors) from ``vectorise``."""
        if not self.reusable:
            return split(good)
        reused = good.join(self.documents.select(*KEY), KEY, "left_semi").select("doc_id")
        fresh = split(good.join(reused, "doc_id", "left_anti"))
        stored = self.sentences.join(reused, "doc_id", "left_semi")
        if vectorise is not None:
            stored = vectorise(stored)
        return fresh.unionByName(stored.select(*fresh.columns))

    def term_counts(self, good: DataFrame, count: Callable[[DataFrame], DataFrame],
                    keep: Sequence[str]) -> DataFrame:
        """``count`` rows (``keep`` columns, content_hash, terms, counts) of the ``good``
        documents; stored counts for reused documents. ``count`` keeps ``keep`` and
        content_hash."""
        if not self.reusable:
            return count(good)
        stored = self.terms.select(*KEY, TERMS, COUNTS)
        fresh = count(good.join(stored.select(*KEY), KEY, "left_anti"))
        reused = good.select(*keep, HASH).join(stored, KEY).select(*fresh.columns)
        return fresh.unionByName(reused)

    def word_stats(self, terms: DataFrame, counted: DataFrame, report: Stats
                   ) -> DataFrame:
        """Statistics of the ``counted`` term rows; from the stored ones and the change when
        the state is reusable."""
        if not self.reusable:
            report.counts["vocabulary_update"] = "full"
            return word_stats(counted)
        before = self.terms.where("counted").select(*KEY, TERMS, COUNTS)
        now = counted.select(*KEY, TERMS, COUNTS)
        added = now.join(before.select(*KEY), KEY, "left_anti")
        removed = before.join(now.select(*KEY), KEY, "left_anti")
        report.counts["vocabulary_update"] = "incremental"
        report.counts["documents_added"] = added.count()
        report.counts["documents_removed"] = removed.count()
        return update_word_stats(self.stats, added, removed)

    def write(self, out: AtomicOutput, documents: DataFrame, terms: DataFrame,
              counted: DataFrame, stats: DataFrame) -> None:
        out.write_parquet("state/documents", documents)
        flagged = terms.join(counted.select(*KEY).withColumn("counted", F.lit(True)), KEY,
                             "left").select(*KEY, F.coalesce("counted", F.lit(False))
                                            .alias("counted"), TERMS, COUNTS)
        out.write_parquet("state/terms", flagged)
        out.write_parquet("state/word_stats", stats)
        out.write_text("state/meta.json", json.dumps({"version": STATE_VERSION,
                                                      **self.fingerprint}, sort_keys=True))


def check_parquet(spark: SparkSession, path: str) -> None:
    """Raise ValueError when the Parquet folder ``path`` is missing or a data file in it is
    cut short (no ``PAR1`` at its end): asked here, as Spark would log a Java trace for it."""
    if not path_exists(spark, path):
        raise ValueError(f"{path} is missing")
    fs, folder = hadoop_fs(spark, path)
    for status in fs.listStatus(folder):
        name = status.getPath().getName()
        if status.isFile() and not name.startswith(("_", ".")) and (
                status.getLen() < 12 or read_bytes(spark, status.getPath().toString(),
                                                   last=4) != b"PAR1"):
            raise ValueError(f"{path}/{name} is not a whole Parquet file (cut short?)")


def _read_parquet(spark: SparkSession, path: str, columns: Sequence[str], stack: ExitStack,
                  drop: Sequence[str] = ()) -> DataFrame:
    """A Parquet folder of an earlier run, read whole now (a damaged file fails here, not in
    the middle of this run), with the ``columns`` it must have."""
    check_parquet(spark, path)
    df = spark.read.parquet(path)
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{path} lacks the columns {missing}")
    return local_checkpoint(df.drop(*drop), stack)


def revalidated(urls: DataFrame, previous: DataFrame,
                fetch: Callable[[DataFrame], DataFrame], report: Stats,
                stack: ExitStack) -> DataFrame:
    """Fetch ``urls``, sending the stored page's validators (``previous``: good stored pages)
    as conditional headers; a 304 keeps the stored page (its HTML, type, final URL, status),
    with this run's fetch time and attempts. The result is materialised (each URL fetched
    once) and kept until ``stack`` closes."""
    stored = ("final_url", "status", "content_type", "html", "etag", "last_modified",
              "charset", "charset_source")
    for c in stored:
        if c not in previous.columns:  # pages of an older run
            previous = previous.withColumn(c, F.lit(None).cast("string"))
    fetched = fetch(urls.join(previous.select("url", "etag", "last_modified"), "url", "left"))
    kept = previous.select("url", *[F.col(c).alias(f"_p_{c}") for c in stored])
    joined = fetched.join(kept, "url", "left")
    same = (F.col("status") == 304) & F.col("error").isNull() & F.col("_p_html").isNotNull()
    cols = []
    for c in fetched.columns:
        if c in ("etag", "last_modified"):
            cols.append(F.when(same, F.coalesce(F.col(c), F.col(f"_p_{c}")))
                        .otherwise(F.col(c)).alias(c))
        elif c in stored:
            cols.append(F.when(same, F.col(f"_p_{c}")).otherwise(F.col(c)).alias(c))
        else:
            cols.append(F.col(c))
    out = local_checkpoint(joined.select(*cols, same.alias("_304")), stack)
    report.counts["pages_revalidated"] = previous.count()
    report.counts["pages_not_modified"] = out.where("_304").count()
    return out.drop("_304")
