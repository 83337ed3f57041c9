"""The Spark search against the all-pairs brute force on the real 2016 crimes bundled with the
package (the same file as in the shared data set)."""

import pandas as pd
import pytest

from sparkfield.geo.inputs import StudyArea, bundled, read_crimes, read_stations
from sparkfield.geo.search import evaluate_stations, search_with_stats

from .oracle import brute_force

CATS = {
    "theft": ["Theft from Vehicle", "Other Theft", "Theft of Vehicle", "Theft of Bicycle"],
    "break_and_enter": ["Break and Enter Commercial", "Break and Enter Residential/Other"],
    "mischief": ["Mischief"],
}
AREA = StudyArea(480000, 5445000, 502000, 5466000)


@pytest.fixture(scope="module")
def real(spark):
    crimes = read_crimes(spark, bundled("vancouver_crime_2016.csv.gz"), CATS, [
        "Vehicle Collision or Pedestrian Struck (with Injury)",
        "Vehicle Collision or Pedestrian Struck (with Fatality)"], AREA).crimes.cache()
    stations = read_stations(spark, bundled("rapid_transit_stations.csv"), AREA).points
    yield crimes, stations
    crimes.unpersist()


@pytest.mark.parametrize(
    "names,step,radius,exclude",
    [
        # two stations whose search disks overlap: nearest-station assignment matters
        (["Nanaimo", "29th Avenue", "Joyce - Collingwood"], 20.0, 600.0,
         {"theft": 50.0, "break_and_enter": 100.0, "mischief": 100.0}),
        # downtown, where crime is densest; small radii so some points pass
        (["Waterfront", "Granville"], 5.0, 250.0,
         {"theft": 5.0, "break_and_enter": 10.0, "mischief": 10.0}),
    ],
)
def test_spark_search_equals_brute_force(spark, real, names, step, radius, exclude):
    crimes, stations = real
    chosen = evaluate_stations(stations[stations["name"].isin(names)], pd.DataFrame(
        columns=["name", "x", "y"]), 0.0).reset_index(drop=True)
    found, stats = search_with_stats(spark, crimes, chosen, radius, exclude, step, tile_cells=32,
                                     partitions=5)
    got = found.toPandas().sort_values(["x", "y"]).reset_index(drop=True)
    want = brute_force(chosen, crimes.toPandas(), step, radius, exclude)
    want = want.sort_values(["x", "y"]).reset_index(drop=True)
    assert len(got) > 100
    pd.testing.assert_frame_equal(got, want, check_dtype=False)
    bal = stats.skew["partition_cost_balanced"]["ratio"]
    unbal = stats.skew["partition_cost_unbalanced"]["ratio"]
    assert bal <= unbal
