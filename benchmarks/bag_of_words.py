"""Bag-of-words: the Spark stages against the obvious single-process alternatives, one run.

(a) Vectoriser, tokens/s: the 372 Gutenberg books (110 MB of text) -> token rule (lower-case,
    Python-regex \\w runs) -> top-200 vocabulary -> count vectors per book; Spark at 1 and 2
    cores vs scikit-learn's CountVectorizer(token_pattern=r"\\w+", max_features=200).
(b) Parse stage, pages/s: Wikipedia pages (saved HTML) -> BeautifulSoup(lxml) <p> text; the
    Spark stage at 2 cores vs a plain single-process loop over the same files.

Usage: python benchmarks/bag_of_words.py [--pages 400]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
from pyspark.sql import functions as F

from sparkfield.core.conf import load_config
from sparkfield.core.session import build_session
from sparkfield.text.job import pages_from_html_dir
from sparkfield.text.normalise import tokens
from sparkfield.text.parse import DOC_SCHEMA, page_text, parse_batches
from sparkfield.text.vectorise import vectorise, vocabulary

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared/data/corpus"


def session(cores: int):
    cfg = load_config("bag_of_words", "local", ROOT / "conf", {"spark": {
        "master": f"local[{cores}]", "conf": {
            "spark.sql.shuffle.partitions": str(4 * cores), "spark.driver.memory": "6g",
            "spark.sql.execution.arrow.maxRecordsPerBatch": "8"}}})
    spark = build_session(cfg, app_name=f"bench-bow-{cores}")
    spark.sparkContext.setLogLevel("WARN")
    return spark


def books() -> list[tuple[str, str]]:
    out = []
    for part in sorted((CORPUS / "gutenberg_rcdm_uga").glob("part-*.jsonl.gz")):
        with gzip.open(part, "rt", encoding="utf-8") as fh:
            out += [(d["doc_id"], d["text"]) for d in map(json.loads, fh)]
    return out


def _tokenise(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    for b in batches:
        yield pd.DataFrame({"doc_id": b["doc_id"], "tokens": [tokens(t) for t in b["text"]]})


def spark_vectoriser(spark, docs: list[tuple[str, str]]) -> tuple[int, float]:
    df = spark.createDataFrame(docs, "doc_id string, text string").repartition(
        4 * spark.sparkContext.defaultParallelism).cache()
    df.count()
    t0 = time.perf_counter()
    toks = df.mapInPandas(_tokenise, "doc_id string, tokens array<string>").cache()
    n_tokens = toks.select(F.sum(F.size("tokens"))).first()[0]
    vocab = vocabulary(toks, 200, 1)
    words = [r["word"] for r in vocab.collect()]
    vectorise(toks, words, "count").select("vector").write.format("noop").mode(
        "overwrite").save()
    seconds = time.perf_counter() - t0
    toks.unpersist()
    df.unpersist()
    return n_tokens, seconds


def sklearn_vectoriser(docs: list[tuple[str, str]]) -> tuple[int, float]:
    from sklearn.feature_extraction.text import CountVectorizer

    texts = [t for _, t in docs]
    t0 = time.perf_counter()
    cv = CountVectorizer(token_pattern=r"\w+", lowercase=True, max_features=200)
    m = cv.fit_transform(texts)
    seconds = time.perf_counter() - t0
    return int(m.shape[0]), seconds


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=400)
    args = ap.parse_args()
    docs = books()
    n_tok = sum(len(tokens(t)) for _, t in docs[:20]) * len(docs) / 20  # estimate only
    print(f"== (a) vectoriser on {len(docs)} Gutenberg books (~{n_tok / 1e6:.0f} M tokens)")
    _, t_sk = sklearn_vectoriser(docs)
    results = {}
    for cores in (1, 2):
        spark = session(cores)
        spark_vectoriser(spark, docs[:20])  # warm-up
        n, t = spark_vectoriser(spark, docs)
        results[cores] = (n, t)
        spark.stop()
    n = results[2][0]
    print(f"scikit-learn CountVectorizer (1 process): {t_sk:.1f} s = {n / t_sk / 1e6:.2f} M "
          "tokens/s")
    for cores, (n, t) in results.items():
        print(f"Spark vectoriser, {cores} core(s): {t:.1f} s = {n / t / 1e6:.2f} M tokens/s "
              f"-> {t_sk / t:.2f}x scikit-learn")
    print(f"Spark scaling 1 -> 2 cores: {results[1][1] / results[2][1]:.2f}x")

    print(f"\n== (b) parse stage on {args.pages} Wikipedia pages")
    work = Path(tempfile.mkdtemp(prefix="sparkfield-bow-bench-"))
    with tarfile.open(CORPUS / "wikipedia_uoi_2020_html.tar.xz", "r:*") as tar:
        members = [m for m in tar.getmembers() if m.isfile()][: args.pages]
        for m in members:
            (work / Path(m.name).name).write_bytes(tar.extractfile(m).read())
    files = sorted(work.iterdir())
    t0 = time.perf_counter()
    loop_chars = sum(len(page_text(f.read_bytes().decode("utf-8", "replace"))[1]) for f in files)
    t_loop = time.perf_counter() - t0
    spark = session(2)
    pages = pages_from_html_dir(spark, str(work)).withColumn("doc_id", F.col("url"))
    pages = pages.repartition(8).cache()
    pages.count()
    t0 = time.perf_counter()
    parsed = pages.select("doc_id", "url", "html").mapInPandas(parse_batches("p"), DOC_SCHEMA)
    spark_chars = parsed.select(F.sum(F.length("text"))).first()[0]
    t_spark = time.perf_counter() - t0
    spark.stop()
    print(f"single-process BeautifulSoup loop: {t_loop:.1f} s = {len(files) / t_loop:.1f} "
          "pages/s")
    print(f"Spark parse stage, 2 cores: {t_spark:.1f} s = {len(files) / t_spark:.1f} pages/s "
          f"-> {t_loop / t_spark:.2f}x; same text: {loop_chars == spark_chars}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    sys.exit(main())
