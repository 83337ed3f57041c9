"""The ONNX Runtime engine against the torch engine, int8 against fp32, length-bucketed batches
against unbucketed ones, and the content store against uncached runs."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import torch

from sparkfield.core.conf import load_config
from sparkfield.core.errors import ConfigError, DeviceError
from sparkfield.nlp import run
from sparkfield.nlp.embed import SPLIT, EngineSpec, embed, encoded_array, with_split
from sparkfield.nlp.encoder import Encoder, Split
from sparkfield.nlp.model import check_model_dir
from sparkfield.nlp.onnx_engine import OnnxEncoder, _atomic, ensure_onnx, providers
from sparkfield.text.bag_of_words.normalise import sentences
from sparkfield.text.bag_of_words.parse import page_text
from tests.conftest import job_module

LONG = ("Natural language processing combines computational linguistics with statistical and "
        "machine learning models to let computers process human language. ") * 20


@pytest.fixture(scope="module")
def wiki_sentences(wiki_pages) -> list[str]:
    """Real sentences from all the shared Wikipedia pages, short and long mixed."""
    out: list[str] = []
    for page in sorted(wiki_pages.iterdir()):
        _, text = page_text(page.read_bytes().decode("utf-8"))
        out += [s for s in sentences(text) if len(s.split()) >= 3][:50]
    assert len(out) >= 250
    return out


@pytest.fixture(scope="module")
def folder():
    return check_model_dir(None)


@pytest.fixture(scope="module")
def onnx_dir(tmp_path_factory, folder):
    """A fresh export (fp32 and int8) for this module: the export itself is under test."""
    d = tmp_path_factory.mktemp("onnx")
    ensure_onnx(folder, d, "int8")
    return d


@pytest.fixture(scope="module")
def torch_encoder(folder):
    return Encoder(folder, threads=1)


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def test_onnx_export_equals_the_torch_engine(folder, onnx_dir, torch_encoder, wiki_sentences):
    texts = wiki_sentences[:60] + [LONG, "Hi."]
    ref, ref_trunc = torch_encoder.encode(texts, 16)
    enc = OnnxEncoder(folder, "cpu", threads=1, onnx_dir=str(onnx_dir))
    got, trunc = enc.encode(texts, 16)
    assert got.shape == ref.shape == (len(texts), 384)
    assert _cos(got, ref).min() >= 0.9999
    np.testing.assert_array_equal(trunc, ref_trunc)
    assert trunc[-2] and not trunc[-1]
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    # reused, not exported again
    files = sorted(p.name for p in enc.path.parent.iterdir())
    assert files == ["model.onnx", "model.onnx.sha256", "model_int8.onnx",
                     "model_int8.onnx.sha256"]
    before = enc.path.stat().st_mtime_ns
    assert ensure_onnx(folder, onnx_dir) == enc.path and enc.path.stat().st_mtime_ns == before


def test_int8_close_to_fp32_on_real_sentences(folder, onnx_dir, wiki_sentences):
    fp32 = OnnxEncoder(folder, "cpu", threads=1, onnx_dir=str(onnx_dir))
    int8 = OnnxEncoder(folder, "cpu", threads=1, quantize="int8", onnx_dir=str(onnx_dir))
    assert int8.path.name == "model_int8.onnx"
    assert int8.path.stat().st_size < 0.8 * fp32.path.stat().st_size  # 69 MB against 90 MB
    a, _ = fp32.encode(wiki_sentences, 32, bucket=True)
    b, _ = int8.encode(wiki_sentences, 32, bucket=True)
    cos = _cos(a, b)
    print(f"int8 against fp32 on {len(cos)} sentences: min cosine {cos.min():.4f}, "
          f"mean {cos.mean():.4f}")
    assert cos.min() >= 0.98, cos.min()
    assert cos.mean() >= 0.995, cos.mean()
    assert cos.mean() < 0.99999  # it really is a different (quantised) model


def test_atomic_write_never_shows_a_half_file(tmp_path):
    final = tmp_path / "model.onnx"
    seen: list[bytes] = []
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            if final.exists():
                seen.append(final.read_bytes())
            time.sleep(0.001)

    def slow_write(path):
        with open(path, "wb") as f:
            for _ in range(20):
                f.write(b"x" * 1000)
                f.flush()
                time.sleep(0.005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    writers = [threading.Thread(target=_atomic, args=(final, slow_write)) for _ in range(2)]
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    deadline = time.monotonic() + 5
    while not seen and time.monotonic() < deadline:  # a loaded machine may starve the watcher
        time.sleep(0.01)
    stop.set()
    watcher.join()
    assert seen and all(len(s) == 20_000 for s in seen)
    assert [p.name for p in tmp_path.iterdir()] == ["model.onnx"]

    def broken(path):
        path.write_bytes(b"half")
        raise RuntimeError("export failed")

    with pytest.raises(RuntimeError):
        _atomic(tmp_path / "other.onnx", broken)
    assert [p.name for p in tmp_path.iterdir()] == ["model.onnx"]


def test_bucketed_batches_cut_padding_and_keep_order(torch_encoder, wiki_sentences):
    texts = [LONG, "Yes.", wiki_sentences[0], "No.", LONG[:300], "Maybe so.",
             wiki_sentences[1], "Ok."]
    widths: dict[bool, list[int]] = {True: [], False: []}
    for bucket in (False, True):
        forward = torch_encoder.forward

        def spy(batch, bucket=bucket, forward=forward):
            widths[bucket].append(batch["input_ids"].size)
            return forward(batch)

        torch_encoder.forward = spy
        try:
            emb, _ = torch_encoder.encode(texts, 2, bucket=bucket)
        finally:
            del torch_encoder.forward
        alone = np.concatenate([torch_encoder.encode([t])[0] for t in texts])
        assert _cos(emb, alone).min() >= 0.99999  # row i is still text i
    # padded token cells: 536 against 636 for these texts in batches of two
    assert sum(widths[True]) < 0.9 * sum(widths[False])
    assert widths[True] == sorted(widths[True])


def test_bucketed_stage_keeps_ids_and_row_order(spark, folder):
    texts = [LONG, "Yes.", None, "A medium sized sentence about parsing text.", "No.",
             LONG[:400], "   ", "Short.", "Another fairly long sentence, with some clauses, "
             "that goes on for a while before it ends."]
    rows = [(f"r{i}", t) for i, t in enumerate(texts)]
    df = spark.createDataFrame(rows, "rid string, body string").repartition(2, "rid")
    outs = {}
    for bucket in (True, False):
        got = embed(df, "body", "rid", folder, "cpu", batch_size=2, max_tokens=64, threads=1,
                    bucket=bucket).collect()
        outs[bucket] = got
    assert [r.id for r in outs[True]] == [r.id for r in outs[False]]
    assert sorted(r.id for r in outs[True]) == sorted(r[0] for r in rows)
    for a, b in zip(outs[True], outs[False], strict=True):
        assert a.text == b.text and a.truncated == b.truncated and a.reason == b.reason
        if a.embedding is None:
            assert b.embedding is None and a.reason in ("null text", "empty text")
        else:
            assert _cos(np.array([a.embedding]), np.array([b.embedding]))[0] >= 0.99999
    by_id = {r.id: r for r in outs[True]}
    assert by_id["r0"].truncated and not by_id["r1"].truncated


def _job(repo_root, src, out, **job):
    return load_config("embed", "local", repo_root / "conf", {"job": {
        "input": str(src), "id_col": "sid", "output": str(out),
        "neighbors": {"enabled": False}, "topics": {"enabled": False},
        "attention": {"enabled": False}, **job}})


def test_content_store_embeds_only_unseen_texts(spark, repo_root, tmp_path, wiki_sentences,
                                                onnx_dir):
    first = wiki_sentences[:12] + [wiki_sentences[0]]  # one duplicate text
    src1 = tmp_path / "first.csv"
    pd.DataFrame({"sid": range(len(first)), "sentence": first}).to_csv(src1, index=False)
    second = first + wiki_sentences[12:17] + [""]
    src2 = tmp_path / "second.csv"
    pd.DataFrame({"sid": range(len(second)), "sentence": second}).to_csv(src2, index=False)
    store = tmp_path / "store"
    common = {"engine": "onnx", "onnx_dir": str(onnx_dir)}

    r1 = run(spark, _job(repo_root, src1, tmp_path / "o1", cache_dir=str(store), **common))
    c1 = r1.report.counts
    assert (c1["cache_hits"], c1["cache_misses"], c1["cache_new_texts"]) == (0, 13, 12)
    assert c1["embedded_now"] == 12 and c1["embed_sentences_per_s"] > 0
    assert c1["embed_task_seconds"]["model"] > 0

    r2 = run(spark, _job(repo_root, src2, tmp_path / "o2", cache_dir=str(store), **common))
    c2 = r2.report.counts
    assert (c2["cache_hits"], c2["cache_misses"], c2["cache_new_texts"]) == (13, 5, 5)
    assert r2.report.outputs["embeddings"] == 18 and r2.report.total_rejects == 1

    plain = run(spark, _job(repo_root, src2, tmp_path / "o3", **common))
    assert "cache_hits" not in plain.report.counts
    assert plain.report.counts["embedded_now"] == 18
    cached_emb = pd.read_parquet(tmp_path / "o2" / "embeddings").set_index("id").sort_index()
    plain_emb = pd.read_parquet(tmp_path / "o3" / "embeddings").set_index("id").sort_index()
    assert list(cached_emb.index) == list(plain_emb.index)
    ok = plain_emb["embedding"].notna()
    assert (cached_emb["embedding"].notna() == ok).all()
    a = np.stack(cached_emb.loc[ok, "embedding"].to_numpy())
    b = np.stack(plain_emb.loc[ok, "embedding"].to_numpy())
    assert _cos(a, b).min() >= 0.99999
    assert cached_emb["truncated"].equals(plain_emb["truncated"])

    # another engine is another key: nothing found
    r4 = run(spark, _job(repo_root, src1, tmp_path / "o4", cache_dir=str(store),
                         quantize="int8", **common))
    assert r4.report.counts["cache_hits"] == 0 and r4.report.counts["cache_new_texts"] == 12


def test_engine_and_device_errors_are_clear():
    with pytest.raises(ConfigError, match="needs --engine onnx"):
        EngineSpec("m", "torch", quantize="int8")
    with pytest.raises(ConfigError, match="engine must be"):
        EngineSpec("m", "tensorflow")
    assert providers("cpu", ["CPUExecutionProvider"]) == ["CPUExecutionProvider"]
    with pytest.raises(DeviceError, match="onnxruntime-gpu"):
        providers("cuda:0", ["AzureExecutionProvider", "CPUExecutionProvider"])
    assert providers("cuda:1", ["CUDAExecutionProvider", "CPUExecutionProvider"])[0] == (
        "CUDAExecutionProvider", {"device_id": 1})
    assert EngineSpec("m", "onnx", quantize="int8").engine_id == "onnx-int8"
    assert EngineSpec("m", "torch", half=True).engine_id == "torch-fp16"
    assert EngineSpec("m", "torch", precision="fp16").engine_id == "torch-fp16"
    assert EngineSpec("m", "torch", precision="bf16").engine_id == "torch-bf16"
    assert EngineSpec("m", "torch").engine_id == "torch"
    with pytest.raises(ConfigError, match="half .*bf16 disagree"):
        EngineSpec("m", "torch", half=True, precision="bf16")
    with pytest.raises(ConfigError, match="precision bf16 needs the torch engine"):
        EngineSpec("m", "onnx", precision="bf16")  # the embedding's export too


def test_onnx_export_of_the_driver_is_what_executors_load(tmp_path):
    inside = EngineSpec("/models/m", "onnx", onnx_file="/models/m/onnx/fp/model.onnx")
    assert inside.shipped_folders() == ["/models/m"]
    assert inside._onnx_file_here(tmp_path) == tmp_path / "onnx/fp/model.onnx"  # its copy
    outside = EngineSpec("/models/m", "onnx", onnx_file=str(tmp_path / "m-fp/model.onnx"))
    assert outside.shipped_folders() == ["/models/m", str(tmp_path / "m-fp")]
    # nothing shipped (a local master): the driver's own file
    assert outside._onnx_file_here(Path("/models/m")) == tmp_path / "m-fp/model.onnx"
    assert EngineSpec("/models/m", "torch")._onnx_file_here(tmp_path) is None


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs executors without CUDA")
def test_cuda_on_executors_without_it_is_one_error_line(spark, repo_root, tmp_path, monkeypatch,
                                                         capsys):
    """The executors' Python workers build the encoder and find no CUDA device: the library's
    run raises the DeviceError itself, the job ends with one error line and exit 2."""
    src = tmp_path / "texts.csv"
    pd.DataFrame({"sid": [1, 2], "sentence": ["One text.", "Another text."]}).to_csv(
        src, index=False)
    with pytest.raises(DeviceError, match="no GPU on this executor") as err:
        run(spark, _job(repo_root, src, tmp_path / "lib", device="cuda"))
    assert "\n" not in str(err.value) and "Traceback" not in str(err.value)
    assert not (tmp_path / "lib").exists()

    # a driver with a GPU passes the check before Spark starts; the workers still have none
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    code = job_module("embed").main([
        "--conf-dir", str(repo_root / "conf"), "--input", str(src), "--id-col", "sid",
        "--output", str(tmp_path / "out"), "--device", "cuda"])
    err_text = capsys.readouterr().err
    lines = [ln for ln in err_text.splitlines() if ln.startswith("error: ")]
    assert code == 2 and len(lines) == 1, err_text[-3000:]
    assert "--device cuda but torch sees no CUDA device" in lines[0]
    assert "no GPU on this executor" in lines[0]  # the workers' error, not the driver's check
    assert "Traceback" not in err_text and not (tmp_path / "out").exists()


def test_job_flags_reach_the_engine(repo_root):
    from tests.conftest import job_parser

    args = job_parser("embed").parse_args([
        "--input", "x.csv", "--engine", "onnx", "--quantize", "int8", "--no-bucket",
        "--cache-dir", "/tmp/store", "--onnx-dir", "/tmp/onnx"])
    assert (args.engine, args.quantize, args.bucket) == ("onnx", "int8", False)
    with pytest.raises(SystemExit):
        job_parser("embed").parse_args(["--input", "x", "--quantize", "int4"])


def test_encoded_batch_puts_vectors_at_their_rows_and_nulls_elsewhere():
    vectors = np.arange(6, dtype=np.float32).reshape(2, 3)
    embedding, truncated = encoded_array(4, np.array([1, 3]), vectors, np.array([True, False]))
    assert embedding.type == pa.list_(pa.field("element", pa.float32(), nullable=False))
    assert embedding.to_pylist() == [None, [0.0, 1.0, 2.0], None, [3.0, 4.0, 5.0]]
    assert truncated.to_pylist() == [None, True, None, False]
    none, _ = encoded_array(2, np.array([], dtype=np.int64), np.zeros((0, 0), np.float32),
                            np.zeros(0, bool))
    assert none.to_pylist() == [None, None]
    split = Split(load=1.0, model=2.5)
    batch = with_split([embedding, truncated], split).to_pylist()
    assert batch[0][SPLIT] == {"load": 1.0, "arrow_in": 0.0, "tokenise": 0.0, "model": 2.5,
                               "pool": 0.0, "arrow_out": 0.0}
    assert [row[SPLIT] for row in batch[1:]] == [None] * 3


def test_encoders_time_tokenising_model_and_pooling(folder, onnx_dir, torch_encoder,
                                                     wiki_sentences):
    onnx = OnnxEncoder(folder, "cpu", threads=1, onnx_dir=str(onnx_dir))
    for enc in (torch_encoder, onnx):
        split = Split()
        enc.encode(wiki_sentences[:40], 16, True, split)
        assert split.model > 0 and split.tokenise > 0 and split.pool > 0
        assert split.model > split.tokenise + split.pool  # the model is what takes the time
        assert (split.load, split.arrow_in, split.arrow_out) == (0, 0, 0)  # the column's


def test_batch_tokenising_gives_the_tokenizers_own_ids(torch_encoder, wiki_sentences):
    texts = wiki_sentences[:80] + [LONG, "Hi.", "Ünïcödé café, naïve — 日本語のテキスト"]
    assert torch_encoder._cutters is not None  # the Rust tokenizer called directly
    got = torch_encoder.tokenize(texts)
    tok, most = torch_encoder.tokenizer, torch_encoder.max_tokens
    ref = tok(texts, truncation=True, max_length=most)
    assert got.ids == ref["input_ids"] and got.type_ids == ref["token_type_ids"]
    whole = tok(texts)["input_ids"]
    assert got.truncated.tolist() == [len(ids) > most for ids in whole]
    assert got.truncated[-3] and got.truncated.sum() == 1
