"""Rows written as Parquet by the Python workers that make them read back as the rows Spark
would write, vectors and nulls included; a failed write leaves no file, an empty one a
readable table, and an output Spark must write goes to Spark's writer."""

from __future__ import annotations

import functools
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from chispa import assert_df_equality
from pyspark.ml.linalg import SparseVector, VectorUDT
from pyspark.sql import types as T

from sparkfield.core import worker_parquet
from sparkfield.core.io import AtomicOutput
from sparkfield.core.worker_parquet import ArrowRows, codec, write_worker_parquet

DOCS = T.StructType([T.StructField("id", T.LongType(), False),
                     T.StructField("text", T.StringType(), True)])
ROWS = T.StructType([
    T.StructField("id", T.LongType(), False),
    T.StructField("text", T.StringType(), True),
    T.StructField("words", T.ArrayType(T.StringType(), False), False),
    T.StructField("vector", VectorUDT(), False)])


def _words(batches: Iterator[pa.RecordBatch], repeat: int = 1) -> Iterator[pa.RecordBatch]:
    """Each text's words (a null text: none), and a vector of their lengths; every row
    ``repeat`` times."""
    for b in batches:
        ids, texts = b.column(0).to_pylist() * repeat, b.column(1).to_pylist() * repeat
        words = [(t or "").split() for t in texts]
        vectors = [{"type": 0, "size": 8, "indices": list(range(len(w))),
                    "values": [float(len(x)) for x in w]} for w in words]
        yield pa.RecordBatch.from_arrays(
            [pa.array(ids, pa.int64()), pa.array(texts, pa.string()),
             pa.array(words, pa.list_(pa.string())),
             pa.array(vectors, pa.struct([("type", pa.int8()), ("size", pa.int32()),
                                          ("indices", pa.list_(pa.int32())),
                                          ("values", pa.list_(pa.float64()))]))],
            names=ROWS.names)


@pytest.fixture
def docs(spark):
    rows = [(1, "a bb ccc"), (2, None), (3, ""), (4, "éé ß"), (5, "x")]
    return spark.createDataFrame(rows, DOCS).repartition(3)


def test_the_files_read_back_as_the_rows_spark_writes(spark, docs, tmp_path):
    rows = ArrowRows(docs, functools.partial(_words, repeat=2), ROWS)
    write_worker_parquet(rows, str(tmp_path / "w"))
    rows.frame().write.parquet(str(tmp_path / "s"))
    ours, spark_s = spark.read.parquet(str(tmp_path / "w")), spark.read.parquet(str(tmp_path / "s"))
    assert ours.schema == spark_s.schema  # Spark reads every column as nullable
    assert ours.columns == ROWS.names and isinstance(ours.schema["vector"].dataType, VectorUDT)
    assert_df_equality(ours, spark_s, ignore_row_order=True)
    assert ours.count() == 10
    assert ours.where("id = 1").first()["vector"] == SparseVector(8, [0, 1, 2], [1., 2., 3.])
    assert ours.where("id = 2").first()["text"] is None
    names = sorted(p.name for p in (tmp_path / "w").iterdir())
    assert names[0] == "_SUCCESS" and len(names) == 4  # one file a task, no _temporary
    footer = pq.read_metadata(next((tmp_path / "w").glob("part-*.parquet")))
    assert footer.created_by.startswith("parquet-cpp-arrow")


def test_no_rows_is_one_file_of_the_schema(spark, docs, tmp_path):
    write_worker_parquet(ArrowRows(docs.limit(0), _words, ROWS), str(tmp_path / "w"))
    back = spark.read.parquet(str(tmp_path / "w"))
    assert back.columns == ROWS.names and back.count() == 0
    assert isinstance(back.schema["vector"].dataType, VectorUDT)


def _fail_on(batches: Iterator[pa.RecordBatch], bad: int) -> Iterator[pa.RecordBatch]:
    for b in _words(batches):
        if bad in b.column(0).to_pylist():
            raise ValueError(f"row {bad} is bad")
        yield b


def test_a_failed_write_leaves_no_file(spark, docs, tmp_path):
    target = tmp_path / "w"
    with pytest.raises(Exception, match="row 4 is bad"):
        write_worker_parquet(ArrowRows(docs, functools.partial(_fail_on, bad=4), ROWS),
                             str(target))
    assert list(target.iterdir()) == []  # the tasks that succeeded left nothing either


def _null_words(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for b in _words(batches):
        words = pa.array([None] * b.num_rows, pa.list_(pa.string()))
        yield b.set_column(2, "words", words)


def test_a_killed_tasks_worker_cannot_bring_back_the_deleted_folders(tmp_path):
    """The worker of a task killed as its job fails can go on after the driver deleted the
    output's staging: its file then fails, and no folder of the output comes back."""
    folder = tmp_path / "staging" / "rows" / "_temporary"
    batches = iter([pa.RecordBatch.from_pydict({"id": [1], "text": ["a b"]})])
    late = worker_parquet._write_files(batches, _words, ROWS, str(folder), "snappy")
    with pytest.raises(FileNotFoundError):
        list(late)
    assert list(tmp_path.iterdir()) == []


def test_the_temporary_folder_is_deleted_again_after_a_late_worker(tmp_path, monkeypatch):
    """A late worker makes its folder and file while the driver deletes ``_temporary``, so the
    folder cannot go in that pass (what ``rmtree`` meets then); it goes in the next."""
    folder = tmp_path / "_temporary"
    (folder / "a0").mkdir(parents=True)
    real_rmtree, passes = shutil.rmtree, []

    def rmtree_meeting_a_late_worker(path, ignore_errors=False):
        passes.append(path)
        real_rmtree(os.path.join(path, "a0"), ignore_errors=ignore_errors)
        if len(passes) == 1:
            (folder / "a1").mkdir()
            (folder / "a1" / "part.parquet").write_bytes(b"x")
        else:
            real_rmtree(path, ignore_errors=ignore_errors)

    monkeypatch.setattr(worker_parquet.shutil, "rmtree", rmtree_meeting_a_late_worker)
    worker_parquet._remove_tree(str(folder))
    assert not folder.exists() and len(passes) == 2


def test_a_null_where_the_schema_has_none_is_an_error(spark, docs, tmp_path):
    with pytest.raises(Exception, match="null values to non-nullable"):
        write_worker_parquet(ArrowRows(docs, _null_words, ROWS), str(tmp_path / "w"))


def test_a_folder_holding_files_is_refused(spark, docs, tmp_path):
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "x").write_text("x")
    with pytest.raises(FileExistsError):
        write_worker_parquet(ArrowRows(docs, _words, ROWS), str(tmp_path / "w"))


def test_spark_codecs_pyarrow_cannot_write_are_left_to_spark():
    assert codec("SNAPPY") == "snappy" and codec("uncompressed") == "none"
    assert codec("lz4_raw") == "lz4" and codec("lz4") is None and codec("lzo") is None


def _writer_of(path: Path) -> str:
    return pq.read_metadata(next(path.glob("part-*.parquet"))).created_by


def test_the_output_writer_chooses_the_workers_for_a_local_path(spark, docs, tmp_path):
    out = AtomicOutput(spark, str(tmp_path / "out"))
    rows = ArrowRows(docs, _words, ROWS)
    out.write_arrow_rows("by_workers", rows)
    codec_before = spark.conf.get("spark.sql.parquet.compression.codec")
    spark.conf.set("spark.sql.parquet.compression.codec", "lz4")  # pyarrow has none
    try:
        out.write_arrow_rows("by_spark", rows)
    finally:
        spark.conf.set("spark.sql.parquet.compression.codec", codec_before)
    out.commit()
    assert _writer_of(tmp_path / "out" / "by_workers").startswith("parquet-cpp-arrow")
    assert _writer_of(tmp_path / "out" / "by_spark").startswith("parquet-mr")
    assert_df_equality(spark.read.parquet(str(tmp_path / "out" / "by_workers")),
                       spark.read.parquet(str(tmp_path / "out" / "by_spark")),
                       ignore_row_order=True)


def test_uncompressed_files_are_named_as_spark_names_them(spark, docs, tmp_path):
    write_worker_parquet(ArrowRows(docs, _words, ROWS), str(tmp_path / "w"), compression="none")
    files = sorted(p.name for p in (tmp_path / "w").glob("part-*"))
    assert files and all(f.endswith(".parquet") and ".none" not in f for f in files)
    footer = pq.read_metadata(tmp_path / "w" / files[0])
    assert footer.row_group(0).column(0).compression == "UNCOMPRESSED"
    assert spark.read.parquet(str(tmp_path / "w")).count() == 5
