"""Reading an XES log in the executors: the file is split at ``<trace`` and the traces are
parsed where the splits are read, so no process ever holds the whole log.

Spark's text source cuts the file into records at every ``<trace`` (its ``lineSep``): a plain
``.xes`` is read in byte ranges by all executors (Hadoop moves a record that crosses a range's
end to the range where it starts); a ``.xes.gz`` cannot be split, so one task decompresses it
and the traces are dealt out to every executor to be parsed (one reading core plus a shuffle of
the log's text: see the README). The text before the first trace (the log's extensions,
globals and classifiers) is read once, on the driver.

Every trace is parsed by :func:`sparkfield.process.xes.xes_rows`, the driver reader's own
rules, inside ``<log ...>`` as the file opens it, so the rows are the driver reader's. The
order of events is kept in ``row_order``, increasing through the file (see
:func:`_positions`). Errors name the file's line (counted from the
range's first byte for ranges after the first)."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator

import pandas as pd
from pyspark import TaskContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.core.io import hadoop_fs, read_bytes, require_path
from sparkfield.core.workers import in_worker
from sparkfield.process.xes import RAW_SCHEMA, XesError, read_xes_on_driver, xes_rows

DELIMITER = "<trace"
_LOG_OPEN = re.compile(r"<(?:[\w.-]+:)?log(?:\s[^>]*)?>", re.S)
_LOG_CLOSE = re.compile(r"</(?:[\w.-]+:)?log>\s*$")
_ENCODING = re.compile(r"""<\?xml[^>]*encoding\s*=\s*["']([^"']+)["']""")
_UTF8 = {"utf-8", "utf8", "us-ascii", "ascii"}
RECORD_SCHEMA = T.StructType([
    T.StructField("pos", T.LongType()), T.StructField("line", T.LongType()),
    T.StructField("block", T.LongType()), T.StructField("text", T.StringType()),
])


def read_xes(spark: SparkSession, path: str, partitions: int | None = None) -> DataFrame:
    """Raw event rows (strings) of an XES log, parsed by the executors; the same rows as
    :func:`sparkfield.process.xes.read_xes_on_driver` (``row_order`` numbers differ, their
    order does not). Logs in another encoding than UTF-8 are read by the driver."""
    require_path(spark, path, "log")
    gzipped = _is_gzip(spark, path)
    if gzipped != path.endswith(".gz"):
        # Spark decompresses by the name: a gzip file named otherwise is read by the driver
        return read_xes_on_driver(spark, path)
    text = spark.read.option("lineSep", DELIMITER).text(path)
    first = text.limit(1).collect()
    head = first[0]["value"] if first else ""
    declared = _ENCODING.search(head[:500])
    if declared and declared.group(1).lower() not in _UTF8:
        return read_xes_on_driver(spark, path)
    log_open = _LOG_OPEN.search(head)
    if log_open is None:
        raise XesError(f"{path}: no <log> element before the first <trace>")
    if not gzipped:
        _require_log_end(spark, path)
    # the document every trace is parsed in: the prolog and <log ...> on one line, so that
    # the trace's lines are the file's
    opening = (head[:log_open.end()].replace("\r", " ").replace("\n", " ")).encode("utf-8")
    n_parts = partitions or max(2, spark.sparkContext.defaultParallelism)
    records = text.select(F.col("value").alias("text"),
                          F.input_file_block_start().alias("block"))
    parse = _parser(path, opening)
    if not gzipped:  # every range is parsed where it is read
        return records.mapInPandas(in_worker(lambda batches: parse(_positions(batches))),
                                   RAW_SCHEMA)
    # one unsplittable range: its traces are dealt out to every executor
    return (records.mapInPandas(in_worker(_positions), RECORD_SCHEMA).repartition(n_parts)
            .mapInPandas(in_worker(parse), RAW_SCHEMA))


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
    if not _LOG_CLOSE.search(data):
        raise XesError(f"{path}: the file does not end with </log> (truncated?)")


def _positions(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """Each trace record with its place in the file and the line it starts on; the text
    before the first trace is dropped.

    ``pos`` is the partition index (ranges are read in file order) in the high bits and the
    record's character offset in its range below: a record of n characters holds fewer than n
    events, so ``pos + event index`` stays below the next record's ``pos``."""
    base = TaskContext.get().partitionId() << 40
    pos = line = 0
    first = True
    for pdf in batches:
        if pdf.empty:
            continue
        block = int(pdf["block"].iloc[0])
        out_pos, out_line, keep = [], [], []
        for t in pdf["text"].tolist():
            if first and block == 0:  # the log's header
                first = False
                pos += len(t) + len(DELIMITER)
                line += t.count("\n")
                continue
            first = False
            out_pos.append(base + pos)
            out_line.append(line + 1)
            keep.append(t)
            pos += len(t) + len(DELIMITER)
            line += t.count("\n")
        if keep:
            yield pd.DataFrame({"pos": out_pos, "line": out_line,
                                "block": [block] * len(keep), "text": keep})


def _parser(path: str, opening: bytes):
    def parse(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for pdf in batches:
            rows: list[list] = []
            for pos, line, block, text in zip(pdf["pos"], pdf["line"], pdf["block"],
                                              pdf["text"], strict=True):
                body = _LOG_CLOSE.sub("", text)
                doc = opening + DELIMITER.encode() + body.encode("utf-8") + b"</log>"
                where = path if block == 0 else f"{path} (from byte {block})"
                for i, row in enumerate(xes_rows(io.BytesIO(doc), where, int(line) - 1)):
                    row.append(int(pos) + i)
                    rows.append(row)
            if rows:
                yield pd.DataFrame(rows, columns=RAW_SCHEMA.names)

    return parse
