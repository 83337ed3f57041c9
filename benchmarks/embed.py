"""Sentence embeddings on the same real Wikipedia sentences in one run: the torch model called
directly in one process, then the Spark stage with the torch engine (unbucketed and
length-bucketed), ONNX Runtime fp32 and ONNX Runtime int8, and torch in bfloat16 where the CPU
multiplies it natively (AVX-512 BF16, AMX); same batch size and total threads.
Each stage prints where its tasks' time went (loading, Arrow in, tokenising, model, pooling,
Arrow out; the rest of the wall time on all cores is Spark's scheduling and idle cores). Every
Python worker loads its model before the timed runs; with ``--repeats`` above 1 the stages run
in turn that many times and each keeps its fastest run (a shared machine's other load moves
single runs by up to a third).

Usage: python benchmarks/embed.py [--sentences 3000] [--batch-size 64] [--cores 2] [--repeats 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np
from machine import describe

from sparkfield.core.conf import load_config
from sparkfield.core.session import build_session
from sparkfield.nlp.device import native_bf16
from sparkfield.nlp.embed import embed, split_seconds
from sparkfield.nlp.encoder import Encoder
from sparkfield.nlp.model import check_model_dir
from sparkfield.nlp.onnx_engine import ensure_onnx
from sparkfield.text.bag_of_words.normalise import sentences
from sparkfield.text.bag_of_words.parse import page_text

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("SPARKFIELD_DATA", ROOT.parent / "shared/data")) / "corpus"


def real_sentences(n: int) -> list[str]:
    out: list[str] = []
    with tarfile.open(CORPUS / "wikipedia_uoi_2020_html.tar.xz", "r:*") as tar:
        for m in tar:
            if not m.isfile():
                continue
            _, text = page_text(tar.extractfile(m).read().decode("utf-8", "replace"))
            out += sentences(text)
            if len(out) >= n:
                return out[:n]
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sentences", type=int, default=3000)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2, help="timed runs per stage, in turn")
    ap.add_argument("--onnx-dir", help="reuse an export (default: a fresh temporary one)")
    args = ap.parse_args()
    if not getattr(args, "child", None):
        print(describe(), flush=True)
    import torch

    texts = real_sentences(args.sentences)
    words = np.mean([len(t.split()) for t in texts])
    folder = check_model_dir(None)
    print(f"{len(texts)} real Wikipedia sentences (mean {words:.1f} words), batch "
          f"{args.batch_size}, {args.cores} cores")

    enc = Encoder(folder, "cpu", 256, threads=args.cores)
    enc.encode(texts[:64])
    t0 = time.perf_counter()
    for i in range(0, len(texts), args.batch_size):
        enc.encode(texts[i:i + args.batch_size])
    t_direct = time.perf_counter() - t0
    direct_rate = len(texts) / t_direct
    print(f"torch direct (one process, {args.cores} torch threads, unbucketed): {t_direct:.1f} s"
          f" = {direct_rate:.0f} sentences/s")

    cfg = load_config("embed", "local", ROOT / "conf", {"spark": {
        "master": f"local[{args.cores}]", "conf": {"spark.driver.memory": "4g"}}})
    spark = build_session(cfg)
    spark.sparkContext.setLogLevel("WARN")
    df = spark.createDataFrame([(str(i), t) for i, t in enumerate(texts)],
                               "id string, text string").repartition(args.cores).cache()
    df.count()
    onnx_dir = args.onnx_dir or tempfile.mkdtemp(prefix="sparkfield-onnx-")
    t0 = time.perf_counter()
    ensure_onnx(folder, onnx_dir, "int8")
    print(f"ONNX export + int8 quantisation (once, cached on disk): "
          f"{time.perf_counter() - t0:.1f} s")
    stages = [("torch stage, unbucketed", {"engine": "torch", "bucket": False}),
              ("torch stage", {"engine": "torch"}),
              ("onnx stage", {"engine": "onnx"}),
              ("onnx int8 stage", {"engine": "onnx", "quantize": "int8"})]
    if native_bf16():  # elsewhere precision bf16 runs float32 on the CPU
        stages.append(("torch bf16 stage", {"engine": "torch", "precision": "bf16"}))
    stages = [(name, {"device": "cpu", "batch_size": args.batch_size, "threads": 1,
                      "onnx_dir": onnx_dir, **kw}) for name, kw in stages]
    # every task of this frame starts at once, so each Python worker loads its model here
    warm = spark.createDataFrame([(str(i), t) for i, t in enumerate(texts[:args.cores * 64])],
                                 "id string, text string").repartition(args.cores)
    for _, kw in stages:
        split_seconds(embed(warm, "text", "id", folder, split=True, **kw))
    best: dict[str, tuple[float, dict[str, float]]] = {}
    for _ in range(max(1, args.repeats)):
        for name, kw in stages:
            t0 = time.perf_counter()
            split = split_seconds(embed(df, "text", "id", folder, split=True, **kw))
            seconds = time.perf_counter() - t0
            if name not in best or seconds < best[name][0]:
                best[name] = (seconds, split)
    rates: dict[str, float] = {}
    for name, _ in stages:
        seconds, split = best[name]
        rates[name] = len(texts) / seconds
        rest = seconds * args.cores - sum(split.values())
        parts = ", ".join(f"{k} {v:.2f}" for k, v in split.items())
        print(f"{name} ({args.cores} tasks x 1 thread): {seconds:.1f} s = "
              f"{rates[name]:.0f} sentences/s; task seconds: {parts}; model "
              f"{split['model'] / (seconds * args.cores):.0%} of {args.cores} cores x wall, "
              f"rest (Spark, idle cores) {rest:.2f}")
    base = rates["torch stage"]
    print(f"torch stage / torch direct: {base / direct_rate:.2f}x; bucketing: "
          f"{base / rates['torch stage, unbucketed']:.2f}x")
    print(f"onnx / torch stage: {rates['onnx stage'] / base:.2f}x (goal 1.2x); "
          f"onnx int8 / torch stage: {rates['onnx int8 stage'] / base:.2f}x (goal 2x)")
    if native_bf16():
        vectors = [np.stack(embed(df, "text", "id", folder, device="cpu", precision=precision)
                            .orderBy("id").toPandas()["embedding"].map(np.asarray))
                   for precision in ("fp32", "bf16")]
        cos = (vectors[0] * vectors[1]).sum(1)  # both L2-normalised
        print(f"torch bf16 / torch stage: {rates['torch bf16 stage'] / base:.2f}x; cosine to "
              f"float32's vectors: min {cos.min():.5f}, mean {cos.mean():.5f}")
    if torch.cuda.is_available():
        gpu = Encoder(folder, "cuda:0", 256)
        gpu.encode(texts[:64])
        t0 = time.perf_counter()
        for i in range(0, len(texts), args.batch_size):
            gpu.encode(texts[i:i + args.batch_size])
        print(f"GPU direct: {len(texts) / (time.perf_counter() - t0):.0f} sentences/s")
    else:
        print("no GPU here: GPU figures not measured")
    spark.stop()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    sys.exit(main())
