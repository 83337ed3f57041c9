"""Web archives (WARC and WET, ISO 28500) as pages: ``--warc PATH``.

The files are listed on the driver (a file, a folder read recursively or a glob, on any
filesystem ``pyarrow.fs`` opens from a URI) and read by the executors: the driver packs them by
size into one group a task (only their paths travel), each task streams its files' records
(plain or per-record gzip), one record in memory at a time and at most ``max_bytes`` of its
payload. Records of the shape every well-formed archive has are cut out exactly and inflated
whole (:mod:`sparkfield.text.warc.records`, ISA-L's inflater where installed); from the first
record of any other shape on, the rest of the file is read by warcio's ArchiveIterator. Both
paths hand their records to the same code, so they give the same rows. What comes back is one
row per page, per reject and per (record type, count):

* a ``response`` record with an HTTP status 2xx and an HTML Content-Type is a page (url =
  WARC-Target-URI, fetched_at = WARC-Date, the payload de-chunked and decompressed, decoded by
  the charset rules of :mod:`sparkfield.text.pages.charset`);
* a WET ``conversion`` record is a page whose ``html`` holds plain text already
  (content_type ``text/plain``): the parse step takes it as the document's text;
* other responses (another status, another media type) and every other record type are counted;
* broken input (a record cut short, a wrong Content-Length, a missing header, a response
  without HTTP, broken chunking or compression, a gzip member holding several records, a file
  that is not WARC) is a reject with its reason. After a broken record the reader looks for the
  next record start (a gzip member or a ``WARC/1.x`` line) and goes on from there.

Why one module: both record paths (exact framing and warcio) hand their records to the same row
builders here, which is what makes them give the same rows."""

from __future__ import annotations

import contextlib
import io
from array import array
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import accumulate
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.core.io import rejects_of
from sparkfield.core.practices import balance
from sparkfield.core.workers import in_worker
from sparkfield.text.crawl.fetch import conform_pages
from sparkfield.text.crawl.request import http_reason
from sparkfield.text.pages.charset import declared_codec, decode_page, header_charset
from sparkfield.text.pages.saved import parse_partitions
from sparkfield.text.pages.sniff import sent_as_html_type
from sparkfield.text.warc.files import Listing, list_warc_files, on_default_fs, open_filesystem
from sparkfield.text.warc.http_body import BodyError, coding_list, dechunk, decode_body
from sparkfield.text.warc.seek import (
    CHUNK,
    NOT_CUT,
    Positioned,
    cut_short,
    missing_header,
    next_start,
    open_at,
)

__all__ = ["RECORDS_SCHEMA", "TEXT_TYPE", "WarcCounts", "read_warc",
           "warc_counts", "warc_pages", "warc_rejects"]

TEXT_TYPE = "text/plain"  # the content_type of a page whose html column holds text (WET)
HTML_TYPES = ("text/html", "application/xhtml+xml")
RECORDS_SCHEMA = T.StructType([
    T.StructField("kind", T.StringType(), False),  # page | reject | records | skipped
    T.StructField("file", T.StringType(), True),
    T.StructField("offset", T.LongType(), True),
    T.StructField("warc_type", T.StringType(), True),
    T.StructField("url", T.StringType(), True),
    T.StructField("fetched_at", T.TimestampType(), True),
    T.StructField("status", T.IntegerType(), True),
    T.StructField("content_type", T.StringType(), True),
    T.StructField("html", T.StringType(), True),
    T.StructField("charset", T.StringType(), True),
    T.StructField("charset_source", T.StringType(), True),
    T.StructField("reason", T.StringType(), True),  # a reject's or a skipped record's reason
    T.StructField("detail", T.StringType(), True),
    T.StructField("n", T.LongType(), True),  # records counted (kinds records and skipped)
])
REJECT_FIELDS = ("file", "offset", "warc_type", "url", "detail")
MAX_REJECTS_PER_FILE = 1000  # a file this broken is given up (one more reject says so)
PLANNED_MAX_FILES = 100_000  # up to this many files, each task's list travels in the plan


# ---- reading (executors) ------------------------------------------------------------------

@dataclass
class _FileReader:
    """One file's rows: pages, rejects and the counts by record type."""

    filesystem: Any
    path: str
    max_bytes: int
    framed: bool = True  # False: every record read by warcio's ArchiveIterator
    types: Counter = field(default_factory=Counter)
    skipped: Counter = field(default_factory=Counter)
    rejects: int = 0
    size: int | None = None  # the file's, once a reject asks whether the file was cut short

    def rows(self) -> Iterator[dict]:
        resume = (yield from self._framed()) if self.framed else 0
        start = None if resume is None else open_at(self.filesystem, self.path, resume)
        resyncing, going_on = False, True  # warcio's first run goes on from the framed records
        while start is not None and (going_on or self.rejects < MAX_REJECTS_PER_FILE):
            going_on = False
            failed = yield from self._records(start, resyncing)
            if failed is None:
                break
            start, resyncing = next_start(self.filesystem, self.path, failed), True
        if self.rejects >= MAX_REJECTS_PER_FILE:
            yield self._reject(None, None, None, "too_many_errors",
                               f"more than {MAX_REJECTS_PER_FILE} broken records: the rest of "
                               "the file is not read")
        if not self.types and not self.rejects:
            yield self._reject(0, None, None, "empty", "no WARC record in the file")
        yield from self._counts()

    def _framed(self) -> Iterator[dict]:
        """The rows of the records framed exactly by :mod:`sparkfield.text.warc.records`, read
        by the same code as warcio's; returns None when that was the whole file, else the
        offset warcio's reader goes on from (a record that is not framed, and all after it)."""
        from sparkfield.text.warc.records import frames

        stream = self.filesystem.open_input_stream(self.path, compression=None,
                                                   buffer_size=CHUNK)
        try:
            found = frames(stream, self.max_bytes + CHUNK)
            while True:
                try:
                    frame = next(found)
                except StopIteration as done:
                    return done.value
                try:
                    record = _framed_record(frame)
                except Exception:  # warcio fails on it too: its reader says how
                    return frame.offset
                row = self._record(frame.offset, record)
                if row["kind"] != "none":
                    yield row
        finally:
            stream.close()

    def _records(self, src: Positioned, resyncing: bool) -> Iterator[dict]:
        """The rows of the records from ``src`` on; returns the offset of a record that could
        not be read (the next one is looked for past it), None when the file is done."""
        it, start = _QuietIterator(src), src.pos
        pending, errors, first = None, 0, True
        while True:
            try:
                record = next(it)
            except StopIteration:
                yield from self._settle(pending, it.err_count > errors)
                cut = it.offset < self._size() and cut_short(self.filesystem, self.path,
                                                              it.offset, self._size())
                if cut:  # warcio's reader saw no record in what is left of the file
                    yield self._reject(it.offset, None, None, "truncated", cut)
                return None
            except Exception as exc:  # the record at it.offset cannot be parsed
                yield from self._settle(pending, it.err_count > errors)
                if resyncing and first:  # a wrong guess of a record start is no reject
                    return it.offset
                missing = missing_header(self.filesystem, self.path, it.offset)
                row = (self._reject(it.offset, None, None, "missing_header", missing) if missing
                       else self._unreadable(it.offset, exc, first and start == 0))
                yield row
                return None if row["reason"] in ("not_warc", "gzip_members") else it.offset
            yield from self._settle(pending, it.err_count > errors)
            if not str(getattr(record, "format", "warc")).startswith("warc"):  # ARC, or text
                yield self._reject(it.offset, None, None, "not_warc",
                                   f"not a WARC record (read as {record.format}): the rest of "
                                   "the file is not read")
                return None
            errors, first = it.err_count, False
            pending = self._record(it.offset, record)

    def _settle(self, row: dict | None, bad_length: bool) -> Iterator[dict]:
        """The held row of the previous record: a reject when what follows it shows its
        Content-Length wrong (no blank line where the record should end)."""
        if row is None:
            return
        if bad_length and row["kind"] != "reject":
            row = self._reject(row["offset"], row["warc_type"], row["url"], "bad_length",
                               "the record does not end where its Content-Length says")
        if row["kind"] != "none":
            yield row

    def _unreadable(self, offset: int, exc: Exception, at_start: bool) -> dict:
        text = " ".join(str(exc).split())[:300]
        if "non-chunked gzip" in text:
            reason = "gzip_members"
            text = ("a gzip member holds more than one record (the file is gzipped whole, not "
                    "per record; `warcio recompress` fixes it): the rest of the file is not read")
        elif at_start and "Unknown archive format" in text:
            reason = "not_warc"
        elif isinstance(exc, OSError):
            reason = "unreadable"
        else:
            reason = "bad_record"
        return self._reject(offset, None, None, reason, f"{type(exc).__name__}: {text}")

    def _record(self, offset: int, record: Any) -> dict:
        """The row of one record, read to its end (the kind ``none`` for a counted one)."""
        rtype = record.rec_type or "unknown"
        self.types[rtype] += 1
        try:
            if not record.rec_headers.get_header("Content-Length"):
                raise _Bad("missing_header", "no Content-Length header")
            if rtype == "response":
                return _response(record, offset, self.max_bytes, self)
            if rtype == "conversion":
                return _conversion(record, offset, self.max_bytes, self)
            _drain(record)
            return _row("none", offset=offset, warc_type=rtype,
                        url=record.rec_headers.get_header("WARC-Target-URI"))
        except _Bad as bad:
            return self._reject(offset, rtype, record.rec_headers.get_header("WARC-Target-URI"),
                                bad.reason, bad.detail)
        except Exception as exc:  # a payload that breaks while read (chunks, compression)
            return self._reject(offset, rtype, record.rec_headers.get_header("WARC-Target-URI"),
                                "bad_payload", f"{type(exc).__name__}: {exc}"[:300])

    def _reject(self, offset: int | None, rtype: str | None, url: str | None, reason: str,
                detail: str) -> dict:
        """A reject row; ``truncated`` whatever else is wrong when the file ends inside the
        record (warcio reads a record cut in its headers or its gzip member as another fault,
        or as no record at all)."""
        if offset is not None and reason not in NOT_CUT:
            cut = cut_short(self.filesystem, self.path, offset, self._size())
            if cut:
                reason, detail = "truncated", cut
        self.rejects += 1
        return _row("reject", file=self.path, offset=offset, warc_type=rtype, url=url,
                    reason=reason, detail=detail)

    def _size(self) -> int:
        if self.size is None:
            self.size = self.filesystem.get_file_info(self.path).size
        return self.size

    def _counts(self) -> Iterator[dict]:
        for rtype, n in self.types.items():
            yield _row("records", file=self.path, warc_type=rtype, n=n)
        for (rtype, reason), n in self.skipped.items():
            yield _row("skipped", file=self.path, warc_type=rtype, reason=reason, n=n)


class _QuietIterator:
    """warcio's ArchiveIterator whose warnings (a record not followed by a blank line) are
    counted, not printed: the reader turns them into rejects."""

    def __init__(self, src: Positioned):
        from warcio.archiveiterator import ArchiveIterator

        self.inner = ArchiveIterator(src)
        self.records = iter(self.inner)

    @property
    def err_count(self) -> int:
        return self.inner.err_count

    @property
    def offset(self) -> int:
        return self.inner.offset

    def __next__(self) -> Any:
        with contextlib.redirect_stderr(io.StringIO()):
            return next(self.records)


class _Block:
    """A framed record's block as warcio's LimitReader serves it (``limit``: bytes left)."""

    __slots__ = ("data", "end", "pos")

    def __init__(self, data: bytes, start: int, length: int):
        self.data, self.pos, self.end = data, start, start + length

    @property
    def limit(self) -> int:
        return self.end - self.pos

    def tell(self) -> int:
        return self.pos

    def read(self, length: int | None = None) -> bytes:
        stop = self.end if length is None or length < 0 else min(self.end, self.pos + length)
        out, self.pos = self.data[self.pos:stop], stop
        return out

    def readline(self, length: int | None = None) -> bytes:
        stop = self.end if length is None or length < 0 else min(self.end, self.pos + length)
        nl = self.data.find(b"\n", self.pos, stop)
        return self.read((stop if nl < 0 else nl + 1) - self.pos)


_LOADER: list = []


def _framed_record(frame: Any) -> Any:
    """A framed record as warcio's ArchiveIterator makes it (warcio's own code parses the
    HTTP headers, where they are not plain lines); what fails here fails in warcio's iterator
    too. The HTTP headers of requests and revisits are not parsed: they are never read (the
    record is counted and its block drained, wherever its headers end)."""
    from warcio.recordloader import ArcWarcRecord, ArcWarcRecordLoader

    from sparkfield.text.warc.records import plain_headers

    if not _LOADER:  # as ArchiveIterator makes its loader
        _LOADER.append(ArcWarcRecordLoader(verify_http=False, arc2warc=False))
    loader, headers, length = _LOADER[0], frame.headers, frame.length
    rec_type = headers.get_header("WARC-Type")
    uri = loader._ensure_target_uri_format(headers)
    stream, http = _Block(frame.data, frame.start, length), None
    # where warcio parses HTTP headers (a target URI that is None fails here, as in warcio)
    if length and rec_type in loader.HTTP_RECORDS and uri.startswith(loader.HTTP_SCHEMES):
        if rec_type != "response":
            return ArcWarcRecord("warc", rec_type, headers, stream, None,
                                 headers.get_header("Content-Type"), length)
        cut = frame.data.find(b"\r\n\r\n", stream.pos, stream.end)
        if cut >= 0:
            http = plain_headers(frame.data, stream.pos, cut + 4, warc=False)
            if http is not None:
                stream.pos = cut + 4
    if http is None:
        http = loader.load_http_headers(rec_type, uri, stream, length)
    return ArcWarcRecord("warc", rec_type, headers, stream, http,
                         headers.get_header("Content-Type"), length)


class _Bad(Exception):
    """A record that is a reject: its reason and what exactly is wrong."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason, self.detail = reason, detail


def _row(kind: str, **values: Any) -> dict:
    return {"kind": kind, **values}


def _header(record: Any, name: str) -> str:
    value = record.rec_headers.get_header(name)
    if not value:
        raise _Bad("missing_header", f"no {name} header")
    return value


def _warc_date(record: Any) -> datetime:
    value = _header(record, "WARC-Date")
    try:
        stamp = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise _Bad("bad_header", f"WARC-Date is not a date: {value[:60]!r}") from None
    return (stamp.astimezone(UTC) if stamp.tzinfo else stamp).replace(tzinfo=None)


def _read_capped(stream: Any, max_bytes: int) -> bytes:
    out, size = [], 0
    while size <= max_bytes:
        chunk = stream.read(min(CHUNK, max_bytes + 1 - size))
        if not chunk:
            break
        out.append(chunk)
        size += len(chunk)
    if size > max_bytes:
        raise _Bad("too_large", f"payload over {max_bytes} bytes")
    return b"".join(out)


def _drain(record: Any) -> None:
    """Read the rest of the record; a file that ends first cuts it short."""
    while record.raw_stream.read(CHUNK):
        pass
    if getattr(record.raw_stream, "limit", 0) > 0:
        raise _Bad("truncated", f"the record ends {record.raw_stream.limit} bytes before its "
                   f"Content-Length ({record.length})")


def _payload(record: Any, max_bytes: int) -> bytes:
    """The HTTP payload de-chunked and decoded (:mod:`sparkfield.text.warc.http_body`): broken
    chunks or compression, an unknown coding or a body past ``max_bytes`` are a reject."""
    headers = record.http_headers
    raw = _read_capped(record.raw_stream, max_bytes)
    _drain(record)
    transfer = coding_list(headers.get_header("Transfer-Encoding"))
    try:
        if transfer[-1:] == ["chunked"]:
            raw, transfer = dechunk(raw), transfer[:-1]
        # transfer codings were applied over the content codings: undone first
        return decode_body(raw, coding_list(headers.get_header("Content-Encoding")) + transfer,
                           max_bytes)
    except BodyError as bad:
        raise _Bad(bad.reason, bad.detail) from None


def _response(record: Any, offset: int, max_bytes: int, reader: _FileReader) -> dict:
    """A page, or a counted skip (another status or media type) as the kind ``none``."""
    url = _header(record, "WARC-Target-URI")
    headers = record.http_headers
    if headers is None:
        _drain(record)
        ctype = record.rec_headers.get_header("Content-Type")
        raise _Bad("not_http", f"no HTTP response in the record (Content-Type: {ctype})")
    code = headers.get_statuscode()
    if not (code or "").isdigit():
        _drain(record)
        raise _Bad("not_http", f"no HTTP status line: {headers.statusline!r}"[:200])
    fetched_at = _warc_date(record)
    ctype = headers.get_header("Content-Type")
    media = (ctype or "").split(";")[0].strip().lower()
    skip = http_reason(int(code)) if not code.startswith("2") else (
        None if media in HTML_TYPES else "not_html")
    if skip:
        _drain(record)
        reader.skipped[("response", skip)] += 1
        return _row("none", offset=offset, warc_type="response", url=url)
    body = _payload(record, max_bytes)
    kind = sent_as_html_type(body)
    if kind:
        raise _Bad("not_html", f"not HTML: {kind} (by its bytes; sent as {media})")
    text, charset, source = _decoded(body, header_charset(ctype))
    return _row("page", file=reader.path, offset=offset, warc_type="response", url=url,
                fetched_at=fetched_at, status=int(code), content_type=ctype, html=text,
                charset=charset, charset_source=source)


def _decoded(body: bytes, label: str | None) -> tuple[str | bytes, str, str]:
    """:func:`decode_page`'s text, codec and source; where the text would be the body's own
    bytes (a declared UTF-8), the body, checked as UTF-8 when its batch is built."""
    declared = declared_codec(body, label)
    if declared is None:
        return decode_page(body, label)
    codec, source = declared
    return (body if codec == "utf-8" else body.decode(codec, errors="replace")), codec, source


def _batch(rows: list[dict], schema: pa.Schema) -> pa.RecordBatch:
    """The rows as a record batch, built column by column."""
    return pa.RecordBatch.from_arrays(
        [_text_column([row.get("html") for row in rows]) if f.name == "html"
         else pa.array([row.get(f.name) for row in rows], type=f.type) for f in schema],
        schema=schema)


def _text_column(values: list) -> pa.Array:
    """Texts (str) and declared UTF-8 bytes as one string column: the bytes are joined once
    (the column's data, not copied again) and checked as UTF-8 together; where they are not
    UTF-8, each is decoded as :func:`decode_page` decodes it (U+FFFD for the bytes that do
    not decode)."""
    parts = [v.encode() if isinstance(v, str) else v or b"" for v in values]
    offsets = array("i", accumulate(map(len, parts), initial=0))  # a batch is < 2 GiB
    valid = None if None not in values else pa.array(
        [v is not None for v in values], type=pa.bool_()).buffers()[1]
    column = pa.Array.from_buffers(pa.binary(), len(parts), [
        valid, pa.py_buffer(offsets), pa.py_buffer(b"".join(parts))])
    try:
        return column.cast(pa.string())
    except pa.ArrowInvalid:
        return pa.array([v.decode("utf-8", errors="replace") if isinstance(v, bytes) else v
                         for v in values], type=pa.string())


def _conversion(record: Any, offset: int, max_bytes: int, reader: _FileReader) -> dict:
    """A page whose html column holds the record's text (WET)."""
    url = _header(record, "WARC-Target-URI")
    fetched_at = _warc_date(record)
    body = _read_capped(record.raw_stream, max_bytes)
    _drain(record)
    text, charset, source = _decoded(body, header_charset(
        record.rec_headers.get_header("Content-Type")))
    return _row("page", file=reader.path, offset=offset, warc_type="conversion", url=url,
                fetched_at=fetched_at, content_type=TEXT_TYPE, html=text, charset=charset,
                charset_source=source)


def _read_files(fs_uri: str, max_bytes: int, groups: list[list[str]] | None = None,
                batch_rows: int = 64, batch_bytes: int = 1 << 26):
    """A ``mapInArrow`` function: the files of its input rows in (a path each, column
    ``path``; or, ``groups`` given, the number of a group of paths, column ``id``),
    RECORDS_SCHEMA rows out, a few at a time (the records stream; a batch holds at most
    ``batch_rows`` rows, and pages of about ``batch_bytes`` at most)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = to_arrow_schema(RECORDS_SCHEMA)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        filesystem = None
        for b in batches:
            paths = (b.column("path").to_pylist() if groups is None else
                     [p for i in b.column("id").to_pylist() for p in groups[i]])
            for path in paths:
                if filesystem is None:
                    filesystem = open_filesystem(fs_uri)[0]
                rows: list[dict] = []
                size = 0
                for row in _file_rows(filesystem, path, max_bytes):
                    rows.append(row)
                    size += len(row.get("html") or "")
                    if len(rows) >= batch_rows or size >= batch_bytes:
                        yield _batch(rows, schema)
                        rows, size = [], 0
                if rows:
                    yield _batch(rows, schema)

    return run


def _file_rows(filesystem: Any, path: str, max_bytes: int, framed: bool = True
               ) -> Iterator[dict]:
    """The rows of one file; a file that cannot be opened is one reject."""
    reader = _FileReader(filesystem, path, max_bytes, framed)
    try:
        yield from reader.rows()
    except OSError as exc:
        yield reader._reject(None, None, None, "unreadable", f"{type(exc).__name__}: {exc}")


def read_warc(spark: SparkSession, path: str, max_bytes: int = 5_000_000,
              listing: Listing | None = None) -> DataFrame:
    """The rows (RECORDS_SCHEMA) of the WARC/WET files of ``path``, read by the executors:
    pages, rejects, and the records counted by type and by why they are not pages. A file
    listed but not readable (a broken link) is a reject of reason ``unreadable``. ``path``
    without a scheme is on ``fs.defaultFS`` (:func:`on_default_fs`). ``listing``:
    :func:`list_warc_files`'s of that path, where the caller has it already."""
    listing = listing or list_warc_files(on_default_fs(spark, path))
    records = _read_listed(spark, listing, max_bytes)
    if not listing.unreadable:
        return records
    rows = [_row("reject", file=f, reason="unreadable", detail=why)
            for f, why in listing.unreadable.items()]
    return records.unionByName(spark.createDataFrame(
        [tuple(r.get(name) for name in RECORDS_SCHEMA.names) for r in rows], RECORDS_SCHEMA))


def _read_listed(spark: SparkSession, listing: Listing, max_bytes: int) -> DataFrame:
    sizes = dict(listing.files)
    parts = min(len(sizes), parse_partitions(spark, sum(sizes.values())))
    if len(sizes) > PLANNED_MAX_FILES:  # thousands a task: dealt out, their sizes even out
        files = spark.createDataFrame([(f,) for f in sizes], "path string").repartition(parts)
        return files.mapInArrow(in_worker(_read_files(listing.fs_uri, max_bytes)),
                                RECORDS_SCHEMA)
    # packed by size on the driver into a group a task; task i reads group i (its number from
    # spark.range): no Spark job places the files, no shuffle moves them
    groups: list[list[str]] = [[] for _ in range(parts)]
    for f, b in zip(sizes, balance([float(s) for s in sizes.values()], parts), strict=True):
        groups[b].append(f)
    return spark.range(0, parts, 1, parts).mapInArrow(
        in_worker(_read_files(listing.fs_uri, max_bytes, groups)), RECORDS_SCHEMA)


def warc_pages(records: DataFrame) -> DataFrame:
    """The pages (PAGES_SCHEMA) of :func:`read_warc`'s rows."""
    pages = records.where(F.col("kind") == "page")
    return conform_pages(pages.select(
        "url", F.col("url").alias("final_url"), "status", "fetched_at", "content_type",
        "html", F.lit(0).alias("attempts"), "charset", "charset_source"))


def warc_rejects(records: DataFrame) -> DataFrame:
    """The rejects (source ``warc``) of :func:`read_warc`'s rows."""
    return rejects_of(records.where(F.col("kind") == "reject"), "warc", reason_col="reason",
                      fields=REJECT_FIELDS)


@dataclass(frozen=True)
class WarcCounts:
    """What :func:`read_warc` read: records by WARC-Type, responses that are not pages by
    reason, rejects by reason, pages, files."""

    records: dict[str, int]
    skipped: dict[str, int]
    rejects: dict[str, int]
    pages: int
    files: int


def warc_counts(records: DataFrame) -> WarcCounts:
    """The counts of :func:`read_warc`'s rows (one small aggregation)."""
    rows = records.groupBy("kind", "warc_type", "reason").agg(
        F.sum(F.coalesce("n", F.lit(1))).alias("n")).collect()
    by: dict[str, Counter] = {"records": Counter(), "skipped": Counter(), "reject": Counter(),
                              "page": Counter()}
    for r in rows:
        key = r["reason"] if r["kind"] in ("skipped", "reject") else r["warc_type"]
        by[r["kind"]][key or "unknown"] += int(r["n"])
    files = records.where(F.col("kind") != "page").select("file").distinct().count()
    return WarcCounts(records=dict(by["records"]), skipped=dict(by["skipped"]),
                      rejects=dict(by["reject"]), pages=sum(by["page"].values()), files=files)
