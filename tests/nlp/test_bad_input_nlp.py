"""Bad input to the embed job: null and repeated ids, a truncated weights file, a corrupt
cached ONNX export. Each ends in counted rejects, one ``error:`` line and exit 2, or a
rebuilt export the run report mentions."""

from __future__ import annotations

import json
import shutil
from contextlib import ExitStack
from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import types as T

from sparkfield.core.conf import load_config
from sparkfield.nlp import onnx_engine, run
from sparkfield.nlp.embed import split_texts, worker_threads
from sparkfield.nlp.job import EmbedComputed, EmbedInputs, compute, derive, prepare
from sparkfield.nlp.model import ModelError, check_model_dir, default_model_dir
from sparkfield.nlp.onnx_engine import ensure_onnx, export_dir
from sparkfield.nlp.params import EMBED
from sparkfield.nlp.tables import read_texts
from tests.conftest import job_module

ROOT = Path(__file__).resolve().parents[2]
TEXTS = T.StructType([
    T.StructField("id", T.StringType(), True),
    T.StructField("sentence", T.StringType(), True),
])
ROWS = [
    ("a", "Cats chase mice in the garden."),
    ("b", "Dogs chase cats around the house."),
    ("c", "Stock markets fell sharply on Monday."),
    ("d", "Investors sold shares as prices dropped."),
    ("dup", "The weather was sunny all weekend."),
    ("dup", "Heavy rain flooded the streets."),
    (None, "A kitten sleeps on the sofa."),
    ("  ", "Bond yields rose after the announcement."),
]
GOOD = {"a", "b", "c", "d"}


def _copy_model(tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    shutil.copytree(default_model_dir(), folder, ignore=shutil.ignore_patterns("onnx"))
    return folder


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])


def _compute(spark, texts, folder: Path, **job) -> tuple[EmbedInputs, EmbedComputed]:
    """The job's inputs prepared and its pure step run on ``texts`` (ids in column ``id``);
    the cached frames are released on return."""
    p = EMBED.parse({"input": "inline", "output": None, "id_col": "id", "device": "cpu",
                      **job})
    d = derive(p, seed=42, task_cpus=worker_threads(spark))
    inputs = prepare(spark, p, d, folder)
    with ExitStack() as stack:
        return inputs, compute(spark, p, d, texts, inputs, stack)


# --- ids ----------------------------------------------------------------------------------

def test_null_blank_and_repeated_ids_are_counted_rejects(spark):
    good, bad = split_texts(spark.createDataFrame(ROWS, TEXTS), "sentence", "id")
    assert sorted(r.id for r in good.collect()) == sorted(GOOD)
    reasons = sorted((r.id, r.reason) for r in bad.collect() if r.id is not None)
    assert reasons == [("  ", "empty id"), ("dup", "duplicate id"), ("dup", "duplicate id")]
    assert [r.reason for r in bad.collect() if r.id is None] == ["null id"]
    assert bad.where("embedding IS NOT NULL").count() == 0


def test_null_or_repeated_ids_never_give_neighbours(spark):
    texts = spark.createDataFrame(ROWS, TEXTS)
    _, c = _compute(spark, texts, check_model_dir(None), batch_size=4, neighbors={"k": 3},
                    topics={"enabled": False}, attention={"enabled": False})
    assert c.stats.rejects == {"texts": {"duplicate id": 2, "null id": 1, "empty id": 1}}
    assert c.stats.outputs == {"embeddings": 4} and c.stats.inputs == {"texts": len(ROWS)}
    table = c.extras["neighbors"]
    assert set(table["query_id"]) == GOOD and set(table["neighbor_id"]) <= GOOD
    assert not table.duplicated(["query_id", "rank"]).any()
    assert len(table) == 4 * 3
    text_of = {i: t for i, t in ROWS if i in GOOD}
    assert all(text_of[r.neighbor_id] == r.neighbor_text for r in table.itertuples())


def test_sentences_without_a_whole_default_id_are_rejected(spark, tmp_path):
    src = tmp_path / "sentences"
    pd.DataFrame({"doc_id": ["d1", "d1", None, "d2"],
                  "sentence_idx": pd.array([0, 1, 0, None], dtype="Int64"),
                  "sentence": ["One.", "Two.", "Three.", "Four."]}).to_parquet(src)
    good, bad = split_texts(read_texts(spark, str(src), "sentence", None), "sentence", "__id")
    assert sorted(r.id for r in good.collect()) == ["d1:0", "d1:1"]
    assert [(r.text, r.reason) for r in bad.orderBy("text").collect()] == [
        ("Four.", "null id"), ("Three.", "null id")]


def test_embed_job_reports_id_rejects_and_writes_no_none_ids(spark, tmp_path):
    src = tmp_path / "texts.csv"
    pd.DataFrame(ROWS, columns=["id", "sentence"]).to_csv(src, index=False)
    out = tmp_path / "out"
    cfg = load_config("embed", "local", ROOT / "conf", {"job": {
        "input": str(src), "id_col": "id", "output": str(out), "device": "cpu",
        "topics": {"enabled": False}, "attention": {"enabled": False},
        "neighbors": {"k": 2}}})
    res = run(spark, cfg)
    report = json.loads((out / "run_report.json").read_text())
    assert report["rejects"]["texts"] == {"duplicate id": 2, "null id": 1, "empty id": 1}
    assert report["outputs"]["embeddings"] == 4
    nb = pd.read_csv(out / "neighbors.csv", keep_default_na=False)
    assert set(nb["query_id"]) == GOOD and set(nb["neighbor_id"]) <= GOOD
    assert not nb.duplicated(["query_id", "rank"]).any()
    emb = pd.read_parquet(out / "embeddings")
    assert "None" not in set(emb["id"].dropna()) and emb["id"].isna().sum() == 1
    line = job_module("embed").describe(res)
    assert "(0 truncated, 4 rejected: duplicate id 2, empty id 1, null id 1)" in line


# --- a truncated weights file -------------------------------------------------------------

def test_truncated_safetensors_fail_the_model_check(tmp_path):
    folder = _copy_model(tmp_path)
    _truncate(folder / "model.safetensors")
    with pytest.raises(ModelError, match="model.safetensors.*truncated"):
        check_model_dir(folder)
    (folder / "model.safetensors").write_bytes(b"\xff" * 8 + b"{}")
    with pytest.raises(ModelError, match="model.safetensors"):
        check_model_dir(folder)
    for offsets in ("3", "[7]", "null"):  # a header that is JSON but not safetensors
        head = f'{{"w": {{"dtype": "F32", "shape": [1], "data_offsets": {offsets}}}}}'.encode()
        (folder / "model.safetensors").write_bytes(len(head).to_bytes(8, "little") + head)
        with pytest.raises(ModelError, match="model.safetensors.*corrupt safetensors header"):
            check_model_dir(folder)


def test_truncated_pytorch_bin_fails_the_model_check(tmp_path):
    import torch

    folder = _copy_model(tmp_path)
    (folder / "model.safetensors").unlink()
    torch.save({"w": torch.zeros(4096)}, folder / "pytorch_model.bin")
    assert check_model_dir(folder) == folder
    _truncate(folder / "pytorch_model.bin")
    with pytest.raises(ModelError, match="pytorch_model.bin.*truncated"):
        check_model_dir(folder)


def test_embed_job_with_truncated_weights_exits_2_before_spark_work(tmp_path, capsys):
    folder = _copy_model(tmp_path)
    _truncate(folder / "model.safetensors")
    src = tmp_path / "texts.csv"
    pd.DataFrame(ROWS[:4], columns=["id", "sentence"]).to_csv(src, index=False)
    code = job_module("embed").main([
        "--conf-dir", str(ROOT / "conf"), "--input", str(src), "--id-col", "id",
        "--model", str(folder), "--output", str(tmp_path / "out"), "--device", "cpu"])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert code == 2 and len(lines) == 1, err[-3000:]
    assert "model.safetensors" in lines[0] and "Traceback" not in err
    assert not (tmp_path / "out").exists()


# --- a corrupt cached ONNX export ---------------------------------------------------------

def test_export_that_no_longer_matches_its_hash_is_rebuilt(tmp_path, monkeypatch):
    folder = check_model_dir(None)
    exports: list[Path] = []

    def fake_export(_folder: Path, path: Path) -> None:
        exports.append(path)
        path.write_bytes(b"exported graph")

    monkeypatch.setattr(onnx_engine, "export_onnx", fake_export)
    said: list[str] = []
    path = ensure_onnx(folder, tmp_path, on_rebuild=said.append)
    assert len(exports) == 1 and path.read_bytes() == b"exported graph" and not said
    assert ensure_onnx(folder, tmp_path, on_rebuild=said.append) == path
    assert len(exports) == 1 and not said  # verified, reused
    path.write_bytes(b"exported gra")  # cut short
    assert ensure_onnx(folder, tmp_path, on_rebuild=said.append) == path
    assert len(exports) == 2 and path.read_bytes() == b"exported graph"
    assert len(said) == 1 and "rebuilt" in said[0] and str(path) in said[0]



def test_an_export_that_loads_is_kept_when_its_hash_was_replaced(tmp_path, monkeypatch):
    """Two processes exporting at once may leave one's hash beside the other's file: a file
    that still loads is kept, and its own hash recorded."""
    folder = check_model_dir(None)
    exports: list[Path] = []

    def fake_export(_folder: Path, path: Path) -> None:
        exports.append(path)
        path.write_bytes(b"exported graph")

    class Loads:
        @staticmethod
        def InferenceSession(path, providers):  # noqa: N802 (onnxruntime's name)
            assert Path(path).read_bytes() == b"exported graph"

    monkeypatch.setattr(onnx_engine, "export_onnx", fake_export)
    monkeypatch.setattr(onnx_engine, "require_onnxruntime", lambda: Loads)
    path = ensure_onnx(folder, tmp_path)
    onnx_engine.hash_path(path).write_text("0" * 64 + "\n")  # another export's hash
    said: list[str] = []
    assert ensure_onnx(folder, tmp_path, on_rebuild=said.append) == path
    assert len(exports) == 1 and not said
    assert onnx_engine.hash_path(path).read_text().strip() == onnx_engine._sha256(path)


def test_corrupt_cached_onnx_export_is_rebuilt_and_reported(spark, tmp_path):
    folder = check_model_dir(None)
    target = export_dir(folder, tmp_path)
    target.mkdir(parents=True)
    (target / "model.onnx").write_bytes(b"half an export")  # no recorded hash, no graph
    texts = spark.createDataFrame(ROWS[:4], TEXTS)
    inputs, c = _compute(spark, texts, folder, engine="onnx", onnx_dir=str(tmp_path),
                         neighbors={"enabled": False}, topics={"enabled": False},
                         attention={"enabled": False})
    assert c.stats.outputs == {"embeddings": 4}
    notes = [n for n in inputs.stats.notes if "rebuilt" in n]  # the export is prepared
    assert len(notes) == 1 and "model.onnx" in notes[0]
    assert (target / "model.onnx").stat().st_size > 1_000_000


@pytest.mark.parametrize("uri", ["hdfs://nn:8020/models/minilm", "s3a://bucket/models/minilm"])
def test_a_model_in_a_store_is_refused_with_the_way_to_fetch_it(uri):
    """Models are read from the driver's disk and shipped from there: a store's URI would
    otherwise read as a missing local folder named 'hdfs:'."""
    with pytest.raises(ModelError, match="on the driver's disk .* copy it from its store"):
        check_model_dir(uri)
