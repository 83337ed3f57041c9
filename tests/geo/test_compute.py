"""The coffee-shop search's pure step on a handful of inline rows: no files, no run report, no
output, every count checked against a count made by hand."""

from contextlib import ExitStack

import pandas as pd

from sparkfield.geo.inputs import (
    CrimeInput,
    PointInput,
    StudyArea,
    classify_crimes,
    find_crime_columns,
)
from sparkfield.geo.job import compute
from sparkfield.geo.params import COFFEE_SHOPS

POINT_COLS = ["name", "x", "y", "longitude", "latitude"]
REJECT_COLS = ["source", "reason", "record"]
CATEGORIES = {"theft": ["Other Theft", "Theft from Vehicle"]}


def _crime_input(spark) -> CrimeInput:
    """Crime rows as a CSV reader hands them over (text), classified by the library."""
    rows = [
        ("Other Theft", "1000", "1020"),  # 20 m north of station A
        ("Other Theft", "3000", "3000"),  # far from everything
        ("Theft from Vehicle", "5000", "5010"),  # beside station B
        ("Homicide", "1000", "1000"),  # a known type outside the categories
        (None, None, None),  # the null row: missing crime type
        ("Other Theft", "abc", "1000"),  # non-numeric coordinates
    ]
    raw = spark.createDataFrame(rows, "TYPE string, X string, Y string")
    classified = classify_crimes(raw, find_crime_columns(raw.columns, "inline"), CATEGORIES,
                                 ["Homicide"], StudyArea(0, 0, 10_000, 10_000))
    return CrimeInput.of(classified, "inline")


def _params():
    return COFFEE_SHOPS.parse({
        "search": {"grid_step_m": 10, "search_radius_m": 25, "competitor_radius_m": 500,
                   "exclude_m": {"theft": 15}, "top": 3, "min_separation_m": 0,
                   "count_radius_m": 25, "tile_cells": 4, "tile_partitions": 2},
        "categories": CATEGORIES, "ignored_types": ["Homicide"]})


def test_compute_counts_and_ranks_without_a_report(spark):
    stations = PointInput(
        points=pd.DataFrame([("A", 1000.0, 1000.0, -123.1, 49.2),
                             ("B", 5000.0, 5000.0, -123.0, 49.3)], columns=POINT_COLS),
        rejects=pd.DataFrame([("stations", "missing coordinates", "C,,")],
                             columns=REJECT_COLS))
    competitors = PointInput(
        points=pd.DataFrame([("cafe", 5100.0, 5000.0, -123.0, 49.3)], columns=POINT_COLS),
        rejects=pd.DataFrame(columns=REJECT_COLS), out_of_scope=2)

    with ExitStack() as stack:
        c = compute(spark, _params(), _crime_input(spark), stations, competitors, stack)
        candidates = c.candidates.select("x", "y").collect()
        n_rejects = c.rejects.count()

    s = c.stats
    assert s.inputs == {"crimes": 6, "stations": 3, "competitors": 1}
    assert s.counts["crimes_by_category"] == {"theft": 3}
    assert s.counts["crimes_ignored_by_type"] == {"Homicide": 1}
    assert s.counts["competitors_outside_city_filter"] == 2
    assert s.rejects == {"crimes": {"missing crime type": 1, "non-numeric coordinates": 1},
                         "stations": {"missing coordinates": 1}, "competitors": {}}
    assert n_rejects == 3
    # B has the cafe 100 m away; only A is searched
    assert s.counts["stations_eligible"] == 1
    assert c.stations.set_index("name")["eligible"].to_dict() == {"A": True, "B": False}
    # 10 m lattice points within 25 m of A: i^2 + j^2 <= 6 gives 21; the theft 20 m north
    # (15 m exclusion) removes (0,1), (0,2), (+-1,1), (+-1,2): 15 are left
    assert c.candidate_count == len(candidates) == 15
    assert s.outputs == {"candidates": 15, "top_locations": 3}
    assert [(r.x, r.y) for r in c.top.itertuples()] == [
        (1000.0, 1000.0), (990.0, 1000.0), (1000.0, 990.0)]
    assert c.top["theft_count"].tolist() == [1, 1, 0]  # the theft within 25 m of each
    assert [x["name"] for x in s.cached] == ["crimes", "search"]
    # the search's cache: the 15 candidates and a count row for each of the 4 tiles (4 x 4
    # cells of 10 m) around A; the counts add up to the 21 points in reach
    assert [x["rows"] for x in s.cached] == [3, 15 + 4]
    assert c.in_search_count == s.counts["lattice_points_in_search"] == 21
    assert {x["step"] for x in s.steps} == {"count_inputs", "stations", "search_search", "rank",
                                            "cache crimes", "cache search",
                                            "describe_top", "count_candidates", "density"}
