"""Best coffee-shop spots near Vancouver rapid-transit stations: no competitor nearby, little
crime. `./submit.sh coffee_shops --help` lists the flags; defaults come from
conf/jobs/coffee_shops.yaml and the bundled data."""

from __future__ import annotations

import argparse
import sys

from sparkfield.core import cli
from sparkfield.geo import CoffeeShopResult, run


def parser() -> argparse.ArgumentParser:
    p = cli.base_parser("coffee_shops", __doc__.splitlines()[0])
    p.add_argument("--crimes", help="crime CSV (police open-data schema, or Latitude/Longitude)")
    p.add_argument("--stations", help="stations CSV (station,longitude,latitude) or GeoJSON")
    p.add_argument("--competitors", help="Starbucks directory.csv or a lon/lat CSV")
    p.add_argument("--grid-step-m", type=float)
    p.add_argument("--search-radius-m", type=float)
    p.add_argument("--competitor-radius-m", type=float)
    p.add_argument("--exclude-m", type=cli.key_values,
                   help="theft=M,break_and_enter=M,mischief=M")
    p.add_argument("--top", type=int)
    p.add_argument("--refine", type=lambda s: [float(v) for v in s.split(",") if v],
                   help="finer steps after --grid-step-m around the best cells, e.g. 10,1")
    return p


def overrides(a: argparse.Namespace) -> dict:
    return {"job": {
        "inputs": {"crimes": a.crimes, "stations": a.stations, "competitors": a.competitors},
        "output": a.output,
        "sample": a.sample,
        "search": {"grid_step_m": a.grid_step_m, "search_radius_m": a.search_radius_m,
                   "competitor_radius_m": a.competitor_radius_m, "exclude_m": a.exclude_m,
                   "top": a.top, "refine": a.refine},
    }}


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
    return cli.main("coffee_shops", parser(), overrides, run, describe, argv)


if __name__ == "__main__":
    sys.exit(main())
