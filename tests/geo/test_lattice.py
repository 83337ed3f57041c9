import numpy as np
import pandas as pd
import pytest

from sparkfield.core.practices import balance
from sparkfield.geo.lattice import Lattice, plan_tiles, tile_candidates

from .oracle import brute_force


def _kernel_all(stations, crimes, step, radius, exclude_m, tile_cells):
    lat = Lattice(step, tile_cells)
    sx, sy = stations["x"].to_numpy(), stations["y"].to_numpy()
    r = crimes["category"].map(exclude_m).to_numpy(dtype=float)
    out = []
    for ti, tj in plan_tiles(lat, np.column_stack([sx, sy]), radius):
        res = tile_candidates(ti, tj, lat, sx, sy, radius, crimes["x"].to_numpy(),
                              crimes["y"].to_numpy(), r)
        out.append(pd.DataFrame({"x": res.x, "y": res.y, "station_id": res.station,
                                 "distance_m": res.distance}))
    return pd.concat(out).sort_values(["x", "y"]).reset_index(drop=True)


@pytest.mark.parametrize("step,tile_cells", [(10.0, 16), (7.0, 64), (2.5, 100)])
def test_kernel_equals_brute_force_with_points_exactly_on_radii(step, tile_cells):
    rng = np.random.default_rng(int(step * 10))
    stations = pd.DataFrame({"name": ["A", "B", "C"], "x": [1000.0, 1350.0, 1400.0],
                             "y": [2000.0, 2100.0, 1700.0]})
    n = 150
    crimes = pd.DataFrame({
        "x": rng.uniform(600, 1800, n), "y": rng.uniform(1500, 2500, n),
        "category": rng.choice(["theft", "mischief"], n),
    })
    # crimes placed so that lattice points lie exactly on their exclusion circle (3-4-5)
    on_grid = pd.DataFrame({"x": [1000.0 + 3 * step, 1100.0 + 0.5 * step],
                            "y": [2000.0 + 4 * step, 2050.0],
                            "category": ["mischief", "theft"]})
    crimes = pd.concat([crimes, on_grid], ignore_index=True)
    exclude = {"theft": 2.5 * step, "mischief": 5 * step}
    got = _kernel_all(stations, crimes, step, 300.0, exclude, tile_cells)
    want = brute_force(stations, crimes, step, 300.0, exclude).sort_values(["x", "y"])
    pd.testing.assert_frame_equal(got, want.reset_index(drop=True), check_dtype=False)
    assert len(got) > 50


def test_equal_distance_goes_to_the_first_station_in_order():
    stations = pd.DataFrame({"name": ["A", "B"], "x": [0.0, 20.0], "y": [0.0, 0.0]})
    crimes = pd.DataFrame({"x": [], "y": [], "category": []})
    got = _kernel_all(stations, crimes, 10.0, 10.0, {"theft": 1.0}, 8)
    mid = got[(got["x"] == 10.0) & (got["y"] == 0.0)]
    assert mid["station_id"].tolist() == [0]


def test_balance_packs_heavy_items_apart():
    costs = [100, 1, 1, 1, 90, 1, 1, 80]
    bins = balance(costs, 3)
    loads = [sum(c for c, b in zip(costs, bins, strict=True) if b == k) for k in range(3)]
    # heaviest first, each to the least loaded bin: 100 | 90 | 80 + the five 1s
    assert sorted(loads) == [85, 90, 100]
    assert max(loads) == max(costs)  # optimal here: no bin can carry less than the largest item
    assert len({bins[0], bins[4], bins[7]}) == 3
    # the rule, not the optimum: LPT gives 8 | 10 where 9 | 9 exists
    assert balance([5, 4, 3, 3, 3], 2) == [0, 1, 1, 0, 1]
