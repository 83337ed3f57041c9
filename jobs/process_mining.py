"""Process-mining views (directly-follows graph, variants, cases, process map) of an existing
event log: XES (.xes, .xes.gz), CSV or Parquet."""

from __future__ import annotations

import argparse
import sys

from sparkfield.core import cli
from sparkfield.process import ProcessResult, run_process_mining


def parser() -> argparse.ArgumentParser:
    p = cli.base_parser("process_mining", __doc__.splitlines()[0])
    p.add_argument("--log", help="event log: .xes, .xes.gz, .csv or a Parquet directory")
    p.add_argument("--case-col")
    p.add_argument("--activity-col")
    p.add_argument("--timestamp-col")
    p.add_argument("--classifier", choices=["name", "name+lifecycle"])
    p.add_argument("--top-k-arcs", type=int, help="arcs kept on the process map")
    return p


def overrides(a: argparse.Namespace) -> dict:
    return {"job": {"log": a.log, "output": a.output, "sample": a.sample,
                    "classifier": a.classifier, "top_k_arcs": a.top_k_arcs,
                    "columns": {"case": a.case_col, "activity": a.activity_col,
                                "timestamp": a.timestamp_col}}}


def describe(result: ProcessResult) -> str:
    rep = result.report
    lines = [f"{rep.outputs.get('events', 0):,} events in {rep.counts.get('cases', 0):,} cases, "
             f"{rep.counts.get('variants', 0):,} variants, {result.rejects:,} rejected rows"]
    if result.output:
        lines.append(f"outputs: {result.output}/")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return cli.main("process_mining", parser(), overrides, run_process_mining, describe, argv)


if __name__ == "__main__":
    sys.exit(main())
