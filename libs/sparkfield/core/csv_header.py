"""A CSV file's column names as Spark's CSV reader gives them, read by Python where it can.

Spark finds a header by running a job that reads the file's first record: about half a second
on a driver JVM that has just started, for every source of a mapping (seven in the OCEL mapping
of Olist). A plain local file in the dialect the library reads CSV with (one-character
separator, double quotes, quotes doubled inside quotes, UTF-8) whose header record is written
plainly (:func:`_fields`) is read here, and named by Spark's rules (:func:`safe_names`).
Anything else (a folder, a glob, another file system, a compressed file, other options, a
byte-order mark, a blank first line, odd quoting) returns None: Spark reads it.
"""

from __future__ import annotations

import os
from typing import Any

from sparkfield.core.filesystem import hadoop_fs

# the options this reader follows (lower case, as Spark compares them); any other means Spark
HANDLED = {"header", "inferschema", "multiline", "escape", "quote", "sep", "delimiter",
           "columnpruning", "mode", "columnnameofcorruptrecord", "encoding", "charset"}
COMPRESSED = (".gz", ".bz2", ".zst", ".lz4", ".snappy", ".deflate", ".xz", ".zip", ".br")
MAX_HEADER = 1 << 20  # a header record longer than this is left to Spark


def local_header(path: str, options: dict[str, str], case_sensitive: bool) -> list[str] | None:
    """The column names of the CSV file ``path`` (on this machine's disk) read with
    ``options``, as Spark's reader would name them, or None when Spark must read them."""
    opts = {k.lower(): str(v) for k, v in options.items()}
    if set(opts) - HANDLED or opts.get("header", "true").lower() != "true":
        return None
    if opts.get("escape", '"') != '"' or opts.get("quote", '"') != '"':
        return None
    encoding = opts.get("encoding", opts.get("charset", "UTF-8")).upper().replace("_", "-")
    sep = opts.get("sep", opts.get("delimiter", ","))
    if encoding not in ("UTF-8", "UTF8") or len(sep) != 1 or sep in '"\r\n ':
        return None
    local = _local_file(path)
    if local is None:
        return None
    with open(local, "rb") as f:
        head = f.read(MAX_HEADER)
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 3:  # not just a character cut at the end of the read
            return None
        text = head[:exc.start].decode("utf-8")
    if not text:
        return []  # an empty file: no columns, as Spark says
    record = _first_record(text, opts.get("multiline", "false").lower() == "true")
    if record is None:
        return None
    fields = _fields(record, sep)
    return None if fields is None else safe_names(fields, case_sensitive)


def _local_file(path: str) -> str | None:
    """``path`` when it names one plain, uncompressed file on this machine's disk."""
    if any(c in path for c in "*?[{") or path.lower().endswith(COMPRESSED):
        return None
    return path if os.path.isfile(path) else None


def local_path(spark: Any, path: str) -> str | None:
    """The path on the driver's disk that Spark reads for ``path``, or None when Spark reads
    it from another file system (a path without a scheme is on Hadoop's default one, which a
    cluster may set to HDFS)."""
    sc = spark.sparkContext
    fs = sc._jvm.org.apache.hadoop.fs
    uri = fs.Path(path).toUri()
    scheme = uri.getScheme() or fs.FileSystem.getDefaultUri(
        sc._jsc.hadoopConfiguration()).getScheme()
    return os.path.abspath(str(uri.getPath())) if scheme == "file" else None


def column_names(spark: Any, path: str, options: dict[str, str]) -> list[str]:
    """The column names of the CSV file(s) at ``path`` read with ``options``: by
    :func:`local_header` where it can, else by Spark (a job that reads the first record)."""
    case = str(spark.conf.get("spark.sql.caseSensitive", "false")).lower() == "true"
    local = local_path(spark, path)
    names = None if local is None else local_header(local, options, case)
    if names is not None:
        return names
    return spark.read.options(header="true", inferSchema="false", **options).csv(path).columns


def _first_record(text: str, multiline: bool) -> str | None:
    """The header record's text, without its line end: the first line, or with ``multiline``
    up to the first line end outside quotes. None when it is blank, starts with a byte-order
    mark, holds a lone carriage return, or does not end within the text read."""
    if text.startswith("\ufeff"):
        return None
    end, quoted = None, False
    for i, ch in enumerate(text):
        if ch == '"':
            quoted = not quoted
        elif ch == "\n" and (not quoted or not multiline):
            end = i
            break
    if end is None:
        if len(text.encode("utf-8")) >= MAX_HEADER:
            return None
        end = len(text)
    record = text[:end].removesuffix("\r")
    if not record.strip() or "\r" in record or (quoted and not multiline):
        return None
    return record


def _fields(record: str, sep: str) -> list[str] | None:
    """The names of a header record written plainly: each bare (no quote, no line end) or in
    quotes with quotes inside doubled, then a separator or the end. None for anything odder,
    which Spark's parser reads by rules of its own."""
    fields: list[str] = []
    i, n = 0, len(record)
    while True:
        if i < n and record[i] == '"':
            value, i = [], i + 1
            while True:
                j = record.find('"', i)
                if j < 0:
                    return None  # no closing quote
                value.append(record[i:j])
                if record.startswith('""', j):
                    value.append('"')
                    i = j + 2
                    continue
                i = j + 1
                break
            fields.append("".join(value))
        else:
            j = record.find(sep, i)
            j = n if j < 0 else j
            bare = record[i:j]
            if '"' in bare or "\n" in bare or "\r" in bare:
                return None
            fields.append(bare)
            i = j
        if i == n:
            return fields
        if record[i] != sep:
            return None  # text after a closing quote
        i += 1


def safe_names(row: list[str], case_sensitive: bool) -> list[str]:
    """Spark's names for a header row (``CSVUtils.makeSafeHeader``): an empty name becomes
    ``_c<index>``, a name given twice (ignoring case unless ``case_sensitive``) gets its
    index appended."""
    keys = [n if case_sensitive else n.lower() for n in row if n]
    twice = {k for k in keys if keys.count(k) > 1}
    out = []
    for i, name in enumerate(row):
        if not name:
            out.append(f"_c{i}")
        elif (name if case_sensitive else name.lower()) in twice:
            out.append(f"{name}{i}")
        else:
            out.append(name)
    return out


def folder_headers_checkable(spark: Any, path: str, options: dict[str, str],
                             cols: list[str]) -> bool:
    """Whether each file of a folder source gets its header checked against the first's as it
    is read: Spark otherwise maps every file's values by position under the first file's
    names, so a file with its columns in another order is read under the wrong names with
    no word. Checked where Spark can compare (the header's own names are the columns' names:
    no empty or repeated name renamed) and the caller left ``enforceSchema`` to us."""
    if any(k.lower() == "enforceschema" for k in options):
        return False
    fs, jpath = hadoop_fs(spark, path)
    if not fs.getFileStatus(jpath).isDirectory():
        return False
    raw = {**{k: v for k, v in options.items() if k.lower() != "header"}, "header": "false"}
    first = spark.read.options(**raw).csv(path).first()
    return first is not None and [v or "" for v in first] == cols
