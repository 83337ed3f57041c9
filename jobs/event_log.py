"""Extract an event log from source tables (CSV, Parquet, JSON, JDBC) as a mapping file says,
then its process-mining views, XES/CSV export and process map."""

from __future__ import annotations

import argparse
import sys

from sparkfield.core import cli
from sparkfield.process import ProcessResult, run_event_log


def parser() -> argparse.ArgumentParser:
    p = cli.base_parser("event_log", __doc__.splitlines()[0])
    p.add_argument("--mapping", help="mapping YAML (see conf/event_logs/)")
    p.add_argument("--classifier", choices=["name", "name+lifecycle"])
    p.add_argument("--top-k-arcs", type=int, help="arcs kept on the process map")
    return p


def overrides(a: argparse.Namespace) -> dict:
    return {"job": {"mapping": a.mapping, "output": a.output, "sample": a.sample,
                    "classifier": a.classifier, "top_k_arcs": a.top_k_arcs}}


def describe(result: ProcessResult) -> str:
    rep = result.report
    lines = [f"{rep.outputs.get('events', 0):,} events in {rep.counts.get('cases', 0):,} cases, "
             f"{rep.counts.get('variants', 0):,} variants, {result.rejects:,} rejected rows"]
    top = result.views["dfg"].head(5)
    if len(top):
        lines.append("most frequent directly-follows arcs:")
        lines.append(top[["source", "target", "frequency", "median_s"]].to_string(index=False))
    if result.output:
        lines.append(f"outputs: {result.output}/")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return cli.main("event_log", parser(), overrides, run_event_log, describe, argv)


if __name__ == "__main__":
    sys.exit(main())
