"""Station eligibility, the tiled lattice search in Spark, ranking and crime counts."""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.core.faults import maybe_fail
from sparkfield.core.practices import balance, partition_keys, skew_stats
from sparkfield.core.report import Stats
from sparkfield.core.workers import in_worker
from sparkfield.geo.lattice import Lattice, plan_tiles, tile_candidates

CANDIDATE_SCHEMA = T.StructType(
    [
        T.StructField("x", T.DoubleType(), False),
        T.StructField("y", T.DoubleType(), False),
        T.StructField("station_id", T.IntegerType(), False),
        T.StructField("distance_m", T.DoubleType(), False),
    ]
)
# what the tile kernel writes: a row per passing lattice point (in_search null) and a row per
# tile with the lattice points it had in reach (in_search, every other column null), so one
# pass over the tiles gives both, with no accumulator (which Spark Connect does not have)
KERNEL_SCHEMA = T.StructType(
    [T.StructField(f.name, f.dataType, True) for f in CANDIDATE_SCHEMA.fields]
    + [T.StructField("in_search", T.LongType(), True)]
)


def evaluate_stations(
    stations: pd.DataFrame, competitors: pd.DataFrame, competitor_radius_m: float
) -> pd.DataFrame:
    """Each station with its nearest competitor and whether it is eligible (no competitor at
    distance <= radius). Stations are returned in tie-break order: name, x, y."""
    out = tie_break_order(stations)
    if competitors.empty:
        out["nearest_competitor"] = None
        out["nearest_competitor_m"] = np.nan
        out["eligible"] = True
        return out
    dx = out["x"].to_numpy()[:, None] - competitors["x"].to_numpy()[None, :]
    dy = out["y"].to_numpy()[:, None] - competitors["y"].to_numpy()[None, :]
    d2 = dx * dx + dy * dy
    k = d2.argmin(axis=1)
    nearest2 = d2[np.arange(len(out)), k]
    out["nearest_competitor"] = competitors["name"].to_numpy()[k]
    out["nearest_competitor_m"] = np.sqrt(nearest2)
    out["eligible"] = ~(nearest2 <= competitor_radius_m * competitor_radius_m)
    return out


def tie_break_order(stations: pd.DataFrame) -> pd.DataFrame:
    """Stations in the order that decides a lattice point equally near two: name, x, y."""
    return stations.sort_values(["name", "x", "y"], kind="mergesort").reset_index(drop=True)


@dataclass(frozen=True)
class SearchPlan:
    """Where to look: the lattice, the tiles near a station (or inside ``boxes``), and the
    eligible stations in tie-break order."""

    lattice: Lattice
    tiles: list[tuple[int, int]]
    sx: np.ndarray
    sy: np.ndarray
    radius_m: float
    boxes: list[tuple[float, float, float, float]] | None


def plan_search(stations: pd.DataFrame, radius_m: float, step: float, tile_cells: int,
                boxes: Sequence[tuple[float, float, float, float]] | None = None) -> SearchPlan:
    lattice = Lattice(step, tile_cells)
    sx = stations["x"].to_numpy(dtype=float)
    sy = stations["y"].to_numpy(dtype=float)
    tiles = plan_tiles(lattice, np.column_stack([sx, sy]), radius_m, boxes)
    box_list = [tuple(map(float, b)) for b in boxes] if boxes is not None else None
    return SearchPlan(lattice, tiles, sx, sy, float(radius_m), box_list)


def bucket_crimes(spark: SparkSession, crimes: DataFrame, plan: SearchPlan,
                  exclude_m: dict[str, float]) -> DataFrame:
    """(ti, tj, x, y, r): each crime copied to every planned tile its exclusion disk touches
    (one extra cell of margin each side); crimes of categories without a radius are dropped."""
    step, tile_m = plan.lattice.step, plan.lattice.tile_m
    radius_of = F.create_map(
        *[v for c, r in exclude_m.items() for v in (F.lit(c), F.lit(float(r)))]
    )
    crimes_r = crimes.select("x", "y", radius_of[F.col("category")].alias("r")).where(
        F.col("r").isNotNull()
    )
    lo_x = F.floor((F.col("x") - F.col("r") - step) / tile_m)
    hi_x = F.floor((F.col("x") + F.col("r") + step) / tile_m)
    lo_y = F.floor((F.col("y") - F.col("r") - step) / tile_m)
    hi_y = F.floor((F.col("y") + F.col("r") + step) / tile_m)
    return (
        crimes_r.withColumn("ti", F.explode(F.sequence(lo_x, hi_x)))
        .withColumn("tj", F.explode(F.sequence(lo_y, hi_y)))
        .join(F.broadcast(_tiles_frame(spark, plan)), ["ti", "tj"])
    )


def _tiles_frame(spark: SparkSession, plan: SearchPlan) -> DataFrame:
    return spark.createDataFrame(plan.tiles, "ti long, tj long")


def tile_costs(plan: SearchPlan, crime_rows: dict[tuple[int, int], int],
               exclude_m: dict[str, float]) -> list[float]:
    """Work per tile: its lattice points plus, per crime row, the lattice rows of its disk."""
    max_r = max(exclude_m.values()) if exclude_m else 0.0
    rows_per_disk = 2 * max_r / plan.lattice.step + 1
    cells = plan.lattice.tile_cells * plan.lattice.tile_cells
    return [cells + crime_rows.get(t, 0) * rows_per_disk for t in plan.tiles]


def balance_stats(spark: SparkSession, plan: SearchPlan, costs: list[float],
                  assignment: list[int], parts: int) -> dict[str, dict[str, float]]:
    """Cost skew of the balanced assignment next to what a plain repartition by tile (Spark's
    own hash of the tile key) would give."""
    hashed = [0.0] * parts
    hash_part = _tiles_frame(spark, plan).select(
        F.expr(f"pmod(hash(ti, tj), {parts})").alias("p")).collect()
    for r, c in zip(hash_part, costs, strict=True):
        hashed[r["p"]] += c
    balanced = [0.0] * parts
    for b, c in zip(assignment, costs, strict=True):
        balanced[b] += c
    return {"tile_cost": skew_stats(costs), "partition_cost_unbalanced": skew_stats(hashed),
            "partition_cost_balanced": skew_stats(balanced)}


def tile_kernel(plan: SearchPlan) -> Callable[[Iterator[pd.DataFrame]], Iterator[pd.DataFrame]]:
    """The mapInPandas function: rows (pkey, ti, tj, x, y, r) of whole tiles in, rows of
    :data:`KERNEL_SCHEMA` out (passing lattice points, and each tile's count of points in
    reach). A tile with no crime arrives as its marker row (x, y, r null)."""
    lattice, sx, sy, radius_m, box_list = (plan.lattice, plan.sx, plan.sy, plan.radius_m,
                                           plan.boxes)

    def run_tiles(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        maybe_fail("geo.tiles")
        frames = [b for b in batches if len(b)]
        if not frames:
            return
        part = pd.concat(frames, ignore_index=True)
        for (ti, tj), grp in part.groupby(["ti", "tj"], sort=True):
            # identical disks (crimes at the same offset address, same category radius) add
            # nothing to the union: one of each is enough, exactly
            crimes_g = grp[grp["x"].notna()].drop_duplicates(["x", "y", "r"])
            res = tile_candidates(
                int(ti), int(tj), lattice, sx, sy, radius_m,
                crimes_g["x"].to_numpy(), crimes_g["y"].to_numpy(), crimes_g["r"].to_numpy(),
                box_list,
            )
            yield _tile_rows(res.x, res.y, res.station, res.distance, res.in_search)

    return run_tiles


def _tile_rows(x: np.ndarray, y: np.ndarray, station: np.ndarray, distance: np.ndarray,
               in_search: int) -> pd.DataFrame:
    """One tile's kernel rows: its passing points, then its count row."""
    def column(values: np.ndarray, dtype: str) -> pd.api.extensions.ExtensionArray:
        return pd.array([*values.tolist(), None], dtype=dtype)

    return pd.DataFrame({
        "x": column(x, "Float64"), "y": column(y, "Float64"),
        "station_id": column(station, "Int32"), "distance_m": column(distance, "Float64"),
        "in_search": pd.array([None] * len(x) + [in_search], dtype="Int64"),
    })


def candidates_of(found: DataFrame) -> DataFrame:
    """The passing lattice points among the kernel's rows (the tiles' count rows left out)."""
    return found.where(F.col("in_search").isNull()).drop("in_search")


def search_counts(found: DataFrame) -> tuple[int, int]:
    """(passing lattice points, lattice points in reach) of the kernel's rows, in one pass."""
    row = found.agg(F.count(F.when(F.col("in_search").isNull(), 1)).alias("passing"),
                    F.sum("in_search").alias("in_search")).first()
    return int(row["passing"] or 0), int(row["in_search"] or 0)


@dataclass
class SearchStats:
    """What one search level measured, for the run report."""

    tiles: int = 0
    crime_tile_rows: int = 0
    skew: dict[str, dict[str, float]] = field(default_factory=dict)

    def to_report(self, report: Stats, label: str) -> None:
        for name, stats in self.skew.items():
            report.skew[f"{label}.{name}"] = stats
        if self.tiles:
            report.counts[f"{label}.tiles"] = self.tiles
            report.counts[f"{label}.crime_tile_rows"] = self.crime_tile_rows


def search_tiles(
    spark: SparkSession,
    crimes: DataFrame,
    stations: pd.DataFrame,
    radius_m: float,
    exclude_m: dict[str, float],
    step: float,
    tile_cells: int,
    partitions: int,
    boxes: Sequence[tuple[float, float, float, float]] | None = None,
) -> tuple[DataFrame, SearchStats]:
    """The kernel's rows (:data:`KERNEL_SCHEMA`: every passing lattice point around
    ``stations``, eligible ones in tie-break order, and each tile's count of points in reach),
    computed tile by tile in Spark, and the stats of the tiling.

    Crimes reach tiles through a bucketing join: each crime is copied to the tiles its
    exclusion disk touches, and only tiles near a station exist. Tiles are weighed (lattice
    points + crime rows) and packed onto partitions so the downtown tiles, where crime
    concentrates, do not all land on one task.
    """
    plan = plan_search(stations, radius_m, step, tile_cells, boxes)
    if not plan.tiles:
        return spark.createDataFrame([], KERNEL_SCHEMA), SearchStats()
    bucketed = bucket_crimes(spark, crimes, plan, exclude_m)
    crime_rows = {
        (r["ti"], r["tj"]): r["n"]
        for r in bucketed.groupBy("ti", "tj").agg(F.count(F.lit(1)).alias("n")).collect()
    }
    costs = tile_costs(plan, crime_rows, exclude_m)
    parts = max(1, min(partitions, len(plan.tiles)))
    assignment = balance(costs, parts)
    stats = SearchStats(tiles=len(plan.tiles), crime_tile_rows=int(sum(crime_rows.values())),
                        skew=balance_stats(spark, plan, costs, assignment, parts))
    keys = partition_keys(spark, parts)
    key_of_tile = spark.createDataFrame(
        [(ti, tj, keys[b]) for (ti, tj), b in zip(plan.tiles, assignment, strict=True)],
        "ti long, tj long, pkey int",
    )
    markers = key_of_tile.select(
        "pkey", "ti", "tj", *[F.lit(None).cast("double").alias(c) for c in ("x", "y", "r")]
    )
    work = bucketed.join(F.broadcast(key_of_tile), ["ti", "tj"]).select(
        "pkey", "ti", "tj", "x", "y", "r"
    )
    found = (
        markers.unionByName(work)
        .repartition(parts, "pkey")
        .mapInPandas(in_worker(tile_kernel(plan)), KERNEL_SCHEMA)
    )
    return found, stats


def search_with_stats(
    spark: SparkSession,
    crimes: DataFrame,
    stations: pd.DataFrame,
    radius_m: float,
    exclude_m: dict[str, float],
    step: float,
    tile_cells: int,
    partitions: int,
    boxes: Sequence[tuple[float, float, float, float]] | None = None,
) -> tuple[DataFrame, SearchStats]:
    """:func:`search_tiles` with only the passing points (x, y, station_id, distance_m)."""
    found, stats = search_tiles(spark, crimes, stations, radius_m, exclude_m, step, tile_cells,
                                partitions, boxes)
    return candidates_of(found), stats


def with_station_names(
    found: DataFrame, stations: pd.DataFrame, spark: SparkSession
) -> DataFrame:
    """``found`` (candidates or kernel rows) with the name of each point's station beside its
    id; rows without a station (the tiles' count rows) are kept."""
    names = spark.createDataFrame(
        [(int(i), str(n)) for i, n in enumerate(stations["name"])], "station_id int, station string"
    )
    extra = ["in_search"] if "in_search" in found.columns else []
    return found.join(F.broadcast(names), "station_id", "left").select(
        "x", "y", "station", "station_id", "distance_m", *extra
    )


def rank(candidates: DataFrame, n: int) -> DataFrame:
    """The best ``n``: nearest to its station, then station name, then x, then y."""
    order = [F.col("distance_m").asc(), F.col("station").asc(), F.col("x").asc(), F.col("y").asc()]
    return candidates.orderBy(*order).limit(n)


# candidates read to the driver at first when sites must be apart; more are looked at in Spark
SITES_HEAD = 2000


def best_sites(candidates: DataFrame, n: int, min_separation_m: float) -> pd.DataFrame:
    """The best ``n`` distinct sites: candidates visited in :func:`rank` order, each kept when
    at least ``min_separation_m`` from every one kept before it (``dx*dx + dy*dy >= m*m``);
    ``0`` keeps every candidate (the plain top ``n``).

    The greedy pass runs on the driver over the best candidates; should they hold fewer than
    ``n`` sites, each further site is the best candidate that far from all kept ones, found in
    Spark, so the result is the greedy pass over every candidate without collecting them."""
    if min_separation_m <= 0:
        return rank(candidates, n).toPandas()
    size = max(SITES_HEAD, 100 * n)
    head = rank(candidates, size).toPandas()
    kept = head.iloc[greedy_sites(head["x"].to_numpy(), head["y"].to_numpy(), n,
                                  min_separation_m)]
    while len(kept) < n and len(head) == size:
        far = [_at_least(x, y, min_separation_m) for x, y in zip(kept["x"], kept["y"],
                                                                 strict=True)]
        nxt = rank(candidates.where(functools.reduce(operator.and_, far)), 1).toPandas()
        if nxt.empty:
            break
        kept = pd.concat([kept, nxt])
    return kept.reset_index(drop=True)


def greedy_sites(x: np.ndarray, y: np.ndarray, n: int, min_separation_m: float) -> list[int]:
    """Positions of the first ``n`` points (in the given order) each at least
    ``min_separation_m`` from every point kept before it."""
    m2 = min_separation_m * min_separation_m
    alive = np.ones(len(x), dtype=bool)
    kept: list[int] = []
    while len(kept) < n and alive.any():
        k = int(np.argmax(alive))  # the first point not too close to a kept one
        kept.append(k)
        dx, dy = x - x[k], y - y[k]
        alive &= dx * dx + dy * dy >= m2
        alive[k] = False
    return kept


def _at_least(x: float, y: float, distance_m: float) -> Column:
    dx, dy = F.col("x") - F.lit(float(x)), F.col("y") - F.lit(float(y))
    return dx * dx + dy * dy >= F.lit(distance_m * distance_m)


def crime_counts_near(
    points: pd.DataFrame, crimes: DataFrame, radius_m: float, categories: Sequence[str],
    spark: SparkSession,
) -> pd.DataFrame:
    """Crimes of each category within ``radius_m`` of each point (a small table)."""
    out = points.copy()
    for c in categories:
        out[f"{c}_count"] = 0
    if points.empty:
        return out
    pts = spark.createDataFrame(
        [(int(i), float(x), float(y)) for i, x, y in zip(points.index, points["x"], points["y"],
                                                       strict=True)],
        "pid int, px double, py double",
    )
    r2 = radius_m * radius_m
    near = (
        crimes.join(F.broadcast(pts), (F.abs(F.col("x") - F.col("px")) <= radius_m)
                    & (F.abs(F.col("y") - F.col("py")) <= radius_m))
        .where((F.col("x") - F.col("px")) ** 2 + (F.col("y") - F.col("py")) ** 2 <= r2)
        .groupBy("pid", "category")
        .count()
        .collect()
    )
    for r in near:
        if r["category"] in categories:
            out.loc[r["pid"], f"{r['category']}_count"] = r["count"]
    return out
