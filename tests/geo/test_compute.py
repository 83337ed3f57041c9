"""The coffee-shop search's pure step on a handful of inline rows: no files, no run report, no
output, every count checked against a count made by hand."""

from contextlib import ExitStack

import pandas as pd
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.geo.inputs import CrimeInput, PointInput
from sparkfield.geo.job import CoffeeShopParams, compute

CLASSIFIED = T.StructType([
    T.StructField("__x", T.DoubleType(), True),
    T.StructField("__y", T.DoubleType(), True),
    T.StructField("__cat", T.StringType(), True),
    T.StructField("__type", T.StringType(), True),
    T.StructField("reject_reason", T.StringType(), True),
    T.StructField("__record", T.StringType(), True),
])
POINT_COLS = ["name", "x", "y", "longitude", "latitude"]
REJECT_COLS = ["source", "reason", "record"]


def _crime_input(spark) -> CrimeInput:
    rows = [
        (1000.0, 1020.0, "theft", "Other Theft", None, None),  # 20 m north of station A
        (3000.0, 3000.0, "theft", "Other Theft", None, None),  # far from everything
        (5000.0, 5010.0, "theft", "Theft from Vehicle", None, None),  # beside station B
        (1000.0, 1000.0, None, "Homicide", None, None),  # a known type outside the categories
        (None, None, None, None, "missing crime type", '{"TYPE":null}'),  # the null row
        (None, None, "theft", "Other Theft", "non-numeric coordinates", '{"X":"abc"}'),
    ]
    classified = spark.createDataFrame(rows, CLASSIFIED)
    ok = F.col("reject_reason").isNull()
    return CrimeInput(
        crimes=classified.where(ok & F.col("__cat").isNotNull()).select(
            F.col("__x").alias("x"), F.col("__y").alias("y"), F.col("__cat").alias("category")),
        ignored=classified.where(ok & F.col("__cat").isNull()).select(
            F.col("__type").alias("type")),
        rejects=classified.where(~ok).select(
            F.lit("crimes").alias("source"), F.col("reject_reason").alias("reason"),
            F.col("__record").alias("record")),
        classified=classified,
    )


def _params() -> CoffeeShopParams:
    return CoffeeShopParams(
        crimes="inline", stations="inline", competitors="inline", output=None,
        grid_step_m=10.0, search_radius_m=25.0, competitor_radius_m=500.0,
        exclude_m={"theft": 15.0}, top=3, count_radius_m=25.0, tile_cells=4,
        tile_partitions=2, categories={"theft": ["Other Theft", "Theft from Vehicle"]},
        ignored_types=["Homicide"])


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
    assert [x["name"] for x in s.cached] == ["crimes", "candidates"]
    assert [x["rows"] for x in s.cached] == [3, 15]
    assert {x["step"] for x in s.steps} == {"count_inputs", "stations", "search_search", "rank"}
