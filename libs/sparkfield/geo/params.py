"""The coffee_shops job's parameters: conf keys, flags and the table in
docs/jobs/coffee_shops.md come from here."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from sparkfield.core.csv_utf8 import ENCODINGS
from sparkfield.core.errors import ConfigError
from sparkfield.core.params import JobSchema, Param

COFFEE_SHOPS = JobSchema("coffee_shops", [
    Param("inputs.crimes", "str", None, "crime CSV (police open-data schema, or "
          "Latitude/Longitude); null: the bundled 2016 Vancouver crimes", flag="--crimes"),
    Param("inputs.stations", "str", None, "stations CSV (station,longitude,latitude) or "
          "GeoJSON points; null: the bundled 22 rapid-transit stations", flag="--stations"),
    Param("inputs.competitors", "str", None, "Starbucks directory.csv or a lon/lat CSV; null: "
          "the bundled Vancouver Starbucks", flag="--competitors"),
    Param("inputs.csv_multiline", "bool", True, "CSV inputs may hold quoted line breaks "
          "inside a field (read as spreadsheets read them); false lets Spark split a large "
          "crimes file known to have none", flag="--csv-multiline"),
    Param("inputs.csv_encoding", "str", "utf-8", "the CSV inputs' encoding; a row with bytes "
          "that are not UTF-8 read as UTF-8 is a malformed row", flag="--csv-encoding",
          choices=ENCODINGS),
    Param("search.grid_step_m", "float", 10.0, "lattice spacing in metres",
          flag="--grid-step-m", gt=0),
    Param("search.search_radius_m", "float", 1000.0, "search radius around each station",
          flag="--search-radius-m", gt=0),
    Param("search.competitor_radius_m", "float", 500.0, "a station with a competitor this "
          "close is not eligible", flag="--competitor-radius-m", ge=0),
    Param("search.exclude_m", "dict[str,float]",
          {"theft": 50.0, "break_and_enter": 100.0, "mischief": 100.0},
          "exclusion radius per crime category (every category needs one)",
          flag="--exclude-m", ge=0),
    Param("search.top", "int", 10, "locations ranked and written", flag="--top", gt=0),
    Param("search.min_separation_m", "float", 100.0, "distinct sites: in rank order, a "
          "location is kept when at least this far from every one kept before it; 0 ranks "
          "every lattice cell", flag="--min-separation-m", ge=0),
    Param("search.count_radius_m", "float", 250.0, "crime counts reported around each top "
          "location", ge=0),
    Param("search.tile_cells", "int", 256, "lattice cells per tile side", gt=0),
    Param("search.tile_partitions", "int", None, "partitions of the tile search; null: 4 x "
          "default parallelism", gt=0),
    Param("search.refine", "list[float]", [], "finer steps after grid_step_m around the best "
          "cells, e.g. 10,1 (each smaller than the one before)", flag="--refine", gt=0),
    Param("search.refine_keep", "int", 50, "best cells kept per refinement level (and, "
          "when min_separation_m > 0, the best max(refine_keep, top) distinct sites)", gt=0),
    Param("search.max_lattice_points", "int", 100_000_000, "a larger search lattice is refused "
          "(exit 2) before it starts", gt=0),
    Param("categories", "dict[str,list[str]]",
          {"theft": ["Theft from Vehicle", "Other Theft", "Theft of Vehicle",
                     "Theft of Bicycle"],
           "break_and_enter": ["Break and Enter Commercial",
                               "Break and Enter Residential/Other"],
           "mischief": ["Mischief"]},
          "police crime types grouped into the categories that exclude_m names"),
    Param("ignored_types", "list[str]",
          ["Vehicle Collision or Pedestrian Struck (with Injury)",
           "Vehicle Collision or Pedestrian Struck (with Fatality)",
           "Offence Against a Person", "Homicide"],
          "known police types outside the categories: ignored and counted, not rejected"),
    Param("competitor_filter", "dict[str,str]",
          {"City": "Vancouver", "State/Province": "BC", "Country": "CA"},
          "column = value filters applied to the competitors file"),
    Param("study_area.xmin", "float", 480000.0, "study area in EPSG:26910 metres; points "
          "outside are rejected"),
    Param("study_area.ymin", "float", 5445000.0, "study area, south edge"),
    Param("study_area.xmax", "float", 502000.0, "study area, east edge"),
    Param("study_area.ymax", "float", 5466000.0, "study area, north edge"),
], output="out/coffee_shops")

CoffeeShopsParams = COFFEE_SHOPS.params_type()
"""The typed job section :meth:`JobSchema.parse` builds (``p.search.grid_step_m``)."""
CoffeeShopsSearchParams = COFFEE_SHOPS.params_type("search")
"""Its ``search`` section (``p.search``): the keyword arguments of ``best_locations``."""
SEARCH_DEFAULTS: dict[str, Any] = COFFEE_SHOPS.defaults()["search"]
"""The schema's default of every ``search`` key, by its name in the section."""


def parse(job: dict[str, Any] | None) -> CoffeeShopsParams:
    """The job section parsed by :data:`COFFEE_SHOPS`, then checked for what no single key says:
    ``exclude_m`` gives a radius to every category and no other, and the refinement steps
    shrink from ``grid_step_m`` on. :class:`ConfigError` names every problem."""
    p = COFFEE_SHOPS.parse(job)
    problems = [*_exclusion_problems(p), *_refine_problems(p)]
    if problems:
        raise ConfigError("; ".join(problems))
    return p


def parse_search(values: dict[str, Any]) -> CoffeeShopsSearchParams:
    """The ``search`` section alone (the library's keyword arguments), checked as :func:`parse`
    checks it: bounds from the schema, refinement steps that shrink."""
    p = COFFEE_SHOPS.parse({"search": values})
    problems = _refine_problems(p)
    if problems:
        raise ConfigError("; ".join(problems))
    return p.search


def _exclusion_problems(p: CoffeeShopsParams) -> list[str]:
    radii, categories = set(p.search.exclude_m), set(p.categories)
    problems = []
    if radii - categories:
        problems.append(f"exclude_m names unknown categories: {sorted(radii - categories)}")
    if categories - radii:
        problems.append(f"exclude_m has no radius for: {sorted(categories - radii)}")
    return problems


def _refine_problems(p: CoffeeShopsParams) -> list[str]:
    steps = [p.search.grid_step_m, *p.search.refine]  # each > 0 by the schema
    if any(finer >= coarser for coarser, finer in pairwise(steps)):
        return ["refine steps must decrease: each smaller than the one before, the first "
                "smaller than grid_step_m"]
    return []
