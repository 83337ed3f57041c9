"""Sentence embeddings (all-MiniLM-L6-v2 by default, from a local folder) as a Spark stage on
CPU or GPU, with nearest neighbours, topics and attention maps."""

from __future__ import annotations

import argparse
import sys

from sparkfield.core import cli
from sparkfield.nlp import EmbedResult, run


def parser() -> argparse.ArgumentParser:
    p = cli.base_parser("embed", __doc__.splitlines()[0])
    p.add_argument("--input", help="Parquet (e.g. bag_of_words sentences/) or CSV")
    p.add_argument("--text-col")
    p.add_argument("--id-col")
    p.add_argument("--model", help="local model folder (default: the bundled MiniLM)")
    p.add_argument("--engine", choices=["torch", "sparknlp"])
    p.add_argument("--device", help="auto, cpu, cuda or cuda:N")
    p.add_argument("--batch-size", type=int)
    p.add_argument("--max-tokens", type=int)
    return p


def overrides(a: argparse.Namespace) -> dict:
    return {"job": {"input": a.input, "text_col": a.text_col, "id_col": a.id_col,
                    "output": a.output, "model": a.model, "engine": a.engine,
                    "device": a.device, "batch_size": a.batch_size, "max_tokens": a.max_tokens,
                    "sample": a.sample}}


def describe(result: EmbedResult) -> str:
    rep = result.report
    lines = [f"{rep.outputs.get('embeddings', 0):,} embeddings of {rep.inputs.get('texts', 0):,} "
             f"texts ({rep.counts.get('truncated', 0)} truncated, {rep.total_rejects} without "
             "text)"]
    if result.output:
        lines.append(f"outputs: {result.output}/")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return cli.main("embed", parser(), overrides, run, describe, argv)


if __name__ == "__main__":
    sys.exit(main())
