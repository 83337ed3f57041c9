"""What a fetch got, written as WARC (ISO 28500) so that other tools can replay and check a crawl.

Each Spark task writes the pages it holds as one ``warc/part-NNNNN.warc.gz`` (per-record
gzip, WARC/1.1, a ``warcinfo`` record first) with pyarrow.fs: no page passes through the driver.
A part is written under a hidden temporary name and renamed when complete, so a retried task
never leaves half a part. Per page: a ``request`` record (the request line and headers as sent)
and a ``response`` record, or a ``revisit`` record (profile server-not-modified) for a page
answered 304 Not Modified; a page without an HTTP response (DNS error, timeout, robots.txt)
has no record, one given up after too many redirects those of the redirects it received. Heads
are written byte for byte as sent and received (header values are latin-1 on the wire).

The fetch keeps each exchange (fetch.CAPTURED_SCHEMA): the heads as sent and received, and the
body exactly as received once read whole. As in Common Crawl's archives, the payload is stored
without its transfer and content encodings (HTTP clients undo both as they read): the
``Content-Encoding``, ``Transfer-Encoding`` and ``Content-Length`` received are kept as
``X-Crawler-*`` headers and ``Content-Length`` is the stored payload's. A body that was not read
whole (an error status, too large, cut off) leaves an empty payload marked ``WARC-Truncated``.
"""

from __future__ import annotations

import functools
import io
import re
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield import __version__
from sparkfield.core.errors import InputError
from sparkfield.core.io import hadoop_fs
from sparkfield.text.crawl.fetch import CAPTURED_SCHEMA

__all__ = ["CAPTURE_COLS", "NOT_MODIFIED_PROFILE", "warc_target", "with_capture", "write_warc"]

NOT_MODIFIED_PROFILE = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
# what a fetched page carries for its records beyond PAGES_SCHEMA (dropped once written): the
# exchange the fetch captured, whether it was a 304, and the earlier capture a 304 refers to
REFERS_COLS = ("warc_refers_uri", "warc_refers_date")
CAPTURE_COLS = (*CAPTURED_SCHEMA.names, "warc_not_modified", *REFERS_COLS)
# received headers that describe the encodings undone before the payload was stored
UNDONE = ("Content-Encoding", "Transfer-Encoding", "Content-Length")
ISO_DATE = "yyyy-MM-dd'T'HH:mm:ss.SSSSSS'Z'"  # fetched_at is UTC (spark.sql.session.timeZone)
PAGE_COLS = ("url", "final_url", "status")
COUNTS_SCHEMA = T.StructType([
    T.StructField("part", T.StringType(), False),
    T.StructField("kind", T.StringType(), False),  # a WARC-Type, or NO_RESPONSE
    T.StructField("n", T.LongType(), False),
])
NO_RESPONSE = "pages_without_response"


# ---- driver ------------------------------------------------------------------------------

def with_capture(fetched: DataFrame, previous: DataFrame | None) -> DataFrame:
    """``fetched`` pages (with CAPTURED_SCHEMA) plus the other CAPTURE_COLS: whether the answer
    was 304 Not Modified (known only before revalidation keeps the stored page) and, from
    ``previous`` (the stored pages whose validators were sent), the earlier capture."""
    not_modified = F.coalesce((F.col("status") == 304) & F.col("error").isNull(), F.lit(False))
    fetched = fetched.withColumn("warc_not_modified", not_modified)
    if previous is None:
        return fetched.select("*", *[F.lit(None).cast("string").alias(c) for c in REFERS_COLS])
    earlier = previous.select(
        "url", F.coalesce("final_url", "url").alias("warc_refers_uri"),
        F.date_format("fetched_at", ISO_DATE).alias("warc_refers_date"))
    return fetched.join(earlier, "url", "left")


def warc_target(spark: SparkSession, path: str, output: str) -> str:
    """The URI pyarrow.fs writes ``path`` (a folder in the output's staging directory) at,
    created now: an output pyarrow cannot open fails here, before anything is fetched."""
    qualified = _qualified(spark, path)
    uri = re.sub(r"^file:(//)?", "", qualified)  # a local path for pyarrow
    try:
        import pyarrow.fs as pafs

        pa_fs, where = pafs.FileSystem.from_uri(uri)
        pa_fs.create_dir(where, recursive=True)
    except Exception as exc:  # any filesystem pyarrow cannot open or write
        raise InputError(
            f"cannot write the WARC parts of the output {output}: pyarrow.fs cannot write "
            f"{qualified} ({type(exc).__name__}: {str(exc).splitlines()[0][:200]}); give an "
            "output pyarrow opens (local, hdfs://, s3://) or --no-warc-output") from exc
    return uri


def _qualified(spark: SparkSession, path: str) -> str:
    """``path`` with its scheme: a path without one is where Hadoop puts it (the default
    filesystem, relative to its working directory)."""
    if "://" in path or path.startswith("file:"):
        return path
    fs, jpath = hadoop_fs(spark, path)
    return str(fs.makeQualified(jpath).toString())


def write_warc(pages: DataFrame, target: str) -> dict[str, Any]:
    """Write the WARC parts of ``pages`` (with CAPTURE_COLS) under ``target``, one per task
    that holds pages with a response; what the listed parts hold, for the run report."""
    cols = [F.col(c) for c in PAGE_COLS] + [
        F.date_format("fetched_at", ISO_DATE).alias("fetched_at"),
        *[F.col(c) for c in CAPTURE_COLS]]
    rows = pages.select(*cols).mapInPandas(part_writer(target), COUNTS_SCHEMA).collect()
    parts = set(list_parts(target))
    records: Counter = Counter()
    for r in rows:
        if r["kind"] != NO_RESPONSE and r["part"] in parts:
            records[r["kind"]] += r["n"]
    return {"parts": len(parts), "records": dict(sorted(records.items())),
            NO_RESPONSE: sum(r["n"] for r in rows if r["kind"] == NO_RESPONSE)}


def list_parts(target: str) -> list[str]:
    """The names of the complete parts under ``target`` (temporary names are hidden)."""
    import pyarrow.fs as pafs

    fs, where = pafs.FileSystem.from_uri(target)
    infos = fs.get_file_info(pafs.FileSelector(where, allow_not_found=True))
    return sorted(i.base_name for i in infos if i.type == pafs.FileType.File
                  and i.base_name.startswith("part-") and i.base_name.endswith(".warc.gz"))


# ---- executors ---------------------------------------------------------------------------

def part_writer(target: str) -> Callable[[Iterator[pd.DataFrame]], Iterator[pd.DataFrame]]:
    """A ``mapInPandas`` function: the task's pages in, written as one part; out one row per
    record type (COUNTS_SCHEMA) and the pages without a response."""

    def run(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        name = f"part-{ctx.partitionId():05d}.warc.gz"
        part = _Part(target, name, f".{name}.{ctx.taskAttemptId()}.tmp")
        try:
            for batch in batches:
                for row in _rows(batch):
                    part.add(row)
            part.close()
        except BaseException:
            part.discard()
            raise
        counts = [(name, kind, n) for kind, n in part.counts.items()]
        if counts:
            yield pd.DataFrame(counts, columns=COUNTS_SCHEMA.names)

    return run


def _rows(batch: pd.DataFrame) -> Iterator[dict[str, Any]]:
    """The batch's rows as dicts, nulls as None."""
    clean = batch.astype(object).where(batch.notna(), None)
    yield from clean.to_dict("records")


class _Part:
    """One part being written: opened at the first page with a response, renamed into place
    by :meth:`close`."""

    def __init__(self, target: str, name: str, tmp: str):
        import pyarrow.fs as pafs

        self.fs, base = pafs.FileSystem.from_uri(target)
        self.final, self.tmp, self.name = f"{base}/{name}", f"{base}/{tmp}", name
        self.counts: Counter = Counter()
        self.stream: Any = None
        self.writer: Any = None

    def add(self, row: dict[str, Any]) -> None:
        if row["status"] is None:  # no final HTTP response: only the redirects it received
            self.counts[NO_RESPONSE] += 1
            if row["warc_redirects"] is None or not len(row["warc_redirects"]):
                return
        if self.writer is None:
            self._open()
        for record in page_records(self.writer, row):
            self.writer.write_record(record)
            self.counts[record.rec_type] += 1

    def _open(self) -> None:
        import pyarrow.fs as pafs
        from warcio.warcwriter import WARCWriter

        # made by the driver (warc_target); gone when the run was stopped and its staging
        # deleted: a task still running then must not make it again, half written
        folder = self.final.rsplit("/", 1)[0]
        if self.fs.get_file_info(folder).type == pafs.FileType.NotFound:
            raise RuntimeError(f"{folder} is gone (the run was stopped): part {self.name} "
                               "not written")
        self.stream = self.fs.open_output_stream(self.tmp)
        self.writer = WARCWriter(self.stream, gzip=True, warc_version="1.1")
        self.writer.write_record(self.writer.create_warcinfo_record(self.name, {
            "software": f"sparkfield/{__version__}", "format": "WARC File Format 1.1",
            "conformsTo": "https://iipc.github.io/warc-specifications/specifications/"
                          "warc-format/warc-1.1/"}))
        self.counts["warcinfo"] += 1

    def close(self) -> None:
        if self.stream is not None:
            self.stream.close()
            self.fs.move(self.tmp, self.final)
            self.stream = None

    def discard(self) -> None:
        if self.stream is not None:
            try:
                self.stream.close()
            finally:
                self.fs.delete_file(self.tmp)
                self.stream = None


def page_records(writer: Any, row: dict[str, Any]) -> list[Any]:
    """The records of a page with an HTTP response: a request and a response record for each
    redirect followed, then the request and the response (or revisit) record of the last
    exchange; each request and its answer name each other in WARC-Concurrent-To. A URL given up
    after too many redirects (no status) has the records of the redirects it received."""
    records = []
    for hop in row["warc_redirects"] if row["warc_redirects"] is not None else []:
        exchange = {"fetched_at": row["fetched_at"], **{f"warc_{k}": v for k, v in hop.items()}}
        uri = hop["url"]
        records += _linked(_request(writer, uri, exchange), _response(writer, uri, exchange))
    if row["status"] is None:
        return records
    uri = row["final_url"] or row["url"]
    answer = (_revisit if row["warc_not_modified"] else _response)(writer, uri, row)
    return records + _linked(_request(writer, uri, row), answer)


def _linked(request: Any, answer: Any) -> list[Any]:
    """``request`` and ``answer``, each naming the other in WARC-Concurrent-To."""
    request.rec_headers.add_header("WARC-Concurrent-To",
                                   answer.rec_headers.get_header("WARC-Record-ID"))
    answer.rec_headers.add_header("WARC-Concurrent-To",
                                  request.rec_headers.get_header("WARC-Record-ID"))
    return [request, answer]


def _as_sent(line: str, headers: list[tuple[str, str]], **kwargs: Any) -> Any:
    """A head whose bytes in the record are those sent or received (see :func:`_head_class`)."""
    return _head_class()(line, headers, **kwargs)


@functools.cache
def _head_class() -> type:
    """warcio's StatusAndHeaders writing its lines in latin-1, as HTTP header values are
    (http.client decodes them so), rather than percent-encoding what is not ASCII."""
    from warcio.statusandheaders import StatusAndHeaders

    class AsSent(StatusAndHeaders):
        def compute_headers_buffer(self, header_filter: Any = None) -> None:
            try:
                self.headers_buff = self.to_bytes(header_filter, encoding="latin-1")
            except UnicodeEncodeError:  # not from the wire: warcio's percent-encoding
                super().compute_headers_buffer(header_filter)

    return AsSent


def _head(text: str) -> tuple[str, list[tuple[str, str]]]:
    """A captured head (CRLF-joined lines) as its first line and its headers."""
    first, *lines = text.split("\r\n")
    return first, [(k, v.lstrip(" ")) for k, _, v in (line.partition(":") for line in lines)]


def _request(writer: Any, uri: str, row: dict[str, Any]) -> Any:
    line, headers = _head(row["warc_request"])
    http_headers = _as_sent(line, headers, is_http_request=True)
    return writer.create_warc_record(uri, "request", payload=io.BytesIO(b""),
                                     http_headers=http_headers,
                                     warc_headers_dict=_known({"WARC-Date": row["fetched_at"]}))


def _received(row: dict[str, Any], payload: bytes) -> Any:
    """The response head as received, the encodings undone on the payload renamed
    ``X-Crawler-*`` and ``Content-Length`` the payload's."""
    line, headers = _head(row["warc_response"])
    protocol, _, status = line.partition(" ")
    kept = [(f"X-Crawler-{k}" if k.title() in UNDONE else k, v) for k, v in headers]
    return _as_sent(status, [*kept, ("Content-Length", str(len(payload)))], protocol=protocol)


def _response(writer: Any, uri: str, row: dict[str, Any]) -> Any:
    """The response record: the payload is the body as received; a response whose body was not
    read whole (an error status, not HTML by its type, too large, cut off) is marked
    truncated."""
    payload = row["warc_payload"]
    warc = {"WARC-Date": row["fetched_at"]}
    if payload is None:
        warc["WARC-Truncated"] = "unspecified"
    body = bytes(payload or b"")
    return writer.create_warc_record(uri, "response", payload=io.BytesIO(body),
                                     http_headers=_received(row, body),
                                     warc_headers_dict=_known(warc))


def _revisit(writer: Any, uri: str, row: dict[str, Any]) -> Any:
    """The revisit record of a 304 Not Modified: its head only, pointing at the earlier capture
    where the stored page says which."""
    warc = {"WARC-Date": row["fetched_at"], "WARC-Profile": NOT_MODIFIED_PROFILE,
            "WARC-Refers-To-Target-URI": row["warc_refers_uri"],
            "WARC-Refers-To-Date": row["warc_refers_date"]}
    return writer.create_warc_record(uri, "revisit", payload=io.BytesIO(b""),
                                     http_headers=_received(row, b""),
                                     warc_headers_dict=_known(warc))


def _known(headers: dict[str, str | None]) -> dict[str, str]:
    """The WARC headers with a value (a missing date is the time of writing)."""
    return {k: v for k, v in headers.items() if v}
