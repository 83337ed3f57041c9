"""The coffee-shop search as functions on DataFrames, for a caller that already holds its inputs
(a lakehouse table, a notebook's frames): :func:`best_locations` ranks distinct sites (a Spark
DataFrame; :func:`best_locations_pandas` gives the same rows as pandas) and
:func:`search_lattice` gives every passing lattice point. The job's compute is built on
:func:`best_locations_pandas`. They use the DataFrame API only, so they run over Spark Connect
too.

Inputs are projected points in metres: crimes ``x_col, y_col, category_col``; stations
``x_col, y_col`` and ``name_col`` (by default ``name``, else ``station``); competitors
``x_col, y_col`` (``name_col`` optional). Column names are matched in any case, as Spark
resolves them. A row with a null (or NaN) coordinate, category or station name says nothing
about a place and is skipped."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.core.connect import default_parallelism, is_connect
from sparkfield.core.errors import ColumnError, ConfigError
from sparkfield.core.practices import Checkpointer, cached
from sparkfield.core.report import Stats
from sparkfield.geo.crs import UTM, UTM10N
from sparkfield.geo.params import SEARCH_DEFAULTS as D
from sparkfield.geo.params import CoffeeShopsSearchParams, parse_search
from sparkfield.geo.search import (
    best_sites,
    candidates_of,
    crime_counts_near,
    evaluate_stations,
    rank,
    search_counts,
    search_tiles,
    tie_break_order,
    with_station_names,
)

Box = tuple[float, float, float, float]
Extent = tuple[float, float, float, float]  # xmin, ymin, xmax, ymax


@dataclass
class SearchContext:
    """How a caller that does more than rank (the job) runs :func:`best_locations`, and what it
    gets back besides the ranking. Frames the search caches stay cached until ``stack``
    closes; its steps, counts and caches are recorded in ``stats``. Refinement levels are
    checkpointed locally unless ``local_checkpoint`` is false (reliable checkpoints need the
    session's checkpoint directory, which the job's session has)."""

    stack: ExitStack
    stats: Stats = field(default_factory=Stats)
    level: str | StorageLevel = "MEMORY_AND_DISK_DESER"
    local_checkpoint: bool = True
    # filled in by best_locations
    stations: pd.DataFrame | None = None  # every station: nearest competitor, eligible
    crimes: DataFrame | None = None  # the crimes searched (x, y, category), cached
    candidates: DataFrame | None = None  # every passing lattice point, read from a cache
    candidate_count: int = 0
    in_search_count: int = 0  # lattice points in reach of the last level


@dataclass(frozen=True)
class PointColumns:
    """The columns the search reads from its inputs (matched in any case)."""

    x_col: str = "x"
    y_col: str = "y"
    category_col: str = "category"  # crimes
    name_col: str = "name"  # stations (``station`` too when left at ``name``), competitors


def best_locations(
    crimes: DataFrame,
    stations: DataFrame | pd.DataFrame,
    competitors: DataFrame | pd.DataFrame,
    **kwargs,
) -> DataFrame:
    """:func:`best_locations_pandas`'s ranking as a Spark DataFrame (same arguments, same rows
    and columns: ``rank`` int, ``station`` string, the rest double or long counts). Runs the
    search's Spark jobs now (the ranking needs them); the frame holds the result."""
    top = best_locations_pandas(crimes, stations, competitors, **kwargs)
    return crimes.sparkSession.createDataFrame(top, sites_schema(list(top.columns)))


def sites_schema(columns: Sequence[str]) -> T.StructType:
    """The Spark types of a ranking's columns (:func:`site_columns`)."""
    kinds = {"rank": T.IntegerType(), "station": T.StringType()}
    return T.StructType([T.StructField(c, kinds.get(c, T.LongType() if c.endswith("_count")
                                                     else T.DoubleType())) for c in columns])


def best_locations_pandas(
    crimes: DataFrame,
    stations: DataFrame | pd.DataFrame,
    competitors: DataFrame | pd.DataFrame,
    *,
    top: int = D["top"],
    min_separation_m: float = D["min_separation_m"],
    grid_step_m: float = D["grid_step_m"],
    search_radius_m: float = D["search_radius_m"],
    competitor_radius_m: float = D["competitor_radius_m"],
    exclude_m: Mapping[str, float] = D["exclude_m"],
    count_radius_m: float = D["count_radius_m"],
    refine: Sequence[float] = D["refine"],
    refine_keep: int = D["refine_keep"],
    tile_cells: int = D["tile_cells"],
    tile_partitions: int | None = D["tile_partitions"],
    max_lattice_points: int = D["max_lattice_points"],
    crs: UTM | None = UTM10N,
    context: SearchContext | None = None,
    x_col: str = "x",
    y_col: str = "y",
    category_col: str = "category",
    name_col: str = "name",
) -> pd.DataFrame:
    """The ``top`` best distinct sites near an eligible station (no competitor within
    ``competitor_radius_m``), as a pandas DataFrame in rank order: ``rank, station, x, y,
    longitude, latitude, distance_to_station_m``, the crimes of each ``exclude_m`` category
    within ``count_radius_m`` (``<category>_count``) and ``count_radius_m``.

    ``crimes`` is a Spark DataFrame; ``stations`` and ``competitors`` (small) Spark or pandas
    DataFrames. The keywords are the job's ``search`` parameters, with its defaults and
    bounds (:class:`ConfigError` when one is out of range). ``crs`` is the projection of x/y,
    for the longitude/latitude columns (None: no such columns). ``context``: see
    :class:`SearchContext`; without one, whatever the search cached is released on return.
    ``x_col``, ``y_col``, ``category_col``, ``name_col``: the inputs' columns (see the module).
    Runs the search's Spark jobs; a missing column is a :class:`ColumnError` before any.
    """
    s = parse_search({
        "top": top, "min_separation_m": min_separation_m, "grid_step_m": grid_step_m,
        "search_radius_m": search_radius_m, "competitor_radius_m": competitor_radius_m,
        "exclude_m": dict(exclude_m), "count_radius_m": count_radius_m, "refine": list(refine),
        "refine_keep": refine_keep, "tile_cells": tile_cells, "tile_partitions": tile_partitions,
        "max_lattice_points": max_lattice_points})
    cols = PointColumns(x_col, y_col, category_col, name_col)
    if context is not None:
        return _locate(crimes, stations, competitors, s, crs, context, cols)
    with ExitStack() as stack:
        return _locate(crimes, stations, competitors, s, crs, SearchContext(stack), cols)


def search_lattice(
    crimes: DataFrame,
    stations: DataFrame | pd.DataFrame,
    *,
    grid_step_m: float = D["grid_step_m"],
    search_radius_m: float = D["search_radius_m"],
    exclude_m: Mapping[str, float] = D["exclude_m"],
    refine: Sequence[float] = D["refine"],
    refine_keep: int = D["refine_keep"],
    min_separation_m: float = D["min_separation_m"],
    tile_cells: int = D["tile_cells"],
    tile_partitions: int | None = D["tile_partitions"],
    max_lattice_points: int = D["max_lattice_points"],
    x_col: str = "x",
    y_col: str = "y",
    category_col: str = "category",
    name_col: str = "name",
) -> DataFrame:
    """Every lattice point ``(i * grid_step_m, j * grid_step_m)`` within ``search_radius_m``
    of a station and outside every crime's exclusion disk: a Spark DataFrame ``x, y, station,
    station_id, distance_m`` (its nearest station and the distance to it). Every station
    given is searched (no competitor test). The frame is computed when read (cache it to read
    it twice); with ``refine``, the coarser levels run now and the frame is the finest one's,
    looked for around the best cells of the level before (``min_separation_m``: see
    :func:`best_locations`). Columns: as :func:`best_locations_pandas`."""
    s = parse_search({
        "grid_step_m": grid_step_m, "search_radius_m": search_radius_m,
        "exclude_m": dict(exclude_m), "refine": list(refine), "refine_keep": refine_keep,
        "min_separation_m": min_separation_m, "tile_cells": tile_cells,
        "tile_partitions": tile_partitions, "max_lattice_points": max_lattice_points})
    cols = PointColumns(x_col, y_col, category_col, name_col)
    crime_xy = crime_points(crimes, cols)
    points = tie_break_order(station_points(stations, cols))
    check_lattice_size(s, len(points), reach(points, s.search_radius_m))
    with ExitStack() as stack:  # the levels before the last are not read again
        found = _search_levels(crimes.sparkSession, crime_xy, points, s, SearchContext(stack))
    return candidates_of(found)


def _locate(crimes: DataFrame, stations: DataFrame | pd.DataFrame,
            competitors: DataFrame | pd.DataFrame, s: CoffeeShopsSearchParams,
            crs: UTM | None, ctx: SearchContext, cols: PointColumns = PointColumns()
            ) -> pd.DataFrame:
    """:func:`best_locations_pandas` with its parameters parsed."""
    spark, stats, categories = crimes.sparkSession, ctx.stats, list(s.exclude_m)
    points = crime_points(crimes, cols)
    with stats.step("stations"):
        ctx.stations = evaluate_stations(station_points(stations, cols),
                                         competitor_points(competitors, cols),
                                         s.competitor_radius_m)
        eligible = ctx.stations[ctx.stations["eligible"]].reset_index(drop=True)
    stats.counts["stations_eligible"] = int(len(eligible))
    if eligible.empty:
        stats.note("no eligible station: every station has a competitor within "
                   f"{s.competitor_radius_m:g} m")
        return empty_sites(categories, crs)
    check_lattice_size(s, len(eligible), reach(eligible, s.search_radius_m))
    ctx.crimes = ctx.stack.enter_context(cached(points, "crimes", ctx.level, stats))
    found = _search_levels(spark, ctx.crimes, eligible, s, ctx)
    # the last level's rows: its candidates and its tiles' counts, read twice from one cache
    found = ctx.stack.enter_context(cached(found, "search", ctx.level, stats))
    with stats.step("count_candidates"):
        ctx.candidate_count, ctx.in_search_count = search_counts(found)
    with stats.step("rank"):
        ctx.candidates = candidates_of(found)
        sites = best_sites(ctx.candidates, s.top, s.min_separation_m)
    with stats.step("describe_top"):
        top = describe_sites(spark, sites, ctx.crimes, s.count_radius_m, categories, crs)
    stats.counts["lattice_points_in_search"] = ctx.in_search_count
    stats.outputs["candidates"] = ctx.candidate_count
    stats.outputs["top_locations"] = int(len(top))
    return top


def _search_levels(spark: SparkSession, crimes: DataFrame, stations: pd.DataFrame,
                   s: CoffeeShopsSearchParams, ctx: SearchContext) -> DataFrame:
    """The kernel rows of the last search level, station names added: its candidates and the
    lattice points each tile had in reach. Each level before the last keeps its best cells
    (:func:`best_boxes`) and the next, finer, level looks only around them."""
    parts = s.tile_partitions or max(2, 4 * default_parallelism(spark))
    steps = [s.grid_step_m, *s.refine]
    checkpoint = _level_checkpointer(spark, ctx)
    boxes: list[Box] | None = None
    for level, step in enumerate(steps):
        label = f"level{level}_step{step:g}m" if len(steps) > 1 else "search"
        with ctx.stats.step(f"search_{label}"):
            found, measured = search_tiles(spark, crimes, stations, s.search_radius_m,
                                           s.exclude_m, step, s.tile_cells, parts, boxes)
            measured.to_report(ctx.stats, label)
            found = with_station_names(found, stations, spark)
            if level < len(steps) - 1:
                cands = candidates_of(checkpoint(found, level + 1))
                boxes = best_boxes(cands, step, s.refine_keep, s.min_separation_m,
                                   sites=max(s.refine_keep, s.top))
                ctx.stats.counts[f"{label}.candidates"] = cands.count()
    return found


def _level_checkpointer(spark: SparkSession, ctx: SearchContext) -> Checkpointer:
    """What cuts each refinement level before it is read twice. Over Spark Connect, local
    checkpoints the server drops with the plan: there is no SparkContext to release their
    blocks through, nor a checkpoint directory known to be set."""
    if is_connect(spark):
        return Checkpointer(every=1, local=True)
    return Checkpointer(every=1, local=ctx.local_checkpoint, stack=ctx.stack)


def best_boxes(candidates: DataFrame, step: float, keep: int, min_separation_m: float,
               sites: int | None = None) -> list[Box]:
    """One cell around each of the ``keep`` best candidates and, when sites must be apart,
    around each of the ``sites`` (default ``keep``) best distinct sites, so the finer level
    can still find that many: where the next level looks."""
    best = rank(candidates, keep).select("x", "y").toPandas()
    if min_separation_m > 0:
        distinct = best_sites(candidates, sites or keep, min_separation_m)[["x", "y"]]
        best = pd.concat([best, distinct]).drop_duplicates()
    return [(x - step, y - step, x + step, y + step)
            for x, y in zip(best["x"], best["y"], strict=True)]


def describe_sites(spark: SparkSession, sites: pd.DataFrame, crimes: DataFrame,
                   count_radius_m: float, categories: list[str], crs: UTM | None
                   ) -> pd.DataFrame:
    """Ranked sites (x, y, station, distance_m) as :func:`best_locations` returns them."""
    if sites.empty:
        return empty_sites(categories, crs)
    top = sites.reset_index(drop=True)
    top.insert(0, "rank", np.arange(1, len(top) + 1))
    if crs is not None:
        lon, lat = crs.to_lonlat(top["x"].to_numpy(), top["y"].to_numpy())
        top["longitude"] = np.round(lon, 7)
        top["latitude"] = np.round(lat, 7)
    top = top.rename(columns={"distance_m": "distance_to_station_m"})
    top = crime_counts_near(top, crimes, count_radius_m, categories, spark)
    top["count_radius_m"] = count_radius_m
    return top[site_columns(categories, crs)]


def site_columns(categories: Sequence[str], crs: UTM | None = UTM10N) -> list[str]:
    lonlat = ["longitude", "latitude"] if crs is not None else []
    return ["rank", "station", "x", "y", *lonlat, "distance_to_station_m",
            *[f"{c}_count" for c in categories], "count_radius_m"]


def empty_sites(categories: Sequence[str], crs: UTM | None = UTM10N) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="object") for c in site_columns(categories, crs)})


# -- inputs ------------------------------------------------------------------------------------

def _column(columns: Sequence[str], name: str) -> str | None:
    """The column called ``name``, in any case (as Spark resolves names)."""
    return next((c for c in columns if c.lower() == name.lower()), None)


def _require(columns: Sequence[str], names: Sequence[str], what: str) -> list[str]:
    found = [_column(columns, n) for n in names]
    missing = [n for n, c in zip(names, found, strict=True) if c is None]
    if missing:
        raise ColumnError(f"{what}: no column {', '.join(map(repr, missing))} "
                          f"(columns: {', '.join(columns)})")
    return [c for c in found if c is not None]


def crime_points(crimes: DataFrame, cols: PointColumns = PointColumns()) -> DataFrame:
    """``x, y`` (double) and ``category`` (string) of every crime that has all three."""
    x, y, cat = _require(crimes.columns, [cols.x_col, cols.y_col, cols.category_col], "crimes")
    out = crimes.select(F.col(f"`{x}`").cast("double").alias("x"),
                        F.col(f"`{y}`").cast("double").alias("y"),
                        F.col(f"`{cat}`").cast("string").alias("category"))
    return out.where(F.col("x").isNotNull() & F.col("y").isNotNull() & ~F.isnan("x")
                     & ~F.isnan("y") & F.col("category").isNotNull())


def _points(frame: DataFrame | pd.DataFrame, name: str | None, what: str,
            cols: PointColumns) -> pd.DataFrame:
    """A small input on the driver: its rows with x, y (floats) and ``name`` all set, those
    three columns renamed so, every other column kept."""
    xy = _require(list(frame.columns), [cols.x_col, cols.y_col], what)
    pdf = frame if isinstance(frame, pd.DataFrame) else frame.toPandas()
    renamed = {xy[0]: "x", xy[1]: "y", **({name: "name"} if name else {})}
    pdf = pdf.rename(columns=renamed)
    pdf = pdf.dropna(subset=["x", "y", "name"] if name else ["x", "y"]).reset_index(drop=True)
    return pdf.astype({"x": float, "y": float})


def station_points(stations: DataFrame | pd.DataFrame,
                   cols: PointColumns = PointColumns()) -> pd.DataFrame:
    """name, x, y (and any other column) of every station with all three."""
    have = list(stations.columns)
    name = _column(have, cols.name_col) or (
        _column(have, "station") if cols.name_col == "name" else None)
    if name is None:
        wanted = "'name' or 'station'" if cols.name_col == "name" else repr(cols.name_col)
        raise ColumnError(f"stations: no column {wanted} (columns: {', '.join(have)})")
    out = _points(stations, name, "stations", cols)
    out["name"] = out["name"].astype(str)
    return out


def competitor_points(competitors: DataFrame | pd.DataFrame,
                      cols: PointColumns = PointColumns()) -> pd.DataFrame:
    """name, x, y of every competitor with a position; a missing name is ``competitor <n>``."""
    name = _column(list(competitors.columns), cols.name_col)
    out = _points(competitors, None, "competitors", cols)
    given = out[name] if name else pd.Series(None, index=out.index, dtype="object")
    default = pd.Series([f"competitor {i + 1}" for i in range(len(out))], index=out.index)
    out["name"] = given.where(given.notna(), default).astype(str)
    return out


# -- size --------------------------------------------------------------------------------------

def reach(stations: pd.DataFrame, radius_m: float) -> Extent:
    """The box that holds every point within ``radius_m`` of a station."""
    return (float(stations["x"].min()) - radius_m, float(stations["y"].min()) - radius_m,
            float(stations["x"].max()) + radius_m, float(stations["y"].max()) + radius_m)


def lattice_estimate(s: CoffeeShopsSearchParams, stations: int, extent: Extent | None = None
                     ) -> float:
    """Lattice points the first search level visits at most: each station's disk, capped by
    ``extent``. Refinement levels add a few cells around each box kept (``refine_keep``, and
    as many distinct sites as ``top`` needs when sites must be apart)."""
    per_station = math.pi * s.search_radius_m ** 2 / s.grid_step_m ** 2
    total = stations * per_station
    if extent is not None:
        xmin, ymin, xmax, ymax = extent
        total = min(total, ((xmax - xmin) / s.grid_step_m + 1)
                    * ((ymax - ymin) / s.grid_step_m + 1))
    boxes = s.refine_keep + (max(s.refine_keep, s.top) if s.min_separation_m > 0 else 0)
    prev = s.grid_step_m
    for step in s.refine:
        total = max(total, boxes * (2 * prev / step + 1) ** 2)
        prev = step
    return total


def check_lattice_size(s: CoffeeShopsSearchParams, stations: int, extent: Extent | None = None
                       ) -> None:
    """Refuse a search too large to finish (exit 2 in a job) before any Spark work; ``s``:
    the ``search`` parameters."""
    n = lattice_estimate(s, stations, extent)
    if n > s.max_lattice_points:
        raise ConfigError(
            f"the search lattice would have about {n:.2g} points ({stations} station(s), "
            f"{s.search_radius_m:g} m radius, {s.grid_step_m:g} m step), over the limit of "
            f"{s.max_lattice_points:.2g}: use a larger --grid-step-m (or --refine), or raise "
            "search.max_lattice_points in conf/jobs/coffee_shops.yaml")
