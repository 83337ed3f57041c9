"""Best coffee-shop spots near Vancouver rapid-transit stations.

No competitor nearby, little crime. Defaults come from conf/jobs/coffee_shops.yaml and the
bundled data; every flag overrides one conf key (see docs/jobs/coffee_shops.md)."""

from __future__ import annotations

import argparse
import sys

from sparkfield.core import cli
from sparkfield.geo import CoffeeShopResult, run
from sparkfield.geo.params import COFFEE_SHOPS


def parser() -> argparse.ArgumentParser:
    return cli.base_parser("coffee_shops", cli.doc_summary(__doc__), COFFEE_SHOPS)


def describe(result: CoffeeShopResult) -> str:
    lines = [f"{len(result.top)} top locations ({result.candidate_count} passing lattice points, "
             f"{int(result.stations['eligible'].sum())} eligible stations):"]
    if not result.top.empty:
        cols = ["rank", "station", "longitude", "latitude", "distance_to_station_m"]
        lines.append(result.top[cols].to_string(index=False))
    if result.output:
        lines.append(f"outputs: {result.output}/ (top_locations.csv, stations.csv, candidates/, "
                     "rejects/, map.png, map.html, run_report.json)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return cli.main("coffee_shops", parser(), None, run, describe, argv)


if __name__ == "__main__":
    sys.exit(main())
