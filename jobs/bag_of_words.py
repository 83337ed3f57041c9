"""Bag-of-words of a scraped corpus: fetch politely (or read saved pages), parse, split
sentences, build a top-N vocabulary and binary / count / TF-IDF vectors."""

from __future__ import annotations

import argparse
import sys

from sparkfield.core import cli
from sparkfield.text import BagOfWordsResult, run


def parser() -> argparse.ArgumentParser:
    p = cli.base_parser("bag_of_words", __doc__.splitlines()[0])
    src = p.add_mutually_exclusive_group()
    src.add_argument("--urls", help="text file, one URL a line")
    src.add_argument("--html-dir", help="directory of saved HTML pages")
    src.add_argument("--pages", help="Parquet pages/ of an earlier run")
    p.add_argument("--vocab-size", type=int)
    p.add_argument("--vector", choices=["binary", "count", "tfidf"])
    p.add_argument("--stopwords", choices=["none", "english"])
    p.add_argument("--min-df", type=int)
    p.add_argument("--selector", help='CSS selector of the text elements (default "p")')
    p.add_argument("--refresh", action="store_true", default=None,
                   help="fetch every URL again instead of reusing the output's pages/")
    return p


def overrides(a: argparse.Namespace) -> dict:
    return {"job": {"source": {"urls": a.urls, "html_dir": a.html_dir, "pages": a.pages},
                    "output": a.output, "sample": a.sample, "vocab_size": a.vocab_size,
                    "vector": a.vector, "stopwords": a.stopwords, "min_df": a.min_df,
                    "selector": a.selector, "refresh": a.refresh}}


def describe(result: BagOfWordsResult) -> str:
    rep = result.report
    lines = [f"{rep.outputs.get('pages', 0):,} pages, {rep.outputs.get('sentences', 0):,} "
             f"sentences, vocabulary of {len(result.vocabulary)}; "
             f"{rep.total_rejects:,} rejected"]
    lines.append(result.vocabulary.head(10).to_string(index=False))
    if result.output:
        lines.append(f"outputs: {result.output}/")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return cli.main("bag_of_words", parser(), overrides, run, describe, argv)


if __name__ == "__main__":
    sys.exit(main())
