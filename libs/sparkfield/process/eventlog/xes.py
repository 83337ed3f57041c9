"""IEEE 1849 XES: the rules that turn XES into event rows (:func:`xes_rows`, lxml
iterparse, bounded memory per trace), used by the executors' reader in ``xes_split`` and by the
single-process reader here; and a distributed writer that builds each trace's XML with Spark SQL
string functions and joins the gzip members of Spark's output parts into one ``.xes.gz``
(concatenated gzip members are one valid gzip stream)."""

from __future__ import annotations

import gzip
import json
import os
import re
import tempfile
import uuid
import zlib
from collections.abc import Iterator
from typing import IO, Any

import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.core.connect import is_connect
from sparkfield.core.errors import InputError
from sparkfield.core.filesystem import hadoop_fs
from sparkfield.core.parts import CSV_PART_OPTIONS, append_parts
from sparkfield.core.paths import resolve_path
from sparkfield.process.eventlog.events import RAW_TS
from sparkfield.process.eventlog.schema import (
    ACTIVITY,
    ATTRIBUTES,
    CASE,
    LIFECYCLE,
    ORDER,
    RESOURCE,
    ROW_ORDER,
    TIMESTAMP,
)

_STD = {"concept:name": ACTIVITY, "time:timestamp": RAW_TS, "org:resource": RESOURCE,
        "lifecycle:transition": LIFECYCLE}
_TYPES = {"string", "date", "int", "float", "boolean", "id"}
_TYPE_TAGS = _TYPES | {"{http://www.xes-standard.org/}" + t for t in _TYPES}
_COMPOUND = {"list", "container"}
RAW_SCHEMA = T.StructType([
    T.StructField(CASE, T.StringType()), T.StructField(ACTIVITY, T.StringType()),
    T.StructField(RAW_TS, T.StringType()), T.StructField(RESOURCE, T.StringType()),
    T.StructField(LIFECYCLE, T.StringType()),
    T.StructField(ATTRIBUTES, T.MapType(T.StringType(), T.StringType())),
    T.StructField(ROW_ORDER, T.LongType()),
])


class XesError(InputError):
    """A malformed XES file; the message names the line."""


def _local_copy(spark: SparkSession, path: str) -> tuple[str, bool]:
    """A local file holding the log at ``path`` as Hadoop resolves it (a path without a scheme
    against ``fs.defaultFS``, as the executors' reader takes it), and whether it is a copy."""
    if is_connect(spark):  # no Hadoop on the client: the path is the client's own
        scheme, where = "file", path.removeprefix("file:")
    else:
        scheme, where = resolve_path(path, spark)
    if scheme == "file":
        if not os.path.isfile(where):
            raise InputError(f"log not found: {path}")
        return where, False
    fs, jpath = hadoop_fs(spark, path)
    if not fs.exists(jpath):
        raise InputError(f"log not found: {path}")
    tmp = os.path.join(tempfile.gettempdir(), f"sparkfield-{uuid.uuid4().hex}.xes")
    fs.copyToLocalFile(False, jpath, spark.sparkContext._jvm.org.apache.hadoop.fs.Path(tmp))
    return tmp, True


def _open(path: str) -> IO[bytes]:
    with open(path, "rb") as probe:
        magic = probe.read(2)
    return gzip.open(path, "rb") if magic == b"\x1f\x8b" else open(path, "rb")


def local_name(tag: object) -> str:
    """An element's tag without its namespace ("" for comments and processing instructions)."""
    return tag.rpartition("}")[2] if isinstance(tag, str) else ""


def _compound_value(el: Any) -> Any:
    """A ``<list>`` as the values of its ``<values>`` child (or of its own children where it
    has none), a ``<container>`` as its children by key; nested compounds alike."""
    if local_name(el.tag) == "list":
        values = next((c for c in el if local_name(c.tag) == "values"), el)
        return [_compound_value(c) if local_name(c.tag) in _COMPOUND else c.get("value")
                for c in values if local_name(c.tag) in _TYPES | _COMPOUND]
    return {c.get("key"): _compound_value(c) if local_name(c.tag) in _COMPOUND
            else c.get("value")
            for c in el if local_name(c.tag) in _TYPES | _COMPOUND and c.get("key") is not None}


def event_values(event: Any) -> list[Any]:
    """activity, time, resource, lifecycle and the other attributes of an ``<event>``
    element: its direct attribute children (a later key wins). A ``<list>`` or
    ``<container>`` attribute is kept as JSON text of its values (an array, an object by key);
    the meta-attributes nested in a typed attribute are not read."""
    std: dict[str, Any] = {}
    attrs: dict[str, Any] = {}
    for child in event:
        tag = child.tag
        # the set lookup settles the usual tags (XES namespace or none) without splitting
        if tag in _TYPE_TAGS or local_name(tag) in _TYPES:
            value = child.get("value")
        elif local_name(tag) in _COMPOUND:
            value = json.dumps(_compound_value(child), ensure_ascii=False)
        else:
            continue
        key = child.get("key")
        if key is None:
            continue
        slot = _STD.get(key)
        if slot:
            std[slot] = value
        else:
            attrs[key] = value
    return [std.get(ACTIVITY), std.get(RAW_TS), std.get(RESOURCE), std.get(LIFECYCLE),
            attrs or None]


def trace_name(trace: Any) -> str | None:
    """The first ``concept:name`` attribute among a ``<trace>``'s direct children."""
    for child in trace:
        if local_name(child.tag) in _TYPES and child.get("key") == "concept:name":
            return child.get("value")
    return None


def xes_rows(fh: IO[bytes], path: str, line_offset: int = 0) -> Iterator[list[Any]]:
    """Event rows ``[case, activity, time, resource, lifecycle, attributes]`` of the XES
    document ``fh``, in document order (each trace's rows once its case name is known).

    Only ``end`` events are handled: an event's attributes are its direct children (see
    :func:`event_values`), and the trace name may come before or after its
    events. Finished elements are cleared, so memory stays bounded by one trace. Errors name
    the line, ``line_offset`` added (a document cut from a larger file)."""
    from lxml import etree

    pending: list[list[Any]] = []  # the current trace's events
    try:
        for _, el in etree.iterparse(fh, events=("end",), tag=("{*}event", "{*}trace"),
                                     huge_tree=True,
                                     resolve_entities=False, no_network=True):
            tag = local_name(el.tag)
            if tag == "event":
                parent = el.getparent()
                if parent is None or local_name(parent.tag) != "trace":
                    raise XesError(f"{path}: line {el.sourceline + line_offset}: <event> "
                                   "outside <trace>")
                pending.append([None, *event_values(el)])
                el.clear(keep_tail=False)
            elif tag == "trace":
                case = trace_name(el)
                if case is None:
                    raise XesError(f"{path}: line {el.sourceline + line_offset}: <trace> "
                                   "without concept:name")
                for r in pending:
                    r[0] = case
                yield from pending
                pending = []
                el.clear(keep_tail=False)
                while el.getprevious() is not None:
                    del el.getparent()[0]
    except etree.XMLSyntaxError as exc:
        # lxml's message names lines of the document too: give them as the file's
        msg = re.sub(r"\bline (\d+)", lambda m: f"line {int(m.group(1)) + line_offset}",
                     exc.msg)
        raise XesError(f"{path}: line {exc.lineno + line_offset}: malformed XML: "
                       f"{msg}") from None
    if pending:
        raise XesError(f"{path}: events after the last complete <trace>")


def iter_xes(path: str, chunk: int = 50_000) -> Iterator[pd.DataFrame]:
    """Events of an XES file in file order, ``chunk`` rows at a time, read in this process
    (see :func:`xes_rows`); ``row_order`` numbers the events in file order."""
    rows: list[list[Any]] = []
    order = 0
    with _open(path) as fh:
        try:
            for row in xes_rows(fh, path):
                row.append(order)
                order += 1
                rows.append(row)
                if len(rows) >= chunk:
                    yield pd.DataFrame(rows, columns=RAW_SCHEMA.names)
                    rows = []
        except (EOFError, OSError, zlib.error) as exc:
            raise XesError(f"{path}: truncated or corrupt gzip file after {order} events "
                           f"({exc})") from None
    if rows:
        yield pd.DataFrame(rows, columns=RAW_SCHEMA.names)


def read_xes_on_driver(spark: SparkSession, path: str) -> DataFrame:
    """Raw event rows (strings) of an XES log read by the driver alone (the whole log passes
    through its memory): the reference for :func:`sparkfield.process.eventlog.xes_split.read_xes`,
    and the reader for logs that are not UTF-8."""
    local, temporary = _local_copy(spark, path)
    try:
        frames = list(iter_xes(local))
    finally:
        if temporary:
            os.remove(local)
    if not frames:
        raise XesError(f"{path}: no events")
    pdf = pd.concat(frames, ignore_index=True)
    if pdf[CASE].isna().any():
        raise XesError(f"{path}: events outside a named trace")
    return spark.createDataFrame(pdf, RAW_SCHEMA)


def _esc(col: Column) -> Column:
    out = col.cast("string")
    for a, b in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ('"', "&quot;"), ("'", "&apos;")):
        out = F.replace(out, F.lit(a), F.lit(b))
    return out


def _attr(kind: str, key: str, value: Column) -> Column:
    return F.when(value.isNotNull(), F.concat(
        F.lit(f'<{kind} key="{key}" value="'), _esc(value), F.lit('"/>')))


def trace_xml(events: DataFrame) -> DataFrame:
    """One row per case: ``case_id`` and the ``<trace>`` element as text (events in order)."""
    ts = F.date_format(F.col(TIMESTAMP), "yyyy-MM-dd'T'HH:mm:ss.SSSXXX")
    extra = F.array_join(F.transform(
        F.map_entries(F.coalesce(F.col(ATTRIBUTES), F.create_map().cast(
            "map<string,string>"))),
        lambda e: F.concat(F.lit('<string key="'), _esc(e["key"]), F.lit('" value="'),
                           _esc(e["value"]), F.lit('"/>'))), "")
    event = F.concat_ws(
        "", F.lit("<event>"), _attr("string", "concept:name", F.col(ACTIVITY)),
        _attr("date", "time:timestamp", ts), _attr("string", "org:resource", F.col(RESOURCE)),
        _attr("string", "lifecycle:transition", F.col(LIFECYCLE)), extra, F.lit("</event>"))
    per_case = events.groupBy(CASE).agg(F.sort_array(F.collect_list(F.struct(
        *[F.col(c).alias(f"k{i}") for i, c in enumerate(ORDER)], event.alias("xml")))
    ).alias("evs"))
    return per_case.select(CASE, F.concat(
        F.lit("<trace>"), _attr("string", "concept:name", F.col(CASE)),
        F.array_join(F.col("evs.xml"), ""), F.lit("</trace>")).alias("xml"))


XES_HEADER = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    '<log xes.version="1849-2016" xes.features="nested-attributes" '
    'xmlns="http://www.xes-standard.org/">\n'
    '<extension name="Concept" prefix="concept" uri="http://www.xes-standard.org/concept.xesext"/>\n'
    '<extension name="Time" prefix="time" uri="http://www.xes-standard.org/time.xesext"/>\n'
    '<extension name="Organizational" prefix="org" uri="http://www.xes-standard.org/org.xesext"/>\n'
    '<extension name="Lifecycle" prefix="lifecycle" '
    'uri="http://www.xes-standard.org/lifecycle.xesext"/>\n'
    '<global scope="trace"><string key="concept:name" value="__INVALID__"/></global>\n'
    '<global scope="event"><string key="concept:name" value="__INVALID__"/>'
    '<date key="time:timestamp" value="1970-01-01T00:00:00.000+00:00"/></global>\n'
    '<classifier name="Activity" keys="concept:name"/>\n'
    '<classifier name="Activity and lifecycle" keys="concept:name lifecycle:transition"/>\n'
)
XES_FOOTER = "</log>\n"


def concat_gzip_parts(spark: SparkSession, parts_dir: str, target: str, header: str,
                      footer: str) -> None:
    """Header member + Spark's gzip part files in order + footer member -> one file."""
    tfs, jtarget = hadoop_fs(spark, target)
    out = tfs.create(jtarget, True)
    try:
        out.write(bytearray(gzip.compress(header.encode("utf-8"), mtime=0)))
        append_parts(spark, parts_dir, out)
        out.write(bytearray(gzip.compress(footer.encode("utf-8"), mtime=0)))
    finally:
        out.close()


def write_xes_gz(spark: SparkSession, events: DataFrame, target: str,
                 in_order: bool = False) -> None:
    """The whole log as one gzip XES file, traces ordered by case id; ``in_order``: as
    :func:`write_csv_gz`'s, the traces follow the partitions of ``events`` (each case whole in
    one, in event order), with no shuffle of the traces."""
    parts = f"{target}.__parts"
    traces = trace_xml(events)
    traces = traces.sortWithinPartitions(CASE) if in_order else traces.orderBy(CASE)
    (traces.select("xml").write.mode("overwrite")
     .option("compression", "gzip").text(parts))
    concat_gzip_parts(spark, parts, target, XES_HEADER, XES_FOOTER)


def write_csv_gz(spark: SparkSession, events: DataFrame, target: str,
                 in_order: bool = False, ties: bool = True) -> None:
    """The log as one gzip CSV (case_id, activity, timestamp ISO-8601 UTC, resource,
    lifecycle, attributes as JSON), each case's events together in event order. Events alike
    in all of that order (two rows of a joined view at one time) follow their attributes, as
    in the XES file. The cases come in case id order, so the same log gives the same file
    whatever its partitions; ``in_order``: ``events`` has each case whole in one partition,
    in event order (as :func:`sparkfield.process.jobs.compute.compute` caches them), and the
    cases follow its partitions instead, with no shuffle (the same log and number of shuffle
    partitions give the same file). ``ties=False`` with ``in_order``: no two events of a case
    are alike in all of the order (every ``row_order`` differs, as a log file's reader numbers
    them), so the events are written as they come, with no sort."""
    parts = f"{target}.__parts"
    # zlib's fastest level: a gzip write about 1.6x faster, the file about a sixth larger
    (_csv_rows(events, in_order, ties).write.mode("overwrite").option("compression", "gzip")
     .option("zlib.compress.level", "BEST_SPEED").options(**CSV_PART_OPTIONS).csv(parts))
    concat_gzip_parts(spark, parts, target, ",".join(_CSV_COLUMNS) + "\n", "")


_CSV_COLUMNS = [CASE, ACTIVITY, TIMESTAMP, RESOURCE, LIFECYCLE, ATTRIBUTES]


def _csv_rows(events: DataFrame, in_order: bool, ties: bool) -> DataFrame:
    """The CSV copy's rows in the file's order (see :func:`write_csv_gz`)."""
    attrs = F.when(F.col(ATTRIBUTES).isNotNull(), F.to_json(ATTRIBUTES))
    # else ranges of case ids, each case whole in one part and the parts in case order; the
    # attributes' JSON is made after the exchange, so the pass that samples the ranges
    # does not make it for every event too
    grouped = events if in_order else events.repartitionByRange(CASE)
    grouped = grouped.withColumn("_attrs", attrs)
    if ties or not in_order:
        grouped = grouped.sortWithinPartitions(CASE, *ORDER, "_attrs")
    return grouped.select(
        CASE, ACTIVITY, F.date_format(TIMESTAMP, "yyyy-MM-dd'T'HH:mm:ss.SSSXXX").alias(TIMESTAMP),
        RESOURCE, LIFECYCLE, F.col("_attrs").alias(ATTRIBUTES))
