"""sparkfield.geo.best_locations(_pandas) and search_lattice on DataFrames: the coffee_shops
job's top list on the bundled data (classic Spark: the job does not run over Connect), and a
handful of inline rows against a brute force in numpy. Only the DataFrame API is used, so the
rest of this file also runs over Spark Connect."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sparkfield.core.conf import load_config
from sparkfield.core.errors import ColumnError, ConfigError
from sparkfield.geo import best_locations, best_locations_pandas, run, search_lattice
from sparkfield.geo.job import InputPaths, read_inputs
from sparkfield.geo.params import parse

# -- the bundled data, as the job reads it --------------------------------------------------


@pytest.fixture(scope="module")
def job_and_inputs(spark, repo_root):
    cfg = load_config("coffee_shops", "local", repo_root / "conf", {"job": {"output": None}})
    result = run(spark, cfg)
    p = parse(cfg.job)
    inputs = read_inputs(spark, p, InputPaths.of(p), cfg.practices.sample_seed)
    return result, inputs


def _greedy(frame: pd.DataFrame, n: int, m: float) -> pd.DataFrame:
    """The separation rule, written out: in rank order, keep a point at least m from every
    point kept before it."""
    ranked = frame.sort_values(["distance_m", "station", "x", "y"], kind="mergesort")
    kept: list[tuple[float, float]] = []
    rows = []
    for r in ranked.itertuples(index=False):
        if all((r.x - kx) ** 2 + (r.y - ky) ** 2 >= m * m for kx, ky in kept):
            kept.append((r.x, r.y))
            rows.append(r)
            if len(rows) == n:
                break
    return pd.DataFrame(rows, columns=ranked.columns)


@pytest.mark.classic
def test_best_locations_equals_the_jobs_top_list(spark, job_and_inputs):
    result, (crime_in, stations_in, competitors_in) = job_and_inputs
    # stations as a Spark table whose name column is "station"; competitors as pandas
    stations = spark.createDataFrame(stations_in.points.rename(columns={"name": "station"}))
    top = best_locations_pandas(crime_in.crimes, stations, competitors_in.points)
    pd.testing.assert_frame_equal(top, result.top)
    assert top["rank"].tolist() == list(range(1, 11))


@pytest.mark.classic
def test_the_top_ten_are_distinct_sites(job_and_inputs):
    result, _ = job_and_inputs
    xy = result.top[["x", "y"]].to_numpy()
    d = np.hypot(*(xy[:, None, :] - xy[None, :, :]).transpose(2, 0, 1))
    assert d[np.triu_indices(len(xy), 1)].min() >= 100.0
    # and exactly the greedy pass over every candidate the job found
    cands = result.candidates.toPandas()
    assert len(cands) == result.candidate_count
    want = _greedy(cands, 10, 100.0)
    assert list(zip(result.top["x"], result.top["y"], strict=True)) == list(
        zip(want["x"], want["y"], strict=True))


# -- inline rows against a brute force ------------------------------------------------------

CRIMES = [(30.0, 20.0, "theft"), (0.0, -40.0, "mischief"), (215.0, 0.0, "theft"),
          (10.0, 10.0, None),  # no category: skipped
          (None, 0.0, "theft"),  # the null row: skipped
          (float("nan"), 5.0, "mischief")]
STATIONS = [("A", 0.0, 0.0), ("B", 200.0, 30.0), ("C", 80.0, 0.0), ("D", 400.0, 400.0),
            (None, 50.0, 50.0), ("E", None, 0.0)]
COMPETITORS = [("cafe", 410.0, 395.0), ("kiosk", None, None)]
PARAMS = {"grid_step_m": 10.0, "search_radius_m": 60.0, "competitor_radius_m": 20.0,
          "exclude_m": {"theft": 15.0, "mischief": 25.0}, "count_radius_m": 40.0,
          "tile_cells": 4, "tile_partitions": 3}


@pytest.fixture(scope="module")
def inline(spark):
    crimes = spark.createDataFrame(CRIMES, "x double, y double, category string")
    stations = spark.createDataFrame(STATIONS, "name string, x double, y double")
    competitors = spark.createDataFrame(COMPETITORS, "name string, x double, y double")
    return crimes, stations, competitors


def _brute_candidates(stations: list[tuple], radius: float, step: float,
                      exclude: dict[str, float]) -> pd.DataFrame:
    """Every lattice point near a station, nearest station first in (name, x, y) order, and
    clear of every crime's disk: all pairs, as the docs state the rule."""
    st = sorted(s for s in stations if None not in s)
    sx, sy = np.array([s[1] for s in st]), np.array([s[2] for s in st])
    k = np.arange(np.floor((sx.min() - radius) / step), np.ceil((sx.max() + radius) / step) + 1)
    j = np.arange(np.floor((sy.min() - radius) / step), np.ceil((sy.max() + radius) / step) + 1)
    px, py = (a.ravel() for a in np.meshgrid(k * step, j * step))
    d2 = (px[:, None] - sx[None, :]) ** 2 + (py[:, None] - sy[None, :]) ** 2
    near = d2.argmin(axis=1)  # the first of equals: tie-break order
    best = d2[np.arange(len(px)), near]
    ok = best <= radius * radius
    for cx, cy, cat in CRIMES:
        if cat is not None and cx is not None and not np.isnan(cx):
            ok &= (px - cx) ** 2 + (py - cy) ** 2 > exclude[cat] ** 2
    return pd.DataFrame({"x": px[ok], "y": py[ok], "station": [st[i][0] for i in near[ok]],
                         "distance_m": np.sqrt(best[ok])})


def _eligible() -> list[tuple]:
    r2 = PARAMS["competitor_radius_m"] ** 2
    shops = [c for c in COMPETITORS if None not in c]
    return [s for s in STATIONS if None not in s
            and all((s[1] - c[1]) ** 2 + (s[2] - c[2]) ** 2 > r2 for c in shops)]


def test_search_lattice_equals_a_brute_force(inline):
    crimes, stations, _ = inline
    keys = ["grid_step_m", "search_radius_m", "exclude_m", "tile_cells", "tile_partitions"]
    got = search_lattice(crimes, stations, **{k: PARAMS[k] for k in keys}).toPandas()
    want = _brute_candidates(STATIONS, 60.0, 10.0, PARAMS["exclude_m"])
    got = got.sort_values(["x", "y"]).reset_index(drop=True)
    want = want.sort_values(["x", "y"]).reset_index(drop=True)
    assert len(want) > 50
    pd.testing.assert_frame_equal(got[["x", "y", "station", "distance_m"]], want,
                                  check_dtype=False)


@pytest.mark.parametrize("separation", [0.0, 30.0])
def test_best_locations_equals_a_brute_force(inline, separation):
    crimes, stations, competitors = inline
    top = best_locations_pandas(crimes, stations, competitors, top=6, min_separation_m=separation,
                         **PARAMS)
    # D has the cafe 11 m away: not eligible, its disk is not searched
    cands = _brute_candidates(_eligible(), 60.0, 10.0, PARAMS["exclude_m"])
    want = _greedy(cands, 6, separation).reset_index(drop=True)
    assert top["rank"].tolist() == list(range(1, 7))
    assert top["station"].tolist() == want["station"].tolist()
    assert top[["x", "y"]].to_numpy().tolist() == want[["x", "y"]].to_numpy().tolist()
    np.testing.assert_allclose(top["distance_to_station_m"], want["distance_m"], atol=1e-9)
    xy = top[["x", "y"]].to_numpy()
    gaps = np.hypot(*(xy[:, None, :] - xy[None, :, :]).transpose(2, 0, 1))[np.triu_indices(6, 1)]
    # apart when asked; neighbouring 10 m cells (the plain order) otherwise
    assert gaps.min() >= 30.0 if separation else gaps.min() == 10.0
    # crimes with a category and a position within count_radius_m of each site
    usable = [c for c in CRIMES if c[2] is not None and c[0] is not None and not np.isnan(c[0])]
    for cat in ("theft", "mischief"):
        counts = [sum((x - cx) ** 2 + (y - cy) ** 2 <= 40.0 ** 2
                      for cx, cy, c in usable if c == cat)
                  for x, y in zip(top["x"], top["y"], strict=True)]
        assert top[f"{cat}_count"].tolist() == counts
    assert list(top.columns) == [
        "rank", "station", "x", "y", "longitude", "latitude", "distance_to_station_m",
        "theft_count", "mischief_count", "count_radius_m"]


def test_refined_sites_are_apart_and_on_the_finer_lattice(inline):
    crimes, stations, competitors = inline
    top = best_locations_pandas(crimes, stations, competitors, top=4, min_separation_m=30,
                         refine=[5.0], refine_keep=4, crs=None, **PARAMS)
    assert len(top) == 4 and "longitude" not in top.columns
    xy = top[["x", "y"]].to_numpy()
    assert ((xy / 5.0) == np.round(xy / 5.0)).all()
    gaps = np.hypot(*(xy[:, None, :] - xy[None, :, :]).transpose(2, 0, 1))
    assert gaps[np.triu_indices(4, 1)].min() >= 30.0
    assert top["distance_to_station_m"].is_monotonic_increasing


def test_no_eligible_station_gives_an_empty_ranking(inline):
    crimes, stations, _ = inline
    everywhere = pd.DataFrame({"x": [0.0, 200.0, 80.0, 400.0], "y": [0.0, 30.0, 0.0, 400.0]})
    top = best_locations_pandas(crimes, stations, everywhere, **PARAMS)
    assert top.empty and "rank" in top.columns


def test_bad_parameters_and_columns_are_named(inline):
    crimes, stations, competitors = inline
    with pytest.raises(ConfigError, match="search.grid_step_m must be > 0"):
        best_locations_pandas(crimes, stations, competitors, grid_step_m=0)
    with pytest.raises(ConfigError, match="search.min_separation_m must be >= 0"):
        best_locations_pandas(crimes, stations, competitors, min_separation_m=-1)
    with pytest.raises(ColumnError, match="crimes: no column 'category'"):
        best_locations_pandas(crimes.drop("category"), stations, competitors)
    with pytest.raises(ColumnError, match="stations: no column 'name' or 'station'"):
        best_locations_pandas(crimes, stations.drop("name"), competitors)
    with pytest.raises(ColumnError, match="stations: no column 'where'"):
        best_locations(crimes, stations, competitors, name_col="where")


def test_the_spark_ranking_is_the_pandas_one_and_columns_can_be_named(inline):
    crimes, stations, competitors = inline
    top = best_locations_pandas(crimes, stations, competitors, top=4, **PARAMS)
    renamed = crimes.withColumnRenamed("x", "Easting").withColumnRenamed("category", "kind")
    spark_top = best_locations(renamed, stations.withColumnRenamed("x", "Easting"),
                               competitors.withColumnRenamed("x", "easting"), top=4,
                               x_col="easting", category_col="KIND", **PARAMS)
    assert [f.dataType.simpleString() for f in spark_top.schema.fields][:4] == [
        "int", "string", "double", "double"]
    pd.testing.assert_frame_equal(spark_top.toPandas(), top, check_dtype=False)
