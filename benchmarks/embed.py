"""Sentence embeddings: the Spark stage vs the model called directly in one process, same model,
batch size and total threads, on real sentences from the Wikipedia corpus.

Usage: python benchmarks/embed.py [--sentences 3000] [--batch-size 64] [--cores 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import tarfile
import time
from pathlib import Path

import numpy as np

from sparkfield.core.conf import load_config
from sparkfield.core.session import build_session
from sparkfield.nlp.embed import embed
from sparkfield.nlp.encoder import Encoder
from sparkfield.nlp.model import check_model_dir
from sparkfield.text.normalise import sentences
from sparkfield.text.parse import page_text

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared/data/corpus"


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
    args = ap.parse_args()
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
    print(f"direct (one process, {args.cores} torch threads): {t_direct:.1f} s = "
          f"{direct_rate:.0f} sentences/s")

    cfg = load_config("embed", "local", ROOT / "conf", {"spark": {
        "master": f"local[{args.cores}]", "conf": {"spark.driver.memory": "4g"}}})
    spark = build_session(cfg)
    spark.sparkContext.setLogLevel("WARN")
    df = spark.createDataFrame([(str(i), t) for i, t in enumerate(texts)],
                               "id string, text string").repartition(args.cores).cache()
    df.count()
    # warm-up: starts the Python workers and loads the model in each
    embed(df.limit(args.cores * 64), "text", "id", folder, "cpu", args.batch_size,
          threads=1).write.format("noop").mode("overwrite").save()
    t0 = time.perf_counter()
    embed(df, "text", "id", folder, "cpu", args.batch_size, threads=1).write.format(
        "noop").mode("overwrite").save()
    t_spark = time.perf_counter() - t0
    spark_rate = len(texts) / t_spark
    print(f"Spark stage ({args.cores} tasks x 1 torch thread): {t_spark:.1f} s = "
          f"{spark_rate:.0f} sentences/s -> {spark_rate / direct_rate:.0%} of the direct call")
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
