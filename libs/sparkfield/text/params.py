"""The bag_of_words job's parameters: conf keys, flags, the table in docs/jobs/bag_of_words.md
and the typed parameters the code reads (``BAG_OF_WORDS.parse``) come from here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sparkfield.core.errors import ConfigError
from sparkfield.core.params import JobSchema, Param

BAG_OF_WORDS = JobSchema("bag_of_words", [
    Param("source.urls", "str", None, "text file, one URL a line", flag="--urls",
          group="source"),
    Param("source.html_dir", "str", None, "directory of saved HTML pages, read recursively "
          "(every file at any depth; names starting with . or _ are skipped)",
          flag="--html-dir", group="source"),
    Param("source.pages", "str", None, "Parquet pages/ of an earlier run", flag="--pages",
          group="source"),
    Param("source.warc", "str", None, "web archive: a WARC/WET file (.warc, .warc.gz), a "
          "folder of them or a glob; file:, hdfs:// or s3:// (pyarrow.fs), or a path without "
          "a scheme on fs.defaultFS (local unless the cluster's default is another)",
          flag="--warc", group="source"),
    Param("vocab_size", "int", 200, "the most frequent tokens kept", flag="--vocab-size",
          ge=1),
    Param("vector", "str", "binary", "vector weights", flag="--vector",
          choices=("binary", "count", "tfidf")),
    Param("stopwords", "str", "none", "stopwords left out of the vocabulary (english: NLTK's "
          "list, bundled)", flag="--stopwords", choices=("none", "english")),
    Param("min_df", "int", 1, "documents a token must occur in", flag="--min-df", ge=1),
    Param("extract", "str", "main", "main: the page's main content, without menus, footers "
          "and other boilerplate (trafilatura); selector: the text of the selector elements",
          flag="--extract", choices=("main", "selector")),
    Param("selector", "str", "p", "CSS selector of the text elements for extract: selector "
          "(given alone as a flag, it implies --extract selector)", flag="--selector"),
    Param("refresh", "bool", False, "fetch and parse every page again instead of "
          "revalidating the output's pages/", flag="--refresh"),
    Param("keep_duplicates", "bool", False, "count near-duplicate pages (duplicates.csv) in "
          "the vocabulary too", flag="--keep-duplicates"),
    Param("duplicates.threshold", "fraction", 0.8, "Jaccard similarity of the shingle sets at "
          "or above which two pages are near-duplicates (MinHash LSH; pages with the same set "
          "are grouped, not compared)"),
    Param("duplicates.shingle_words", "int", 5, "words per shingle", ge=1),
    Param("duplicates.hash_tables", "int", 16, "LSH bands (hash tables): two pages are "
          "compared when one band's MinHash values are all equal", ge=1),
    Param("duplicates.band_rows", "int", 4, "MinHash values per band: more finds fewer "
          "pairs below the threshold, fewer finds more of those at it", ge=1),
    Param("warc_output", "bool", True, "with --urls: write every fetched page as WARC "
          "(warc/part-NNNNN.warc.gz: request, response or revisit records); other sources "
          "fetch nothing and write none", flag="--warc-output"),
    Param("fetch_partitions", "int", None, "fetch partitions (hosts are packed onto them); "
          "null: 4 x default parallelism", ge=1),
    Param("fetch.user_agent", "str", "sparkfield-bot/0.1 (+https://example.invalid/bot)",
          "User-Agent of every request, robots.txt matched against it"),
    Param("fetch.delay_s", "float", 1.0, "wait between two requests to the same host, a redirect's "
          "included", ge=0),
    Param("fetch.connect_timeout_s", "float", 5.0, "connect timeout", gt=0),
    Param("fetch.read_timeout_s", "float", 20.0, "longest wait between two reads", gt=0),
    Param("fetch.total_timeout_s", "float", 30.0, "a whole request with its redirects, and each "
          "robots.txt on its own (the polite waits before redirects do not count; a trickling "
          "server ends here)", gt=0),
    Param("fetch.max_retries", "int", 3, "retries on connection errors, 429 and 5xx", ge=0),
    Param("fetch.backoff_s", "float", 1.0, "first retry wait, doubled each time", ge=0),
    Param("fetch.max_backoff_s", "float", 60.0, "longest retry wait", ge=0),
    Param("fetch.max_retry_after_s", "float", 120.0, "a longer Retry-After gives the URL up "
          "instead of waiting", ge=0),
    Param("fetch.max_redirects", "int", 5, "redirects followed; each is a request of its "
          "own, which robots.txt may refuse", ge=0),
    Param("fetch.max_bytes", "int", 5_000_000, "largest page read", gt=0),
    Param("fetch.respect_robots", "bool", True, "obey robots.txt for the user agent"),
    Param("fetch.robots_max_bytes", "int", 500_000, "a longer robots.txt is read up to this "
          "size", gt=0),
    Param("fetch.max_crawl_delay_s", "float", 60.0, "robots.txt Crawl-delay is honoured; a "
          "longer one gives the host up", ge=0),
], output="out/bag_of_words")

# the typed parameters BAG_OF_WORDS.parse builds: the whole job section and two of its sections
BagOfWordsParams = BAG_OF_WORDS.params_type()
FetchSettings = BAG_OF_WORDS.params_type("fetch")
DuplicateSettings = BAG_OF_WORDS.params_type("duplicates")

SOURCES = ("urls", "html_dir", "pages", "warc")


def fetch_settings(values: dict[str, Any] | None = None) -> FetchSettings:
    """The fetch section: ``values`` over the schema's defaults, checked as in a conf file."""
    return BAG_OF_WORDS.parse({"fetch": values or {}}).fetch


def duplicate_settings(values: dict[str, Any] | None = None) -> DuplicateSettings:
    """The duplicates section: ``values`` over the schema's defaults, checked as in a conf
    file."""
    return BAG_OF_WORDS.parse({"duplicates": values or {}}).duplicates


@dataclass(frozen=True)
class Derived:
    """What a run takes beyond the parameters' own values."""

    source: str  # the one source given (SOURCES)
    path: str  # its path
    seed: int  # of --sample (practices.sample_seed)


def derive(p: BagOfWordsParams, seed: int) -> Derived:
    """The values derived from ``p``; ConfigError where keys disagree (the schema checks each
    key alone)."""
    given = [k for k in SOURCES if getattr(p.source, k)]
    if len(given) != 1:
        raise ConfigError("give exactly one source: --urls FILE, --html-dir DIR, "
                          f"--pages PARQUET or --warc PATH (got {given or 'none'})")
    if p.extract == "selector" and not p.selector.strip():
        raise ConfigError("extract: selector needs a CSS selector")
    return Derived(source=given[0], path=getattr(p.source, given[0]), seed=seed)
