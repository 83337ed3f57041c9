"""Process-mining views of an existing event log.

The directly-follows graph, variants, cases and the process map of an XES (.xes, .xes.gz), CSV
or Parquet log. Every flag overrides one key of conf/jobs/process_mining.yaml; each --filter-*
flag appends a filter to its filters."""

from __future__ import annotations

import argparse
import sys

from sparkfield.core import cli
from sparkfield.process import ProcessResult, run_process_mining
from sparkfield.process.jobs.params import PROCESS_MINING


def parser() -> argparse.ArgumentParser:
    return cli.base_parser("process_mining", cli.doc_summary(__doc__), PROCESS_MINING)


def describe(result: ProcessResult) -> str:
    rep = result.report
    lines = [f"{rep.outputs.get('events', 0):,} events in {rep.counts.get('cases', 0):,} cases, "
             f"{rep.counts.get('variants', 0):,} variants, {result.rejects:,} rejected rows"]
    if result.output:
        lines.append(f"outputs: {result.output}/")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return cli.main("process_mining", parser(), None, run_process_mining, describe, argv)


if __name__ == "__main__":
    sys.exit(main())
