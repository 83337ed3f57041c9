"""The coffee-shop job: read -> eligible stations -> tiled lattice search -> rank -> write."""

from __future__ import annotations

import logging
import math
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from pyspark import Accumulator, StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sparkfield.core.conf import Config
from sparkfield.core.errors import ConfigError, InputError
from sparkfield.core.io import AtomicOutput, optional_output, rejects_from_rows
from sparkfield.core.practices import Checkpointer, cached, cached_rows
from sparkfield.core.report import RunReport, Stats
from sparkfield.core.stages import publish
from sparkfield.geo import maps
from sparkfield.geo.crs import UTM10N
from sparkfield.geo.inputs import (
    CrimeInput,
    PointInput,
    StudyArea,
    bundled,
    read_competitors,
    read_crimes,
    read_stations,
)
from sparkfield.geo.params import CoffeeShopsParams, parse
from sparkfield.geo.search import (
    crime_counts_near,
    evaluate_stations,
    rank,
    search_with_stats,
    with_station_names,
)

log = logging.getLogger("sparkfield.geo")

TOP_COLUMNS = ["rank", "station", "x", "y", "longitude", "latitude", "distance_to_station_m"]
STATION_COLUMNS = ["station", "longitude", "latitude", "x", "y", "nearest_competitor",
                   "nearest_competitor_m", "eligible"]
CANDIDATE_COLUMNS = "x double, y double, station string, station_id int, distance_m double"
DENSITY_CELL_M = 100.0

# the file of the bundled Vancouver data read for an input the conf leaves null
BUNDLED_INPUTS = {"crimes": "vancouver_crime_2016.csv.gz",
                  "stations": "rapid_transit_stations.csv",
                  "competitors": "starbucks_vancouver_bc.csv"}


@dataclass(frozen=True)
class InputPaths:
    """Where the run reads its inputs: the conf's paths, the bundled files for those null."""

    crimes: str
    stations: str
    competitors: str

    @classmethod
    def of(cls, p: CoffeeShopsParams) -> InputPaths:
        return cls(**{name: getattr(p.inputs, name) or bundled(file)
                      for name, file in BUNDLED_INPUTS.items()})


@dataclass
class CoffeeShopResult:
    top: pd.DataFrame
    stations: pd.DataFrame
    candidates: DataFrame | None
    rejects: DataFrame
    report: RunReport
    candidate_count: int = 0
    in_search_count: int = 0
    output: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)


def _no_density() -> pd.DataFrame:
    return pd.DataFrame(columns=["cx", "cy", "n"])


@dataclass
class CoffeeShopComputed:
    """What :func:`compute` returns. ``crimes`` and ``candidates`` are cached until the
    ``stack`` given to compute closes, so the writer reads them from the cache. ``density``:
    crimes per 100 m cell (cx, cy, n), for the maps."""

    stations: pd.DataFrame
    top: pd.DataFrame
    rejects: DataFrame
    stats: Stats
    crimes: DataFrame | None = None
    candidates: DataFrame | None = None
    candidate_count: int = 0
    in_search_count: int = 0
    density: pd.DataFrame = field(default_factory=_no_density)


def run(spark: SparkSession, cfg: Config) -> CoffeeShopResult:
    """Run the search as ``cfg`` says; writes ``cfg.job.output`` atomically when set."""
    p = parse(cfg.job)
    paths = InputPaths.of(p)
    seed = cfg.practices.sample_seed
    report = RunReport("coffee_shops", params=_report_params(p, paths, seed))
    level = cfg.practices.storage_level
    check_lattice_size(p, 1)  # one station: refused before anything is read
    with report.step("read_inputs"):
        crime_in, stations_in, competitors_in = read_inputs(spark, p, paths, seed)
    check_lattice_size(p, len(stations_in.points))
    with optional_output(spark, p.output, "coffee_shops") as out, ExitStack() as stack:
        # the crime file is parsed once: counts, search, rejects and maps all read this cache
        stack.enter_context(cached(crime_in.classified, "crime_rows", level, report))
        c = compute(spark, p, crime_in, stations_in, competitors_in, stack, level,
                    cfg.practices.local_checkpoint)
        report.merge(c.stats)
        if out is not None:
            _write(spark, out, c, competitors_in.points, report)
        publish(spark, out, report, cfg.practices.skew_ratio_threshold, p.max_reject_fraction)
    log.info(report.summary())
    return CoffeeShopResult(top=c.top, stations=c.stations, candidates=c.candidates,
                            rejects=c.rejects, report=report, candidate_count=c.candidate_count,
                            in_search_count=c.in_search_count, output=p.output,
                            extras={"density": c.density})


def _report_params(p: CoffeeShopsParams, paths: InputPaths, seed: int) -> dict[str, Any]:
    """The parameters the run used, in the conf's shape: null inputs as the bundled files
    read for them, and the seed of ``sample``."""
    params = asdict(p)
    params["inputs"].update(asdict(paths))
    return {**params, "seed": seed}


def read_inputs(spark: SparkSession, p: CoffeeShopsParams, paths: InputPaths, seed: int
                ) -> tuple[CrimeInput, PointInput, PointInput]:
    """Crimes, stations and competitors, each row used, ignored or rejected with a reason;
    :class:`InputError` when no station is usable."""
    area = StudyArea(**asdict(p.study_area))
    crime_in = read_crimes(spark, paths.crimes, p.categories, p.ignored_types, area, p.sample,
                           seed, multiline=p.inputs.csv_multiline)
    stations_in = read_stations(spark, paths.stations, area)
    competitors_in = read_competitors(spark, paths.competitors, area, p.competitor_filter)
    if stations_in.points.empty:
        raise InputError(f"{paths.stations}: no usable station ({_why_empty(stations_in)})")
    return crime_in, stations_in, competitors_in


def compute(spark: SparkSession, p: CoffeeShopsParams, crime_in: CrimeInput,
            stations_in: PointInput, competitors_in: PointInput, stack: ExitStack,
            level: str | StorageLevel = StorageLevel.MEMORY_AND_DISK_DESER,
            local_checkpoint: bool = False) -> CoffeeShopComputed:
    """The read inputs in; the eligible stations, the ranked locations, every candidate, the
    crime density and what was counted out. Writes nothing; the frames it caches live as
    long as ``stack``."""
    stats = Stats()
    rejects = _count_inputs(spark, p, crime_in, stations_in, competitors_in, stats)
    with stats.step("stations"):
        stations = evaluate_stations(stations_in.points, competitors_in.points,
                                     p.search.competitor_radius_m)
        eligible = stations[stations["eligible"]].reset_index(drop=True)
    stats.counts["stations_eligible"] = int(len(eligible))
    c = CoffeeShopComputed(stations=stations, top=_empty_top(p), rejects=rejects, stats=stats)
    if eligible.empty:
        stats.note("no eligible station: every station has a competitor within "
                   f"{p.search.competitor_radius_m:g} m")
        return c

    c.crimes = stack.enter_context(cached(crime_in.crimes, "crimes", level, stats))
    found, in_search = _search(spark, p, c.crimes, eligible, stats, local_checkpoint, stack)
    cands, n_candidates = stack.enter_context(cached_rows(found, "candidates", level, stats))
    with stats.step("rank"):
        top = rank(cands, p.search.top).toPandas()
    c.candidates = cands
    c.candidate_count = int(n_candidates)
    c.in_search_count = int(in_search.value)
    c.top = _describe_top(spark, p, top, c.crimes)
    c.density = crime_density(c.crimes)
    stats.counts["lattice_points_in_search"] = c.in_search_count
    stats.outputs["candidates"] = c.candidate_count
    stats.outputs["top_locations"] = int(len(c.top))
    return c


def _count_inputs(spark: SparkSession, p: CoffeeShopsParams, crime_in: CrimeInput,
                  stations_in: PointInput, competitors_in: PointInput, stats: Stats
                  ) -> DataFrame:
    """Every input row counted into ``stats`` as used, ignored or rejected; the rejects of
    all three inputs. :class:`InputError` when no crime row is usable."""
    with stats.step("count_inputs"):
        counted = crime_in.outcome_counts()
    outcomes = _by_kind(counted)
    points = {"stations": stations_in, "competitors": competitors_in}
    stats.inputs = {"crimes": sum(counted.values()),
                    **{src: len(pin.points) + len(pin.rejects) for src, pin in points.items()}}
    categories = outcomes.get("category", {})
    if not categories:
        raise InputError(f"{crime_in.path}: no usable crime rows ({_why_no_crimes(counted)})")
    stats.counts["crimes_by_category"] = categories
    stats.counts["crimes_ignored_by_type"] = outcomes.get("ignored", {})
    stats.counts["competitors_outside_city_filter"] = competitors_in.out_of_scope
    stats.add_rejects("crimes", outcomes.get("reject", {}))
    for src, pin in points.items():
        stats.add_rejects(src, pin.rejects["reason"].value_counts().to_dict())
    point_rejects = pd.concat([pin.rejects for pin in points.values()], ignore_index=True)
    return crime_in.rejects.unionByName(
        rejects_from_rows(spark, point_rejects.itertuples(index=False)))


def _by_kind(outcomes: dict[str, int]) -> dict[str, dict[str, int]]:
    """Crime rows per outcome, split by kind: ``category``, ``ignored`` (by type) and
    ``reject`` (by reason)."""
    out: dict[str, dict[str, int]] = {}
    for key, n in outcomes.items():
        kind, name = key.split(":", 1) if ":" in key else ("category", key)
        out.setdefault(kind, {})[name] = n
    return out


def _why_empty(points: PointInput) -> str:
    if points.rejects.empty:
        return "the file has no rows"
    reasons = points.rejects["reason"].value_counts().to_dict()
    return "all rejected: " + ", ".join(f"{r}={n}" for r, n in reasons.items())


def _why_no_crimes(outcomes: dict[str, int]) -> str:
    if not outcomes:
        return "the file has no rows"
    return "none in the categories: " + ", ".join(
        f"{k.split(':', 1)[-1] if k.startswith('reject:') else k}={v}"
        for k, v in sorted(outcomes.items(), key=lambda kv: -kv[1])[:6])


def lattice_estimate(p: CoffeeShopsParams, stations: int) -> float:
    """Lattice points the first search level visits at most: each station's disk, capped by
    the study area. Refinement levels add ``refine_keep`` boxes of a few cells each."""
    s, a = p.search, p.study_area
    per_station = math.pi * s.search_radius_m ** 2 / s.grid_step_m ** 2
    area_points = ((a.xmax - a.xmin) / s.grid_step_m + 1) * ((a.ymax - a.ymin) / s.grid_step_m + 1)
    total = min(stations * per_station, area_points)
    prev = s.grid_step_m
    for step in s.refine:
        total = max(total, s.refine_keep * (2 * prev / step + 1) ** 2)
        prev = step
    return total


def check_lattice_size(p: CoffeeShopsParams, stations: int) -> None:
    """Refuse a search too large to finish (exit 2) before any Spark work."""
    s = p.search
    n = lattice_estimate(p, stations)
    if n > s.max_lattice_points:
        raise ConfigError(
            f"the search lattice would have about {n:.2g} points ({stations} station(s), "
            f"{s.search_radius_m:g} m radius, {s.grid_step_m:g} m step), over the limit of "
            f"{s.max_lattice_points:.2g}: use a larger --grid-step-m (or --refine), or raise "
            "search.max_lattice_points in conf/jobs/coffee_shops.yaml")


def _top_columns(p: CoffeeShopsParams) -> list[str]:
    return TOP_COLUMNS + [f"{c}_count" for c in p.categories] + ["count_radius_m"]


def _empty_top(p: CoffeeShopsParams) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="object") for c in _top_columns(p)})


def _default_partitions(spark: SparkSession) -> int:
    return max(2, 4 * spark.sparkContext.defaultParallelism)


def _search(spark: SparkSession, p: CoffeeShopsParams, crimes: DataFrame,
            eligible: pd.DataFrame, stats: Stats, local_checkpoint: bool, stack: ExitStack
            ) -> tuple[DataFrame, Accumulator[int]]:
    """Every candidate of the last search level, and the lattice points that level had in
    reach (counted as the candidates are computed). Each level before the last keeps its
    ``refine_keep`` best cells and the next, finer, level looks only around them."""
    s = p.search
    parts = s.tile_partitions or _default_partitions(spark)
    steps = [s.grid_step_m, *s.refine]
    checkpoint = Checkpointer(every=1, local=local_checkpoint, stack=stack)
    boxes = None
    for level, step in enumerate(steps):
        in_search = spark.sparkContext.accumulator(0)
        label = f"level{level}_step{step:g}m" if len(steps) > 1 else "search"
        last = level == len(steps) - 1
        with stats.step(f"search_{label}"):
            found, measured = search_with_stats(spark, crimes, eligible, s.search_radius_m,
                                                s.exclude_m, step, s.tile_cells, parts, boxes,
                                                in_search)
            measured.to_report(stats, label)
            found = with_station_names(found, eligible, spark)
            if not last:
                found = checkpoint(found, level + 1)
                boxes = _best_boxes(found, step, s.refine_keep)
                stats.counts[f"{label}.candidates"] = found.count()
        if last or not boxes:
            return found, in_search
    raise AssertionError("the search has at least one level")


def _best_boxes(found: DataFrame, step: float, keep: int
                ) -> list[tuple[float, float, float, float]]:
    """One cell around each of the ``keep`` best candidates: where the next level looks."""
    best = rank(found, keep).select("x", "y").collect()
    return [(r["x"] - step, r["y"] - step, r["x"] + step, r["y"] + step) for r in best]


def _describe_top(spark: SparkSession, p: CoffeeShopsParams, top: pd.DataFrame,
                  crimes: DataFrame) -> pd.DataFrame:
    if top.empty:
        return _empty_top(p)
    radius = p.search.count_radius_m
    top = top.reset_index(drop=True)
    top.insert(0, "rank", np.arange(1, len(top) + 1))
    lon, lat = UTM10N.to_lonlat(top["x"].to_numpy(), top["y"].to_numpy())
    top["longitude"] = np.round(lon, 7)
    top["latitude"] = np.round(lat, 7)
    top = top.rename(columns={"distance_m": "distance_to_station_m"})
    top = crime_counts_near(top, crimes, radius, list(p.categories), spark)
    top["count_radius_m"] = radius
    return top[_top_columns(p)]


def crime_density(crimes: DataFrame) -> pd.DataFrame:
    """Crimes per ``DENSITY_CELL_M`` square cell: its centre (cx, cy) and count (n)."""
    cell = DENSITY_CELL_M
    return (
        crimes.groupBy(F.floor(F.col("x") / cell).alias("i"), F.floor(F.col("y") / cell).alias("j"))
        .count()
        .select(((F.col("i") + 0.5) * cell).alias("cx"), ((F.col("j") + 0.5) * cell).alias("cy"),
                F.col("count").alias("n"))
        .toPandas()
    )


def _write(spark: SparkSession, out: AtomicOutput, c: CoffeeShopComputed,
           competitors: pd.DataFrame, report: RunReport) -> None:
    """Every output file into ``out`` (committed by the caller)."""
    if c.candidates is not None:
        with report.step("write_candidates"):
            out.write_parquet("candidates", c.candidates)
    with report.step("write_outputs"):
        if c.candidates is None:
            out.write_parquet("candidates", spark.createDataFrame([], CANDIDATE_COLUMNS))
        out.write_csv("top_locations.csv", c.top)
        out.write_csv("stations.csv",
                      c.stations.rename(columns={"name": "station"})[STATION_COLUMNS])
        out.write_parquet("rejects", c.rejects, partitions=1)
        _write_maps(out, c, competitors, report)


def _write_maps(out: AtomicOutput, c: CoffeeShopComputed, competitors: pd.DataFrame,
                report: RunReport) -> None:
    """map.png and map.html: optional renderings, noted in the report when they cannot be
    made here."""
    title = f"Coffee-shop search: top {len(c.top)} locations"
    with report.optional("map.png"):
        out.write_bytes("map.png", maps.map_png(c.stations, competitors, c.density, c.top,
                                                DENSITY_CELL_M, title))
    with report.optional("map.html"):
        out.write_text("map.html", maps.map_html(c.stations, competitors, c.density, c.top,
                                                 DENSITY_CELL_M, title))
