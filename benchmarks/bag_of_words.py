"""Bag-of-words: the Spark stages against the obvious single-process alternatives, one run.

(a) Vectoriser, tokens/s: the 372 Gutenberg books (110 MB of text) -> token rule (lower-case,
    Python-regex \\w runs) -> top-200 vocabulary -> count vectors per book; Spark at 1 and 2
    cores vs scikit-learn's CountVectorizer(token_pattern=r"\\w+", max_features=200) on 1 core.
    Every run of (a) and (c) is held to its cores (``taskset``; the Spark runs in processes of
    their own), so the JVM's threads of a 1-core run do not borrow the second core.
(b) Parse stage, pages/s: Wikipedia pages (saved HTML) -> BeautifulSoup(lxml) <p> text; the
    Spark stage at 2 cores vs a plain single-process loop over the same files.
(c) Main-content extraction, pages/s: the 610 annotated pages of the extraction benchmark ->
    trafilatura in the Spark parse stage at 1 and 2 cores vs trafilatura in one process on the
    same files; the F1 of each mode (main, selector "p", trafilatura directly) by the
    benchmark's scoring rule.

Usage: python benchmarks/bag_of_words.py [--pages 400] [--repeats 3]
                                         [--only vectoriser|parse|extraction]
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from urllib.parse import unquote

from machine import describe
from pyspark.ml.functions import vector_to_array
from pyspark.sql import functions as F

from sparkfield.core.conf import load_config
from sparkfield.core.practices import place
from sparkfield.core.session import build_session
from sparkfield.text.bag_of_words.evaluate import score, unpack_benchmark
from sparkfield.text.bag_of_words.parse import MAIN_OPTIONS, page_text
from sparkfield.text.bag_of_words.vectorise import term_counts, term_vectors, vocabulary
from sparkfield.text.job import pages_from_html_dir, parse_documents, parse_partitions

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("SPARKFIELD_DATA", ROOT.parent / "shared/data")) / "corpus"


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


def spark_vectoriser(spark, docs: list[tuple[str, str]], repeats: int
                     ) -> tuple[int, list[float], dict[str, int], float]:
    """The job's document path: term counts in the Python workers, the vocabulary and count
    vectors from them. The documents are cached in the layout the job gives pages before it
    parses them (placed by size: one partition per core of about equal UTF-8 bytes), which the
    documents it counts keep. Returns tokens, the time of each repeat, the
    vocabulary's counts and the sum of every vector's values (for the check against
    scikit-learn)."""
    sizes = {d: len(t.encode("utf-8")) for d, t in docs}
    df = spark.createDataFrame(docs, "doc_id string, text string")
    df = place(df, "doc_id", sizes, parse_partitions(spark, sum(sizes.values())))[0].cache()
    df.count()
    times = []
    for i in range(repeats + 1):  # the first run (not timed) starts the workers, warms the JIT
        t0 = time.perf_counter()
        terms = term_counts(df).cache()
        vocab = {r["word"]: r["count"] for r in vocabulary(terms, 200).collect()}
        vectors = term_vectors(terms, list(vocab), "count")
        vectors.write.format("noop").mode("overwrite").save()
        if i:
            times.append(time.perf_counter() - t0)
        # the checks, not timed: tokens counted and the vectors' sum
        n_tokens = terms.select(F.sum(F.aggregate("counts", F.lit(0), lambda a, x: a + x))
                                ).first()[0]
        total = vectors.select(F.sum(F.aggregate(vector_to_array("vector"), F.lit(0.0),
                                                 lambda a, x: a + x))).first()[0]
        terms.unpersist()
    df.unpersist()
    return n_tokens, times, vocab, total


def sklearn_vectoriser(docs: list[tuple[str, str]], repeats: int
                       ) -> tuple[list[float], dict[str, int], float]:
    from sklearn.feature_extraction.text import CountVectorizer

    texts = [t for _, t in docs]
    times = []
    for _ in range(repeats):
        gc.collect()  # each run starts from the same memory: the last one's matrix is freed
        t0 = time.perf_counter()
        cv = CountVectorizer(token_pattern=r"\w+", lowercase=True, max_features=200)
        m = cv.fit_transform(texts)
        times.append(time.perf_counter() - t0)
        totals = m.sum(axis=0).A1
        vocab = {w: int(totals[i]) for w, i in cv.vocabulary_.items()}
        total = float(m.sum())
        del cv, m
    return times, vocab, total


def _cpus(n: int) -> list[int]:
    """The first ``n`` CPUs this process may run on: a run "on n cores" is held to them, JVM
    threads and Python workers included (local[1] alone still lets the JVM's threads use
    every core of the machine)."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < n:
        raise SystemExit(f"{n} cores asked for, {len(cpus)} available")
    return cpus[:n]


def child(part: str, cores: int, repeats: int) -> None:
    """One Spark part on ``cores`` cores in this process (started by :func:`_on_cores` under
    ``taskset``): its results as one JSON line."""
    if part == "vectoriser":
        docs = books()
        spark = session(cores)
        n, times, vocab, total = spark_vectoriser(spark, docs, repeats)
        spark.stop()
        print(json.dumps({"tokens": n, "times": times, "vocab": vocab, "total": total}))
        return
    extract, html = part.split(":", 1)
    read, times, texts = _spark_extract(cores, Path(html), extract, repeats)
    print(json.dumps({"read": read, "times": times, "texts": texts}))


def _on_cores(part: str, cores: int, repeats: int = 1) -> dict:
    """:func:`child` run in a process of its own held to the first ``cores`` CPUs."""
    cpus = ",".join(map(str, _cpus(cores)))
    out = subprocess.run(["taskset", "-c", cpus, sys.executable, __file__, "--repeats",
                          str(repeats), "--child", part, str(cores)],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{part} on {cores} core(s) failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def vectoriser(repeats: int) -> None:
    docs = books()
    print(f"== (a) vectoriser on {len(docs)} Gutenberg books, median of {repeats} runs; "
          "each run held to its cores (taskset)")
    everywhere = os.sched_getaffinity(0)
    os.sched_setaffinity(0, _cpus(1))
    try:
        t_sk, sk_vocab, sk_total = sklearn_vectoriser(docs, repeats)
    finally:
        os.sched_setaffinity(0, everywhere)
    results = {}
    for cores in (1, 2):
        got = _on_cores("vectoriser", cores, repeats)
        results[cores] = (got["tokens"], got["times"], got["vocab"], got["total"])
    n, _, vocab, total = results[2]
    sk = statistics.median(t_sk)
    print(f"{n / 1e6:.1f} M tokens; same vocabulary and counts as scikit-learn: "
          f"{vocab == sk_vocab}; same vector total: {total == sk_total}")
    print(f"scikit-learn CountVectorizer (1 process, 1 core): {sk:.2f} s = "
          f"{n / sk / 1e6:.2f} M tokens/s   (runs: {_fmt(t_sk)})")
    for cores, (_, times, _, _) in results.items():
        t = statistics.median(times)
        print(f"Spark vectoriser, {cores} core(s): {t:.2f} s = {n / t / 1e6:.2f} M tokens/s "
              f"-> {sk / t:.2f}x scikit-learn   (runs: {_fmt(times)})")
    print("Spark scaling 1 -> 2 cores: "
          f"{statistics.median(results[1][1]) / statistics.median(results[2][1]):.2f}x")


def _fmt(times: list[float]) -> str:
    return ", ".join(f"{t:.2f}" for t in times)


def parse(n_pages: int) -> None:
    print(f"\n== (b) parse stage on {n_pages} Wikipedia pages")
    work = Path(tempfile.mkdtemp(prefix="sparkfield-bow-bench-"))
    with tarfile.open(CORPUS / "wikipedia_uoi_2020_html.tar.xz", "r:*") as tar:
        members = [m for m in tar.getmembers() if m.isfile()][:n_pages]
        for m in members:
            (work / Path(m.name).name).write_bytes(tar.extractfile(m).read())
    files = sorted(work.iterdir())
    t0 = time.perf_counter()
    loop_chars = sum(len(page_text(f.read_bytes().decode("utf-8", "replace"))[1])
                     for f in files)
    t_loop = time.perf_counter() - t0
    spark = session(2)
    pages = pages_from_html_dir(spark, str(work))[0].withColumn("doc_id", F.col("url"))
    pages = pages.cache()  # in the job's layout
    pages.count()
    parse_documents(pages.sample(0.02, seed=1), "selector", "p").collect()  # warm-up
    t0 = time.perf_counter()
    parsed = parse_documents(pages, "selector", "p")
    spark_chars = parsed.select(F.sum(F.length("text"))).first()[0]
    t_spark = time.perf_counter() - t0
    spark.stop()
    print(f"single-process BeautifulSoup loop: {t_loop:.1f} s = {len(files) / t_loop:.1f} "
          "pages/s")
    print(f"Spark parse stage, 2 cores: {t_spark:.1f} s = {len(files) / t_spark:.1f} pages/s "
          f"-> {t_loop / t_spark:.2f}x; same text: {loop_chars == spark_chars}")


def _spark_extract(cores: int, html: Path, extract: str, repeats: int
                   ) -> tuple[float, list[float], dict[str, str]]:
    """Seconds to read the pages as the job does (listing, layout, decoding; cached), seconds
    of each run of the Spark parse stage over them, and each file's text."""
    spark = session(cores)
    pages_from_html_dir(spark, str(html))[0].write.format("noop").mode("overwrite").save()
    t0 = time.perf_counter()  # a second read: the first one also started the JVM's code
    pages = pages_from_html_dir(spark, str(html))[0].withColumn("doc_id", F.col("url")).cache()
    pages.count()
    read = time.perf_counter() - t0
    # warm-up: a few pages of every partition, so every Python worker has started
    parse_documents(pages.sample(0.02, seed=1), extract).collect()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        rows = parse_documents(pages, extract, "p").select("url", "text").collect()
        times.append(time.perf_counter() - t0)
    spark.stop()
    return read, times, {unquote(Path(r["url"]).name): r["text"] for r in rows}


def extraction(repeats: int) -> None:
    work = Path(tempfile.mkdtemp(prefix="sparkfield-extract-bench-"))
    html, annotations = unpack_benchmark(CORPUS / "extraction_benchmark.tar.xz", work)
    n = len(annotations)
    print(f"\n== (c) main-content extraction on {n} annotated pages, median of {repeats} runs; "
          "each run held to its cores (taskset)")
    import trafilatura

    everywhere = os.sched_getaffinity(0)
    os.sched_setaffinity(0, _cpus(1))
    times = []
    try:
        for _ in range(repeats):
            t0 = time.perf_counter()
            direct = {f: trafilatura.extract((html / f).read_bytes(), **MAIN_OPTIONS)
                      for f in annotations}
            times.append(time.perf_counter() - t0)
    finally:
        os.sched_setaffinity(0, everywhere)
    t_direct = statistics.median(times)
    print(f"trafilatura in one process, 1 core: {t_direct:.1f} s = {n / t_direct:.1f} pages/s; "
          f"{score(annotations, direct)}   (runs: {_fmt(times)})")
    for cores in (1, 2):
        got = _on_cores(f"main:{html}", cores, repeats)
        t, texts = statistics.median(got["times"]), got["texts"]
        print(f"Spark --extract main, {cores} core(s): {t:.1f} s = {n / t:.1f} pages/s -> "
              f"{t_direct / t:.2f}x trafilatura; {len(texts)} pages; "
              f"{score(annotations, texts)}   (runs: {_fmt(got['times'])}; reading the pages "
              f"before, as the job does: listing, layout, decoding, caching: {got['read']:.1f} s)")
    got = _on_cores(f"selector:{html}", 2, repeats)
    t, texts = statistics.median(got["times"]), got["texts"]
    print(f"Spark --extract selector (p), 2 cores: {t:.1f} s = {n / t:.1f} pages/s; "
          f"{score(annotations, texts)}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=400)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", choices=("vectoriser", "parse", "extraction"),
                    help="run one part")
    ap.add_argument("--child", nargs=2, metavar=("PART", "CORES"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if not getattr(args, "child", None):
        print(describe(), flush=True)
    if args.child:
        child(args.child[0], int(args.child[1]), args.repeats)
        return 0
    if args.only in (None, "vectoriser"):
        vectoriser(args.repeats)
    if args.only in (None, "parse"):
        parse(args.pages)
    if args.only in (None, "extraction"):
        extraction(args.repeats)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    sys.exit(main())
