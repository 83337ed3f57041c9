"""Sentence splitting, MB/s per core: NLTK's Punkt against ``sentence_split``, same text.

Both split the first ``--books`` Gutenberg books line by line, whitespace made single spaces:
NLTK through :func:`sparkfield.text.bag_of_words.normalise.nltk_sentences` (a call per line),
``sentence_split`` through :func:`~sparkfield.text.bag_of_words.normalise.sentences` (a whole
book at a time). One process (one core), best of ``--repeats`` CPU-time runs each, every run
with empty decision caches; the sentences must be equal.
``--smoke``: the six Wikipedia pages of tests/fixtures instead of the books.

Usage: python benchmarks/sentences.py [--books 40] [--repeats 3] [--smoke]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import tarfile
import time
from pathlib import Path

from machine import describe

from sparkfield.text.bag_of_words.normalise import nltk_sentences, sentences
from sparkfield.text.bag_of_words.parse import page_text
from sparkfield.text.bag_of_words.sentence_split import english_splitter

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("SPARKFIELD_DATA", ROOT.parent / "shared/data")) / "corpus"


def books(n: int) -> list[str]:
    out: list[str] = []
    for part in sorted((CORPUS / "gutenberg_rcdm_uga").glob("part-*.jsonl.gz")):
        with gzip.open(part, "rt", encoding="utf-8") as f:
            for line in f:
                if len(out) == n:
                    return out
                out.append(json.loads(line)["text"])
    return out


def fixture_pages() -> list[str]:
    with tarfile.open(ROOT / "tests/fixtures/wikipedia/six_pages.tar.xz", "r:*") as tar:
        return [page_text(tar.extractfile(m).read().decode("utf-8"))[1]
                for m in tar if m.isfile() and m.name.endswith(".html")]


def best_of(split, texts: list[str], repeats: int) -> tuple[float, list[list[str]]]:
    best, result = float("inf"), []
    for _ in range(repeats):
        english_splitter().clear_cache()  # each run starts with no remembered decisions
        t0 = time.process_time()
        result = [split(t) for t in texts]
        best = min(best, time.process_time() - t0)
    return best, result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--books", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    print(describe())
    texts = fixture_pages() if args.smoke else books(args.books)
    what = f"{len(texts)} fixture pages" if args.smoke else f"{len(texts)} Gutenberg books"
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    sentences(texts[0]), nltk_sentences(texts[0])  # parameters loaded, patterns compiled
    nltk_s, nltk_out = best_of(nltk_sentences, texts, args.repeats)
    fast_s, fast_out = best_of(sentences, texts, args.repeats)
    same = nltk_out == fast_out
    n = sum(map(len, fast_out))
    print(f"text: {what}, {mb:.1f} MB, {n} sentences; best of {args.repeats}, CPU time, 1 core")
    print(f"NLTK Punkt:     {nltk_s:7.2f} s  {mb / nltk_s:6.2f} MB/s per core")
    print(f"sentence_split: {fast_s:7.2f} s  {mb / fast_s:6.2f} MB/s per core")
    print(f"ratio: {nltk_s / fast_s:.1f}x; identical sentences: {same}")
    if not same:
        raise SystemExit("the splitters disagree")


if __name__ == "__main__":
    main()
