"""Transformer inference over a table's texts, on CPU or GPU.

Any local Hugging Face model folder: classify texts, tag entities, zero-shot labels, answer
questions, translate or summarise. Every flag overrides one key of conf/jobs/infer.yaml (see
docs/jobs/infer.md)."""

from __future__ import annotations

import argparse
import sys

from sparkfield.core import cli
from sparkfield.nlp import InferResult, run_infer
from sparkfield.nlp.params import INFER


def parser() -> argparse.ArgumentParser:
    return cli.base_parser("infer", cli.doc_summary(__doc__), INFER)


def describe(result: InferResult) -> str:
    rep = result.report
    reasons = ", ".join(f"{r} {n:,}" for r, n in sorted(rep.rejects.get("rows", {}).items()))
    task = rep.params.get("task")
    lines = [f"{task}: {rep.outputs.get('results', 0):,} results of {rep.inputs.get('rows', 0):,}"
             f" rows ({rep.counts.get('truncated', 0)} truncated, {rep.total_rejects:,} "
             f"rejected{': ' + reasons if reasons else ''})"]
    split = rep.counts.get("infer_task_seconds")
    if split and sum(split.values()) > 0:
        total = sum(split.values())
        lines.append("model time, task seconds: " + ", ".join(
            f"{part} {seconds:.2f} ({seconds / total:.0%})" for part, seconds in split.items()))
    if result.output:
        lines.append(f"outputs: {result.output}/")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return cli.main("infer", parser(), None, run_infer, describe, argv)


if __name__ == "__main__":
    sys.exit(main())
