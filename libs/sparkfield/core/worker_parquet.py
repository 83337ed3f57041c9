"""Rows that a Python function makes from a DataFrame's Arrow batches, written as Parquet by
the Python workers that make them.

``df.mapInArrow(f, schema).write.parquet(path)`` has Spark turn every row ``f`` returns into
a JVM row and encode it value by value. For many small rows holding arrays (sentences with
their tokens and vectors) that costs the JVM about as much CPU as ``f`` itself.
:func:`write_worker_parquet` gives the same batches to pyarrow's Parquet writer in the worker
that made them; Spark still runs the tasks, and only the files of the task attempts that
succeeded are kept:

- each task writes its file under ``<path>/_temporary/<partition>-<attempt>-<id>/`` and
  returns one row, the file's name and row count (``mapInArrow``, collected);
- when every task has succeeded, the driver moves the files of the collected rows into
  ``<path>``; it deletes ``_temporary`` either way, with the files of failed or duplicate
  attempts. A task that Spark kills as the job ends (the other tasks of a failed job, a
  speculative duplicate) has a Python worker that may go on for a moment: it makes its
  folder only inside the ``_temporary`` the driver made, never the folders above, so once
  that is gone the worker's file cannot bring the output's folders back, and the driver
  deletes ``_temporary`` again until nothing is left;
- the files carry Spark's schema (the ``org.apache.spark.sql.parquet.row.metadata`` key of
  the footer, as Spark's writer sets it), so ``spark.read.parquet`` gives the same columns,
  vectors included; a result without rows is one file without rows, as Spark writes it.

The path must be one that the driver and every worker reach as a local path (a ``file:``
path: a local directory, or storage mounted on every node, as Spark's own writer needs of a
``file:`` path). Elsewhere (HDFS, object stores), write :meth:`ArrowRows.frame` with Spark:
:meth:`sparkfield.core.io.AtomicOutput.write_arrow_rows` chooses.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark import TaskContext
from pyspark.sql import DataFrame
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from sparkfield.core.workers import in_worker

log = logging.getLogger("sparkfield")
SPARK_SCHEMA_KEY = "org.apache.spark.sql.parquet.row.metadata"
TEMPORARY = "_temporary"
# Spark's spark.sql.parquet.compression.codec -> pyarrow's name; the others (lzo, the Hadoop
# framing of lz4) pyarrow does not write: Spark writes those outputs
CODECS = {"snappy": "snappy", "gzip": "gzip", "zstd": "zstd", "brotli": "brotli",
          "lz4_raw": "lz4", "none": "none", "uncompressed": "none"}

Batches = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]


@dataclass(frozen=True)
class ArrowRows:
    """The rows ``batches`` makes from the Arrow batches of ``source``, of Spark schema
    ``schema``: readable as a DataFrame (:meth:`frame`) or written by the workers
    (:func:`write_worker_parquet`)."""

    source: DataFrame
    batches: Batches
    schema: T.StructType

    def frame(self) -> DataFrame:
        return self.source.mapInArrow(in_worker(self.batches), self.schema)


def codec(spark_codec: str) -> str | None:
    """pyarrow's name for Spark's Parquet codec ``spark_codec``; None when pyarrow has none."""
    return CODECS.get(spark_codec.lower())


def write_worker_parquet(rows: ArrowRows, path: str, compression: str = "snappy") -> None:
    """The rows of ``rows`` as Parquet files in ``path`` (a local path every node reaches, not
    yet holding files), written by the Python workers; ``compression``: pyarrow's codec name
    (see :func:`codec`)."""
    if os.path.isdir(path) and os.listdir(path):
        raise FileExistsError(f"{path} already holds files")
    temporary = os.path.join(path, TEMPORARY)
    os.makedirs(temporary, exist_ok=True)
    write = functools.partial(_write_files, batches=rows.batches, schema=rows.schema,
                              folder=temporary, compression=compression)
    try:
        # one row per file, from the task attempts that succeeded
        written = rows.source.mapInArrow(in_worker(write), WRITTEN).collect()
    except BaseException:
        _remove_tree(temporary, strict=False)  # the job's own error is the one to see
        raise
    try:
        for row in written:
            os.replace(row["file"], os.path.join(path, os.path.basename(row["file"])))
        if not written:  # no rows: one file of the schema, so that the output reads
            pq.write_table(_arrow_schema(rows.schema).empty_table(), os.path.join(
                path, _file_name(0, uuid.uuid4().hex, compression)), compression=compression)
        open(os.path.join(path, "_SUCCESS"), "wb").close()
    finally:
        _remove_tree(temporary)


def _remove_tree(path: str, strict: bool = True, wait_s: float = 10.0) -> None:
    """``path`` deleted, again while a killed task's worker still makes its folder or file in
    it (each makes at most those two, and nothing once ``path`` is gone). What is left after
    ``wait_s`` seconds is an error, or a warning when not ``strict``."""
    deadline = time.monotonic() + wait_s
    while True:
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.lexists(path):
            return
        if time.monotonic() > deadline:
            left = sorted(os.listdir(path))[:5] if os.path.isdir(path) else []
            message = f"cannot delete {path}: {left} still there"
            if strict:
                raise OSError(message)
            log.warning("%s", message)
            return
        time.sleep(0.05)


WRITTEN = T.StructType([T.StructField("file", T.StringType(), False),
                        T.StructField("rows", T.LongType(), False)])


def _file_name(part: int, token: str, compression: str) -> str:
    """Named as Spark names its files: part, id, codec (none for uncompressed files)."""
    return f"part-{part:05d}-{token}{'' if compression == 'none' else '.' + compression}.parquet"


def _arrow_schema(schema: T.StructType) -> pa.Schema:
    return to_arrow_schema(schema).with_metadata({SPARK_SCHEMA_KEY: schema.json()})


def _write_files(source: Iterator[pa.RecordBatch], batches: Batches, schema: T.StructType,
                 folder: str, compression: str) -> Iterator[pa.RecordBatch]:
    """A task's rows into one file under ``folder`` (named by its partition, attempt and a
    random id); one row (file, rows) when it has any."""
    task = TaskContext.get()
    part = task.partitionId() if task else 0
    attempt = task.attemptNumber() if task else 0
    token = uuid.uuid4().hex
    target = _arrow_schema(schema)
    attempt_dir = os.path.join(folder, f"{part:05d}-{attempt}-{token}")
    file = os.path.join(attempt_dir, _file_name(part, token, compression))
    out = None
    n = 0
    try:
        for batch in batches(source):
            if not batch.num_rows:
                continue
            if out is None:  # only inside the driver's folder: never brings back a deleted one
                os.mkdir(attempt_dir)
                out = pq.ParquetWriter(file, target, compression=compression)
            out.write_batch(batch.cast(target))  # names, types, no null where none may be
            n += batch.num_rows
    finally:
        if out is not None:
            out.close()
    if n:
        yield pa.RecordBatch.from_arrays([pa.array([file]), pa.array([n], pa.int64())],
                                         names=WRITTEN.names)
