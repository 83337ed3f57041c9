"""Extract an event log from source tables as a mapping file says.

Sources are CSV, Parquet, JSON or JDBC tables; then come the log's process-mining views, the
XES/CSV export and the process map. Every flag overrides one key of conf/jobs/event_log.yaml;
each --filter-* flag appends a filter to its filters."""

from __future__ import annotations

import argparse
import sys

from sparkfield.core import cli
from sparkfield.process import ProcessResult, run_event_log
from sparkfield.process.jobs.params import EVENT_LOG


def parser() -> argparse.ArgumentParser:
    return cli.base_parser("event_log", cli.doc_summary(__doc__), EVENT_LOG)


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
    return cli.main("event_log", parser(), None, run_event_log, describe, argv)


if __name__ == "__main__":
    sys.exit(main())
