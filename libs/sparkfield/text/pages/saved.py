"""Saved pages (``--html-dir``) as if fetched: every file under the folder is one row of
``pages``, a page (status 200, its HTML) or a reject with its reason (an empty file, an image,
binary data, a broken link).

The folder is listed once on the driver (:mod:`sparkfield.text.pages.listing`); Spark's file source
reads the pages, and the few files it never lists (``_name`` files, which it takes for
metadata) are read on the driver. Spark's file source also skips empty files without a word:
here they are rejects.
"""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.core.errors import InputError
from sparkfield.core.io import read_bytes, require_path
from sparkfield.core.practices import BALANCE_MAX_ROWS, place, sample, task_partitions
from sparkfield.core.report import Stats
from sparkfield.core.workers import in_worker
from sparkfield.text.crawl.fetch import conform_pages
from sparkfield.text.pages.charset import decode_page
from sparkfield.text.pages.listing import Listing, list_files
from sparkfield.text.pages.sniff import non_html_type

FILES_SCHEMA = T.StructType([
    T.StructField("path", T.StringType(), False),
    T.StructField("length", T.LongType(), False),
    T.StructField("content", T.BinaryType(), True),
    T.StructField("error", T.StringType(), True),
    T.StructField("error_detail", T.StringType(), True),
])
DECODED = ("url string, html string, error string, error_detail string, content_type string, "
           "charset string, charset_source string")


def parse_partitions(spark: SparkSession, html_bytes: float) -> int:
    """Partitions of the parse stage for ``html_bytes`` of pages: one per task slot, more when
    one would hold more than the file source puts in a partition
    (``spark.sql.files.maxPartitionBytes``)."""
    limit = spark._jvm.org.apache.spark.network.util.JavaUtils.byteStringAsBytes(
        spark.conf.get("spark.sql.files.maxPartitionBytes"))
    return task_partitions(spark, html_bytes, limit)


def decode_file(path: str, raw: bytes) -> tuple:
    """(html, error, error_detail, content_type, charset, charset_source) of a saved file."""
    if not raw:
        return None, "empty", "empty file (0 bytes)", None, None, None
    kind = non_html_type(raw, path.rsplit("/", 1)[-1])
    if kind:
        return None, "not_html", f"not HTML: {kind}", kind.split(" ")[0], None, None
    text, charset, source = decode_page(raw)
    return text, None, None, "text/html", charset, source


def _decode_files(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    for b in batches:
        rows = []
        for path, content, error, detail in zip(b["path"], b["content"], b["error"],
                                                b["error_detail"], strict=True):
            if isinstance(error, str):  # decided on the driver (a broken link, ...)
                rows.append((path, None, error, detail, None, None, None))
            else:
                rows.append((path, *decode_file(path, bytes(content or b""))))
        yield pd.DataFrame(rows, columns=[c.split()[0] for c in DECODED.split(", ")])


def _file_source(spark: SparkSession, path: str, listing: Listing) -> DataFrame:
    """Spark's file source over the listed non-empty files: the folder itself when Spark's own
    listing finds the same files (the fast way), else the files one by one."""
    reader = spark.read.format("binaryFile")
    if listing.plain:
        files = reader.option("recursiveFileLookup", "true").load(path)
    else:
        wanted = [f for f, n in listing.files.items() if n > 0]
        if not wanted:
            return spark.createDataFrame([], FILES_SCHEMA)
        files = reader.load(wanted)
    return files.where(F.col("length") > 0).select(
        "path", "length", "content", F.lit(None).cast("string").alias("error"),
        F.lit(None).cast("string").alias("error_detail"))


def _driver_rows(spark: SparkSession, listing: Listing, listed: set[str]) -> list[tuple]:
    """Files the file source left out: the empty and unreadable ones (rejects) and the pages
    it does not list (``_name`` files, read here)."""
    rows: list[tuple] = []
    for f, n in listing.files.items():
        if n == 0:
            rows.append((f, 0, bytearray(), "empty", "empty file (0 bytes)"))
        elif f not in listed:
            data = bytearray(read_bytes(spark, f))
            rows.append((f, len(data), data, None, None))
    rows += [(f, 0, bytearray(), "unreadable", why) for f, why in listing.unreadable.items()]
    return rows


def pages_from_html_dir(spark: SparkSession, path: str, fraction: float | None = None,
                        seed: int = 42, stats: Stats | None = None
                        ) -> tuple[DataFrame, int, int]:
    """Saved pages as if fetched (url = the file's URI, status 200), every file under ``path``
    at any depth, how many files there are (after sampling) and how many hidden files (dot
    files, files in folders named ``_...`` or ``.``...) were left out. Directory links that
    lead to a folder listed already go into ``stats``."""
    require_path(spark, path, "HTML directory")
    listing = list_files(spark, path)
    if not listing.files and not listing.unreadable:
        raise InputError(f"no files under the HTML directory {path}")
    if listing.revisits and stats is not None:
        stats.counts["directory_links_not_followed"] = listing.revisits
        stats.note(f"{listing.revisits} directory link(s) under {path} lead to a folder read "
                   "already (a loop, say): each folder is read once")
    source = _file_source(spark, path, listing)
    # the listing only (the content is not read for it): every file's size
    listed = {r["path"]: r["length"] for r in source.select("path", "length").collect()}
    extra = _driver_rows(spark, listing, set(listed))
    files = source.unionByName(spark.createDataFrame(extra, FILES_SCHEMA)) if extra else source
    if fraction is None:
        sizes = {**listed, **{r[0]: r[1] for r in extra}}
    else:
        files = sample(files, fraction, seed)
        sizes = {r["path"]: r["length"] for r in files.select("path", "length").collect()}
    if not sizes:
        raise InputError(f"no files under the HTML directory {path}")
    # laid out for the parse stage by those sizes: the file source packs files into partitions
    # of very unequal bytes, and parsing costs about a page's size (with very many files,
    # dealt out: the sizes even out)
    parts = parse_partitions(spark, sum(sizes.values()))
    files = (place(files, "path", sizes, parts)[0] if len(sizes) <= BALANCE_MAX_ROWS
             else files.repartition(parts))
    df = files.drop("length").mapInPandas(in_worker(_decode_files), DECODED)
    return conform_pages(df.select(
        "url", F.col("url").alias("final_url"),
        F.when(F.col("error").isNull(), F.lit(200)).alias("status"),
        F.current_timestamp().cast("timestamp").alias("fetched_at"), "content_type", "html",
        "error", "error_detail", F.lit(0).alias("attempts"), "charset", "charset_source")), \
        len(sizes), listing.hidden
