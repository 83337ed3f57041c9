"""Reading an XES log in the executors: the file is split at ``<trace`` and the traces are
parsed where the splits are read, so no process ever holds the whole log.

Spark's text source cuts the file into records at every ``<trace`` (its ``lineSep``): a plain
``.xes`` is read in byte ranges by all executors (Hadoop moves a record that crosses a range's
end to the range where it starts); a ``.xes.gz`` cannot be split, so one task decompresses it
and the traces are dealt out to every executor to be parsed (one reading core plus a shuffle of
the log's text: see docs/jobs/process_mining.md). The text before the first trace (the log's
extensions, globals and classifiers) is read once, on the driver.

A ``<trace`` inside a comment, CDATA section or processing instruction starts no trace: the
records either side of such a cut are joined again where they are read (:func:`open_markup`
finds the cuts; a record holding no ``!`` and no ``?`` costs two character searches). Where
such a region crosses the end of a byte range, that range's task raises
:class:`MarkupAcrossRanges`; the next range then starts inside the region and may fail on
what it reads, so every error of a range after the first is an :class:`XesRangeError`. After
either, process_mining reads the file again as one range (``one_range=True``: one task reads
the ranges in order, as for a ``.xes.gz``), which settles the rows or the error.

A batch of records that holds no markup and only traces of the usual writing is read as
columns with Arrow's kernels (:func:`sparkfield.process.eventlog.xes_columns.usual_batch`), with
no Python step per trace. Any other batch is read trace by trace: every trace of the common
shape by :func:`sparkfield.process.eventlog.xes_fast.trace_events` (string operations and
regular expressions), any other by :func:`sparkfield.process.eventlog.xes.xes_rows`, the driver
reader's own rules, inside ``<log ...>`` as the file opens it. Either way the rows are the
driver reader's. Records and rows go between Spark and Python as Arrow batches
(``mapInArrow``).
The order of events is kept in ``row_order``, increasing through the file (see
:func:`_positions`). Errors name the file's line (counted from the range's first byte for ranges
after the first)."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from sparkfield.core.failures import executor_error
from sparkfield.core.io import hadoop_fs, read_bytes, require_path
from sparkfield.core.workers import in_worker
from sparkfield.process.eventlog.events import RAW_TS
from sparkfield.process.eventlog.iso_instants import iso_instants
from sparkfield.process.eventlog.xes import RAW_SCHEMA, XesError, read_xes_on_driver, xes_rows
from sparkfield.process.eventlog.xes_columns import usual_batch
from sparkfield.process.eventlog.xes_fast import (
    LOG_CLOSE,
    SLOTS,
    Events,
    event_columns,
    trace_events,
    without_log_end,
)
from sparkfield.process.eventlog.xes_jvm import common_shape, jvm_rows
from sparkfield.process.eventlog.xes_records import (
    RECORD_SCHEMA,
    Chunk,
    Columns,
    Record,
    arrow_batch,
    byte_lengths,
    columns_of,
    holds_markup,
    record_batches,
    utf8_bytes,
)

DELIMITER = "<trace"
_LOG_OPEN = re.compile(r"<(?:[\w.-]+:)?log(?:\s[^>]*)?>", re.S)
# an event's start tag, and the markup that may hold one without opening it
_EVENT_OPEN = re.compile(r"<(?:[\w.-]+:)?event[\s/>]")
_NOT_EVENTS = re.compile(r"<!--.*?(?:-->|\Z)|<!\[CDATA\[.*?(?:\]\]>|\Z)|<\?.*?(?:\?>|\Z)", re.S)
_ENCODING = re.compile(r"""<\?xml[^>]*encoding\s*=\s*["']([^"']+)["']""")
_UTF8 = {"utf-8", "utf8", "us-ascii", "ascii"}
# what opens a comment, a CDATA section or a processing instruction, and what closes it
_MARKUP = re.compile(r"<!--|<!\[CDATA\[|<\?")
_CLOSERS = {"<!--": "-->", "<![CDATA[": "]]>", "<?": "?>"}
_RAW_ARROW = to_arrow_schema(RAW_SCHEMA)
_TRIED_FIRST = 20  # traces tried in Python before a read in the JVM
INSTANT = "timestamp_instant"  # read_xes(instants=True): the instant of a strict ISO time
_TIMED_SCHEMA = T.StructType([*RAW_SCHEMA.fields, T.StructField(INSTANT, T.TimestampType())])
_TIMED_ARROW = to_arrow_schema(_TIMED_SCHEMA)


class XesRangeError(XesError):
    """An error in a byte range after the first, which may start inside a region an earlier
    range opened: read the file again with ``read_xes(..., one_range=True)``."""


class MarkupAcrossRanges(XesRangeError):
    """A comment, CDATA section or processing instruction holding ``<trace`` crosses the end
    of a byte range."""


def needs_one_range(exc: BaseException) -> bool:
    """Whether ``exc``, raised by an action on :func:`read_xes` rows (an executor's error comes
    back wrapped), is an :class:`XesRangeError`: read the file again as one range."""
    return isinstance(exc, XesRangeError) or \
        isinstance(executor_error(exc), XesRangeError)


def open_markup(text: str, closer: str | None = None) -> str | None:
    """What closes the comment, CDATA section or processing instruction open at the end of
    ``text`` (None: none is), ``closer`` being the one open where ``text`` starts.

    Outside those every ``<`` starts a tag or one of them (XML allows no raw ``<`` in text or
    attribute values), so a ``<trace`` where none is open starts a real element."""
    i = 0
    while True:
        if closer is not None:
            j = text.find(closer, i)
            if j < 0:
                return closer
            i, closer = j + len(closer), None
        found = _MARKUP.search(text, i)
        if found is None:
            return None
        closer, i = _CLOSERS[found.group()], found.end()


def read_xes(spark: SparkSession, path: str, partitions: int | None = None,
             one_range: bool = False, instants: bool = False, jvm: bool = False) -> DataFrame:
    """Raw event rows (strings) of an XES log, parsed by the executors; the same rows as
    :func:`sparkfield.process.eventlog.xes.read_xes_on_driver` (``row_order`` numbers differ, their
    order does not). Logs in another encoding than UTF-8 are read by the driver.

    ``instants``: the rows the executors parse carry :data:`INSTANT`, the instant of each
    time written in strict ISO-8601 with an offset, read where it is parsed
    (:func:`~sparkfield.process.eventlog.iso_instants.iso_instants`; null for any other
    time); the driver's rows have no such column.

    An action on the rows of a plain file read in byte ranges raises an
    :class:`XesRangeError` (see :func:`needs_one_range`) when a comment, CDATA section or
    processing instruction holding ``<trace`` crosses the end of a range, or when a range
    after the first finds an error; ``one_range`` reads the file as one range, which raises
    neither.

    ``jvm``: a plain file whose first traces are of the common shape is parsed in the JVM
    (:mod:`~sparkfield.process.eventlog.xes_jvm`), where the session can load the library's
    jar: the same rows, about twice as fast; an action then raises an error that
    :func:`~sparkfield.process.eventlog.xes_jvm.needs_python_reader` recognises when a later
    record is of another shape: read the log again without ``jvm``."""
    require_path(spark, path, "log")
    gzipped = _is_gzip(spark, path)
    if gzipped != path.endswith(".gz"):
        # Spark decompresses by the name: a gzip file named otherwise is read by the driver
        return read_xes_on_driver(spark, path)
    text = spark.read.option("lineSep", DELIMITER).text(path)
    first = text.limit(_TRIED_FIRST + 1 if jvm else 1).collect()
    head = first[0]["value"] if first else ""
    declared = _ENCODING.search(head[:500])
    if declared and declared.group(1).lower() not in _UTF8:
        return read_xes_on_driver(spark, path)
    log_open = _LOG_OPEN.search(head)
    if log_open is None and (open_markup(head) or "<!DOCTYPE" in head):
        return read_xes_on_driver(spark, path)  # the cut is in the prolog's markup
    if log_open is None:
        raise XesError(f"{path}: no <log> element before the first <trace>")
    if _EVENT_OPEN.search(_NOT_EVENTS.sub("", head[log_open.end():])):
        # the executors parse traces only: an event in the log's header would be left out
        raise XesError(f"{path}: <event> outside <trace> before the first trace")
    if not gzipped:
        _require_log_end(spark, path)
    # the document every trace is parsed in: the prolog and <log ...> on one line, so that
    # the trace's lines are the file's
    opening = (head[:log_open.end()].replace("\r", " ").replace("\n", " ")).encode("utf-8")
    n_parts = partitions or max(2, spark.sparkContext.defaultParallelism)
    records = text.select(F.col("value").alias("text"),
                          F.input_file_block_start().alias("block"))
    parse = _parser(path, opening, instants)
    schema = _TIMED_SCHEMA if instants else RAW_SCHEMA
    if jvm and not gzipped and not one_range and \
            common_shape([r["value"] for r in first[1:]]):
        rows = jvm_rows(spark, text, INSTANT if instants else None)
        if rows is not None:
            return rows
    if not gzipped and not one_range:  # every range is parsed where it is read
        positions = _positions(path, whole=False)
        return records.mapInArrow(in_worker(lambda batches: parse(positions(batches))),
                                  schema)
    if not gzipped:  # the ranges in file order, in one task; lines counted from byte 0
        records = (records.withColumn("i", F.monotonically_increasing_id()).coalesce(1)
                   .sortWithinPartitions("block", "i")
                   .select("text", F.lit(0).cast("long").alias("block")))
    # one range: its traces are dealt out to every executor
    positions = _positions(path, whole=True)
    return (records.mapInArrow(in_worker(lambda batches: record_batches(positions(batches))),
                               RECORD_SCHEMA)
            .repartition(n_parts)
            .mapInArrow(in_worker(lambda batches: parse(columns_of(batches))), schema))


def _is_gzip(spark: SparkSession, path: str) -> bool:
    fs, jpath = hadoop_fs(spark, path)
    stream = fs.open(jpath)
    try:
        return stream.read() == 0x1F and stream.read() == 0x8B
    finally:
        stream.close()


def _require_log_end(spark: SparkSession, path: str, tail: int = 4096) -> None:
    """A plain file cut short between two traces would parse trace by trace: its end must
    close the log."""
    data = read_bytes(spark, path, last=tail).decode("utf-8", "replace")
    if not LOG_CLOSE.search(data):
        raise XesError(f"{path}: the file does not end with </log> (truncated?)")


def _positions(path: str, whole: bool):
    """Each trace record with its place in the file and the line it starts on; the text
    before the first trace is dropped. Records cut at a ``<trace`` inside a comment, CDATA
    section or processing instruction are joined again (``<trace`` put back).

    ``pos`` is the partition index (ranges are read in file order) in the high bits and the
    record's offset in its range (in UTF-8 bytes) below: a record of n bytes holds fewer than n
    events, so ``pos + event index`` stays below the next record's ``pos``. ``whole``: the
    partition is the whole file, so markup still open at its end is malformed XML, not a
    region that goes on in the next range.

    The function maps Arrow batches of ``text`` and ``block`` to chunks of records, one a
    batch that holds a record: :class:`Columns` where no markup is open and the batch
    holds none (one byte search of the batch), else a list of ``(pos, line, block, text)``."""

    def positions(batches: Iterator[pa.RecordBatch]) -> Iterator[Chunk]:
        base = TaskContext.get().partitionId() << 40
        pos = line = 0
        first = True
        closer: str | None = None  # what closes the markup open at the end of the text so far
        start: tuple[int, int, int] = (0, 0, 0)  # pos, line and block of the record in hand
        pieces: list[str] = []
        header = False  # the record in hand is the log's header
        tail = ""  # the last record's text (with ``whole``: it must close the log)

        def step(t: str, block: int, opens_range: bool = False) -> Record | None:
            """The record ``t`` completes, if any."""
            nonlocal pos, line, closer, start, pieces, header, tail
            tail = t
            if closer is None:  # t starts a record
                start, pieces = (base + pos, line + 1, block), [t]
                header = opens_range and block == 0
            else:  # the cut before t was inside markup
                pieces.append(t)
            pos += (len(t) if t.isascii() else len(t.encode("utf-8"))) + len(DELIMITER)
            line += t.count("\n")
            if closer is not None or (("!" in t or "?" in t)  # memchr: most skip here
                                      and ("<!" in t or "<?" in t)):
                closer = open_markup(t, closer)
            if closer is None and not header:
                return (*start, DELIMITER.join(pieces))
            return None

        for batch in batches:
            if batch.num_rows == 0:
                continue
            block = batch.column("block")[0].as_py()
            texts = batch.column("text")
            out: list[Record] = []
            if first:
                first = False
                done = step(texts[0].as_py(), block, opens_range=True)
                texts = texts.slice(1)
                out += [done] if done else []
            data = utf8_bytes(texts) if closer is None and len(texts) else None
            if data is not None and not holds_markup(data):
                lengths = byte_lengths(texts) + len(DELIMITER)
                # only the file's last record ends the log (one elsewhere is malformed, and
                # the records read one by one take it as the trace reader does)
                columns = Columns(texts, base + pos + np.cumsum(lengths) - lengths, line + 1,
                                  np.full(len(texts), block),
                                  log_end=b"</log" in utf8_bytes(texts.slice(len(texts) - 1)))
                pos, line = pos + int(lengths.sum()), line + data.count(b"\n")
                if whole:
                    tail = texts[len(texts) - 1].as_py()
                if out:
                    yield out
                yield columns
                continue
            for t in texts.to_pylist():
                done = step(t, block)
                if done:
                    out.append(done)
            if out:
                yield out
        if closer is None:
            # a gzip file (or one range) cut short between two traces would parse as a
            # shorter log: plain files' ends are checked before the read
            if whole and not LOG_CLOSE.search(tail):
                raise XesError(f"{path}: the file does not end with </log> (truncated?)")
            return
        if whole:
            raise XesError(f"{path}: line {start[1]}: malformed XML: {closer!r} missing "
                           "before the end of the file")
        raise MarkupAcrossRanges(f"{path}: a comment, CDATA section or processing instruction "
                                 f"holding '<trace' crosses the end of the byte range from "
                                 f"byte {start[2]}")

    return positions


def _texts_without_log_end(texts: pa.Array) -> pa.Array:
    """The records without the log's end tag (the last record of the file holds it)."""
    if b"</log" not in utf8_bytes(texts):
        return texts
    holding = pc.match_substring(texts, "</log")
    cut = [LOG_CLOSE.sub("", t) for t in texts.filter(holding).to_pylist()]
    return pc.replace_with_mask(texts, holding, pa.array(cut, texts.type))


def _parser(path: str, opening: bytes, instants: bool = False):
    """Chunks of records (:class:`Columns` or lists) to Arrow batches of event rows
    (:data:`RAW_SCHEMA`, and :data:`INSTANT` when ``instants``), one a chunk that holds an
    event."""

    def parse(chunks: Iterator[Chunk]) -> Iterator[pa.RecordBatch]:
        rows = event_batches(chunks)
        if not instants:
            yield from rows
            return
        for batch in rows:
            yield pa.RecordBatch.from_arrays(
                [*batch.columns, iso_instants(batch.column(RAW_TS))], schema=_TIMED_ARROW)

    def event_batches(chunks: Iterator[Chunk]) -> Iterator[pa.RecordBatch]:
        for chunk in chunks:
            if isinstance(chunk, Columns):
                texts = _texts_without_log_end(chunk.texts) if chunk.log_end else chunk.texts
                fast = usual_batch(texts, chunk.pos, _RAW_ARROW)
                if fast is not None:
                    if fast.num_rows:
                        yield fast
                    continue
                chunk = chunk.records()
            cases: list[str | None] = []
            orders: list[int] = []
            events: Events = []
            for pos, line, block, text in chunk:
                body = without_log_end(text)
                read = trace_events(body)
                if read is None:
                    rows = _lxml_rows(opening, body, path, line, block)
                    cases += [row[0] for row in rows]
                    events += [_as_event(row) for row in rows]
                    n = len(rows)
                else:
                    n = len(read[1])
                    cases += [read[0]] * n
                    events += read[1]
                orders += range(pos, pos + n)
            if not events:
                continue
            yield arrow_batch([cases, *event_columns(events), orders], _RAW_ARROW)

    return parse


def _as_event(row: list) -> dict[str, str]:
    """A row of :func:`xes_rows` as :func:`trace_events` gives an event: the other
    attributes in their order, then the first four that are set."""
    event = dict(row[5] or {})
    for key, value in zip(SLOTS, row[1:5], strict=True):
        if value is not None:
            event[key] = value
    return event


def _lxml_rows(opening: bytes, body: str, path: str, line: int, block: int) -> list[list]:
    """The rows of a trace record not of :mod:`xes_fast`'s shape, or its error."""
    doc = opening + DELIMITER.encode() + body.encode("utf-8") + b"</log>"
    where = path if block == 0 else f"{path} (from byte {block})"
    try:
        return list(xes_rows(io.BytesIO(doc), where, line - 1))
    except XesError as exc:
        if block == 0:
            raise
        raise XesRangeError(str(exc)) from None
