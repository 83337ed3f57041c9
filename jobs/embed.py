"""Sentence embeddings as a Spark stage on CPU or GPU.

all-MiniLM-L6-v2 by default, from a local folder, with nearest neighbours, topics and attention
maps. Every flag overrides one key of conf/jobs/embed.yaml (see docs/jobs/embed.md)."""

from __future__ import annotations

import argparse
import sys

from sparkfield.core import cli
from sparkfield.nlp import EmbedResult, run
from sparkfield.nlp.params import EMBED


def parser() -> argparse.ArgumentParser:
    return cli.base_parser("embed", cli.doc_summary(__doc__), EMBED)


def describe(result: EmbedResult) -> str:
    rep = result.report
    reasons = ", ".join(f"{r} {n:,}" for r, n in sorted(rep.rejects.get("texts", {}).items()))
    lines = [f"{rep.outputs.get('embeddings', 0):,} embeddings of {rep.inputs.get('texts', 0):,} "
             f"texts ({rep.counts.get('truncated', 0)} truncated, {rep.total_rejects:,} "
             f"rejected{': ' + reasons if reasons else ''})"]
    split = rep.counts.get("embed_task_seconds")
    if split and sum(split.values()) > 0:
        total = sum(split.values())
        lines.append("embedding time, task seconds: " + ", ".join(
            f"{part} {seconds:.2f} ({seconds / total:.0%})" for part, seconds in split.items()))
    if result.output:
        lines.append(f"outputs: {result.output}/")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return cli.main("embed", parser(), None, run, describe, argv)


if __name__ == "__main__":
    sys.exit(main())
