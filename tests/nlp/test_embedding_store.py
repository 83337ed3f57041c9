"""The embedding store's parts: a failed write leaves no folder behind, and one left by a run
that died is removed once it is a day old, never one still being written."""

from __future__ import annotations

import os
import time

import pytest
from pyspark.sql import functions as F

from sparkfield.nlp.cache import DEAD_AFTER_S, STAGING, EmbeddingStore

SCHEMA = "text_hash string, embedding array<float>, truncated boolean"


def _names(folder: str) -> list[str]:
    return sorted(os.listdir(folder))


def test_a_failed_write_leaves_no_staging_folder(spark, tmp_path):
    store = EmbeddingStore(spark, str(tmp_path / "store"), "m", "onnx")
    good = spark.createDataFrame([("h1", [1.0, 2.0], False)], SCHEMA)
    store.add(good)
    bad = good.withColumn("text_hash", F.raise_error(F.lit("worker died")))
    with pytest.raises(Exception, match="worker died"):
        store.add(bad)
    assert [n for n in _names(store.folder) if n.startswith(STAGING)] == []
    assert [r["text_hash"] for r in store.read().collect()] == ["h1"]


def test_a_dead_runs_staging_folder_goes_and_a_live_ones_stays(spark, tmp_path):
    store = EmbeddingStore(spark, str(tmp_path / "store"), "m", "onnx")
    dead, live, writing = (tmp_path / "store" / store.folder.rsplit("/", 1)[1] / f"{STAGING}{n}"
                           for n in ("part-dead", "part-live", "part-writing"))
    old = time.time() - DEAD_AFTER_S - 60
    for folder in (dead, live, writing):
        (folder / "_temporary").mkdir(parents=True)
        (folder / "_temporary" / "f.parquet").write_bytes(b"x")
    for path in (dead / "_temporary" / "f.parquet", dead / "_temporary", dead,
                 writing / "_temporary", writing):  # a file of "writing" changed just now
        os.utime(path, (old, old))
    store.add(spark.createDataFrame([("h1", [1.0], False)], SCHEMA))
    left = _names(store.folder)
    assert f"{STAGING}part-dead" not in left
    assert {f"{STAGING}part-live", f"{STAGING}part-writing"} <= set(left)
    assert len([n for n in left if n.startswith("part-")]) == 1
