"""Rows that a Python function makes from a DataFrame's Arrow batches, written as Parquet by
the Python workers that make them.

``df.mapInArrow(f, schema).write.parquet(path)`` has Spark turn every row ``f`` returns into
a JVM row and encode it value by value. For many small rows holding arrays (sentences with
their tokens and vectors) that costs the JVM about as much CPU as ``f`` itself.
:func:`write_worker_parquet` gives the same batches to pyarrow's Parquet writer in the worker
that made them, through a Python data source, so Spark still runs the tasks and commits them:

- each task writes its file under ``<path>/_temporary/<partition>-<attempt>-<id>/``;
- when every task has succeeded, the driver moves the files of the successful attempts into
  ``<path>`` and deletes ``_temporary``, failed attempts included; when the job fails, it
  deletes ``_temporary`` only;
- the files carry Spark's schema (the ``org.apache.spark.sql.parquet.row.metadata`` key of
  the footer, as Spark's writer sets it), so ``spark.read.parquet`` gives the same columns,
  vectors included; a result without rows is one file without rows, as Spark writes it.

The path must be one that the driver and every worker reach as a local path (a ``file:``
path: a local directory, or storage mounted on every node, as Spark's own writer needs of a
``file:`` path). Elsewhere (HDFS, object stores), write :meth:`ArrowRows.frame` with Spark:
:meth:`sparkfield.core.io.AtomicOutput.write_arrow_rows` chooses.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import types as T
from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

from sparkfield.core.workers import in_worker

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
    os.makedirs(path, exist_ok=True)
    name = f"sparkfield_worker_parquet_{uuid.uuid4().hex}"
    rows.source.sparkSession.dataSource.register(
        _source(name, rows.batches, rows.schema, compression))
    rows.source.write.format(name).mode("append").save(path)


def _source(name: str, batches: Batches, schema: T.StructType, compression: str) -> type:
    """A Python data source named ``name`` whose writer writes what ``batches`` makes."""

    class WorkerParquet(DataSource):
        @classmethod
        def name(cls) -> str:
            return name

        def writer(self, _schema: T.StructType, _overwrite: bool) -> _Writer:
            return _Writer(self.options["path"], batches, schema, compression)

    return WorkerParquet


def _arrow_schema(schema: T.StructType) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema).with_metadata({SPARK_SCHEMA_KEY: schema.json()})


@dataclass
class _Written(WriterCommitMessage):
    """A task's commit message: its files, under ``_temporary``."""

    files: list[str]


class _Writer(DataSourceArrowWriter):
    def __init__(self, path: str, batches: Batches, schema: T.StructType, compression: str):
        self.path = path
        self.batches = batches
        self.schema = schema
        self.compression = compression

    def write(self, iterator: Iterator[pa.RecordBatch]) -> _Written:
        import pyarrow.parquet as pq
        from pyspark import TaskContext

        task = TaskContext.get()
        part = task.partitionId() if task else 0
        attempt = task.attemptNumber() if task else 0
        token = uuid.uuid4().hex
        folder = os.path.join(self.path, TEMPORARY, f"{part:05d}-{attempt}-{token}")
        target = _arrow_schema(self.schema)
        file = os.path.join(folder, f"part-{part:05d}-{token}.{self.compression}.parquet")
        out = None
        try:
            for batch in in_worker(self.batches)(iterator):
                if not batch.num_rows:
                    continue
                if out is None:
                    os.makedirs(folder, exist_ok=True)
                    out = pq.ParquetWriter(file, target, compression=self.compression)
                out.write_batch(batch.cast(target))  # names, types, no null where none may be
        finally:
            if out is not None:
                out.close()
        return _Written([file] if out is not None else [])

    def commit(self, messages: list[_Written | None]) -> None:
        import pyarrow.parquet as pq

        files = [f for m in messages if m is not None for f in m.files]
        for f in files:
            os.replace(f, os.path.join(self.path, os.path.basename(f)))
        if not files:  # no rows: one file of the schema, so that the output reads
            target = _arrow_schema(self.schema)
            pq.write_table(target.empty_table(), os.path.join(
                self.path, f"part-00000-{uuid.uuid4().hex}.{self.compression}.parquet"),
                compression=self.compression)
        shutil.rmtree(os.path.join(self.path, TEMPORARY), ignore_errors=True)
        open(os.path.join(self.path, "_SUCCESS"), "wb").close()

    def abort(self, messages: list[_Written | None]) -> None:
        shutil.rmtree(os.path.join(self.path, TEMPORARY), ignore_errors=True)
