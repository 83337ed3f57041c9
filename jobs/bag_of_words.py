"""Bag-of-words of a scraped corpus.

Fetch politely (or read saved pages), parse, split sentences, build a top-N vocabulary and
binary / count / TF-IDF vectors. Every flag overrides one key of conf/jobs/bag_of_words.yaml
(see docs/jobs/bag_of_words.md)."""

from __future__ import annotations

import argparse
import sys

from sparkfield.core import cli
from sparkfield.text import BagOfWordsResult, run
from sparkfield.text.params import BAG_OF_WORDS


def parser() -> argparse.ArgumentParser:
    return cli.base_parser("bag_of_words", cli.doc_summary(__doc__), BAG_OF_WORDS)


def overrides(a: argparse.Namespace) -> dict:
    over = BAG_OF_WORDS.overrides(a)
    job = over["job"]
    if "selector" in job:  # --selector alone implies --extract selector
        if job.get("extract") == "main":
            raise ValueError("--selector applies to --extract selector, not --extract main")
        job["extract"] = "selector"
    return over


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
