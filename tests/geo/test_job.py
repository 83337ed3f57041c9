"""The coffee-shop job end to end through the library, on the real 2016 data bundled with the
package (crimes, the 22 stations, the 110 Vancouver Starbucks)."""

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.spatial import cKDTree

from sparkfield.core.conf import load_config
from sparkfield.core.errors import ConfigError
from sparkfield.geo import maps, run
from sparkfield.geo.inputs import bundled, bundled_text

# conf/jobs/coffee_shops.yaml: police types and exclusion radius of each category
CATS = {"theft": (["Theft from Vehicle", "Other Theft", "Theft of Vehicle", "Theft of Bicycle"],
                  50.0),
        "break_and_enter": (["Break and Enter Commercial", "Break and Enter Residential/Other"],
                            100.0),
        "mischief": (["Mischief"], 100.0)}


def _cfg(repo_root: Path, job: dict):
    return load_config("coffee_shops", "local", repo_root / "conf", {"job": job})


@pytest.fixture(scope="module")
def full_run(spark, repo_root, tmp_path_factory):
    out = tmp_path_factory.mktemp("coffee") / "out"
    return run(spark, _cfg(repo_root, {"output": str(out)})), out


@pytest.mark.slow
def test_outputs_are_complete(full_run):
    result, out = full_run
    names = sorted(p.name for p in out.iterdir())
    assert names == ["_SUCCESS", "candidates", "map.html", "map.png", "rejects", "run_report.json",
                     "stations.csv", "top_locations.csv"]
    assert not list(out.parent.glob("*__staging*"))
    top = pd.read_csv(out / "top_locations.csv")
    assert list(top.columns) == ["rank", "station", "x", "y", "longitude", "latitude",
                                 "distance_to_station_m", "theft_count",
                                 "break_and_enter_count", "mischief_count", "count_radius_m"]
    assert top["rank"].tolist() == list(range(1, 11))
    key = list(zip(top["distance_to_station_m"], top["station"], top["x"], top["y"], strict=True))
    assert key == sorted(key)
    assert (out / "map.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = (out / "map.html").read_text()
    assert html.count('class="top-location"') == 10 and "http" not in html.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")


@pytest.mark.slow
def test_candidates_equal_a_kd_tree_oracle(spark, full_run):
    """Independent check of every passing point at 10 m, all eligible stations, 2016 crimes."""
    result, out = full_run
    cands = pd.read_parquet(out / "candidates").sort_values(["x", "y"]).reset_index(drop=True)
    assert len(cands) == result.candidate_count > 1000
    crimes = pd.read_csv(io.StringIO(bundled_text(bundled("vancouver_crime_2016.csv.gz"))))
    st = result.stations[result.stations["eligible"]].reset_index(drop=True)
    xs = np.arange(np.floor((st.x.min() - 1000) / 10), np.ceil((st.x.max() + 1000) / 10) + 1) * 10
    ys = np.arange(np.floor((st.y.min() - 1000) / 10), np.ceil((st.y.max() + 1000) / 10) + 1) * 10
    gx, gy = (a.ravel() for a in np.meshgrid(xs, ys))
    pts = np.column_stack([gx, gy])
    d, k = cKDTree(st[["x", "y"]].to_numpy()).query(pts)
    keep = d <= 1000
    pts, d, k = pts[keep], d[keep], k[keep]
    ok = np.ones(len(pts), dtype=bool)
    for types, r in CATS.values():
        c = crimes[crimes["TYPE"].isin(types)][["X", "Y"]].to_numpy()
        near = cKDTree(c).query_ball_point(pts, r, return_length=True)
        ok &= near == 0
    want = pd.DataFrame({"x": pts[ok, 0], "y": pts[ok, 1], "distance_m": d[ok]})
    want = want.sort_values(["x", "y"]).reset_index(drop=True)
    assert len(want) == len(cands)
    np.testing.assert_array_equal(cands[["x", "y"]].to_numpy(), want[["x", "y"]].to_numpy())
    np.testing.assert_allclose(cands["distance_m"], want["distance_m"], rtol=0, atol=1e-6)
    assert result.in_search_count == int(keep.sum())


@pytest.mark.slow
def test_top_location_counts_equal_a_brute_force_count(full_run):
    """Every ``*_count`` of top_locations.csv against all crime-location pairs in numpy."""
    _, out = full_run
    top = pd.read_csv(out / "top_locations.csv")
    crimes = pd.read_csv(io.StringIO(bundled_text(bundled("vancouver_crime_2016.csv.gz"))))
    radius = float(top["count_radius_m"].iloc[0])
    assert radius == 250.0
    total = 0
    for cat, (types, _) in CATS.items():
        c = crimes[crimes["TYPE"].isin(types) & (crimes["X"] > 0)][["X", "Y"]].to_numpy()
        dx = top["x"].to_numpy()[:, None] - c[None, :, 0]
        dy = top["y"].to_numpy()[:, None] - c[None, :, 1]
        want = (dx * dx + dy * dy <= radius * radius).sum(axis=1)
        np.testing.assert_array_equal(top[f"{cat}_count"].to_numpy(), want, err_msg=cat)
        total += int(want.sum())
    assert total > 0  # the comparison is not between two columns of zeros


@pytest.mark.slow
def test_run_report_accounts_for_every_row(full_run):
    result, out = full_run
    rep = json.loads((out / "run_report.json").read_text())
    assert rep["status"] == "ok"
    crimes_used = sum(rep["counts"]["crimes_by_category"].values())
    ignored = sum(rep["counts"]["crimes_ignored_by_type"].values())
    rejected = sum(rep["rejects"].get("crimes", {}).values())
    assert rep["inputs"]["crimes"] == 34622 == crimes_used + ignored + rejected
    assert rep["counts"]["crimes_ignored_by_type"] == {
        "Vehicle Collision or Pedestrian Struck (with Injury)": 1699,
        "Vehicle Collision or Pedestrian Struck (with Fatality)": 15}
    rejects = pd.read_parquet(out / "rejects")
    assert len(rejects) == rep["total_rejects"]
    assert rep["counts"]["competitors_outside_city_filter"] == 0  # the bundled file is the city
    assert {s["step"] for s in rep["steps"]} >= {"read_inputs", "search_search", "rank"}
    assert rep["skew"]["search.partition_cost_balanced"]["ratio"] <= \
        rep["skew"]["search.partition_cost_unbalanced"]["ratio"]
    assert [c["name"] for c in rep["cached"]] == ["crime_rows", "crimes", "search"]
    stations = pd.read_csv(out / "stations.csv")
    assert len(stations) == 22 and stations["eligible"].sum() == rep["counts"]["stations_eligible"]
    far = stations[stations["eligible"]]["nearest_competitor_m"]
    assert (far > 500).all()


def test_no_eligible_station_gives_empty_outputs(spark, repo_root, tmp_path):
    out = tmp_path / "none"
    result = run(spark, _cfg(repo_root, {"output": str(out),
                                         "search": {"competitor_radius_m": 50000}}))
    assert result.top.empty and result.candidate_count == 0
    assert pd.read_csv(out / "top_locations.csv").empty
    assert pd.read_parquet(out / "candidates").empty
    rep = json.loads((out / "run_report.json").read_text())
    assert rep["status"] == "ok" and "no eligible station" in rep["notes"][0]


def test_failed_run_leaves_the_previous_output(spark, repo_root, tmp_path, monkeypatch):
    out = tmp_path / "keep"
    cfg = _cfg(repo_root, {"output": str(out), "search": {"grid_step_m": 50}})
    first = run(spark, cfg)
    before = (out / "top_locations.csv").read_text()

    def broken(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(maps, "map_png", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        run(spark, _cfg(repo_root, {"output": str(out), "search": {"grid_step_m": 25}}))
    assert (out / "top_locations.csv").read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep"]
    assert len(first.top) == 10


def test_sample_reads_a_seeded_fraction(spark, repo_root):
    a = run(spark, _cfg(repo_root, {"output": None, "sample": 0.1,
                                    "search": {"grid_step_m": 50}}))
    b = run(spark, _cfg(repo_root, {"output": None, "sample": 0.1,
                                    "search": {"grid_step_m": 50}}))
    assert 3000 < a.report.inputs["crimes"] < 3900
    assert a.report.inputs["crimes"] == b.report.inputs["crimes"]
    assert a.top.equals(b.top)


def test_refinement_searches_finer_around_the_best_coarse_cells(spark, repo_root):
    coarse = run(spark, _cfg(repo_root, {"output": None, "search": {"grid_step_m": 20}}))
    fine = run(spark, _cfg(repo_root, {"output": None, "search": {
        "grid_step_m": 20, "refine": [5, 1], "refine_keep": 5}}))
    assert fine.top["distance_to_station_m"].iloc[0] <= coarse.top["distance_to_station_m"].iloc[0]
    counts = fine.report.counts
    assert counts["level0_step20m.candidates"] == coarse.candidate_count
    assert "level1_step5m.candidates" in counts
    # the final level searched the 1 m lattice: whole metres, and not all on the 5 m lattice
    xy = fine.top[["x", "y"]].to_numpy()
    assert (xy % 1 == 0).all() and len(fine.top) == 10
    assert (xy % 5 != 0).any(), xy


def test_bad_parameters_are_reported_by_name(spark, repo_root):
    with pytest.raises(ConfigError, match="exclude_m names unknown categories: \\['arson'\\]"):
        run(spark, _cfg(repo_root, {"search": {"exclude_m": {"arson": 10}}}))
    with pytest.raises(ConfigError, match="grid_step_m must be > 0"):
        run(spark, _cfg(repo_root, {"search": {"grid_step_m": 0}}))
