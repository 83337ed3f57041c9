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
from sparkfield.core.io import AtomicOutput, optional_output
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
    rejects_frame,
)
from sparkfield.geo.params import SCHEMA
from sparkfield.geo.search import (
    crime_counts_near,
    evaluate_stations,
    rank,
    search_with_stats,
    with_station_names,
)

log = logging.getLogger("sparkfield.geo")

TOP_COLUMNS = ["rank", "station", "x", "y", "longitude", "latitude", "distance_to_station_m"]


# the search section's keys that are fields of the same name
SEARCH_KEYS = ("grid_step_m", "search_radius_m", "competitor_radius_m", "exclude_m", "top",
               "count_radius_m", "tile_cells", "tile_partitions", "refine", "refine_keep")


@dataclass
class CoffeeShopParams:
    crimes: str
    stations: str
    competitors: str
    output: str | None
    grid_step_m: float = 10.0
    search_radius_m: float = 1000.0
    competitor_radius_m: float = 500.0
    exclude_m: dict[str, float] = field(default_factory=dict)
    top: int = 10
    count_radius_m: float = 250.0
    tile_cells: int = 256
    tile_partitions: int | None = None
    refine: list[float] = field(default_factory=list)
    refine_keep: int = 50
    sample: float | None = None
    seed: int = 42
    categories: dict[str, list[str]] = field(default_factory=dict)
    ignored_types: list[str] = field(default_factory=list)
    competitor_filter: dict[str, str] = field(default_factory=dict)
    study_area: dict[str, float] = field(default_factory=dict)
    max_lattice_points: float = 1e8
    csv_multiline: bool = True

    @classmethod
    def from_config(cls, cfg: Config) -> CoffeeShopParams:
        job = SCHEMA.validate(cfg.job)  # unknown keys, types and ranges
        s = job["search"]
        inputs = job["inputs"]
        p = cls(
            crimes=inputs["crimes"] or bundled("vancouver_crime_2016.csv.gz"),
            stations=inputs["stations"] or bundled("rapid_transit_stations.csv"),
            competitors=inputs["competitors"] or bundled("starbucks_vancouver_bc.csv"),
            output=job["output"],
            **{k: s[k] for k in SEARCH_KEYS},
            max_lattice_points=float(s.get("max_lattice_points") or 1e8),
            csv_multiline=inputs["csv_multiline"],
            seed=cfg.practices.sample_seed,
            **{k: job[k] for k in ("sample", "categories", "ignored_types", "competitor_filter",
                                   "study_area")},
        )
        p.validate()
        return p

    def validate(self) -> None:
        """What the schema cannot check alone: keys that must agree with each other."""
        problems = []
        unknown = set(self.exclude_m) - set(self.categories)
        if unknown:
            problems.append(f"exclude_m names unknown categories: {sorted(unknown)}")
        missing = set(self.categories) - set(self.exclude_m)
        if missing:
            problems.append(f"exclude_m has no radius for: {sorted(missing)}")
        prev = self.grid_step_m
        for step in self.refine:
            if not 0 < step < prev:
                problems.append("refine steps must be positive and decreasing")
            prev = step
        if problems:
            raise ConfigError("; ".join(problems))

    @property
    def area(self) -> StudyArea:
        return StudyArea(**{k: float(v) for k, v in self.study_area.items()})


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


def _default_partitions(spark: SparkSession) -> int:
    return max(2, 4 * spark.sparkContext.defaultParallelism)


@dataclass
class CoffeeShopComputed:
    """What :func:`compute` returns. ``crimes`` and ``candidates`` are cached until the
    ``stack`` given to compute closes, so the writer reads them from the cache."""

    stations: pd.DataFrame
    top: pd.DataFrame
    rejects: DataFrame
    stats: Stats
    crimes: DataFrame | None = None
    candidates: DataFrame | None = None
    candidate_count: int = 0
    in_search_count: int = 0


def run(spark: SparkSession, cfg: Config) -> CoffeeShopResult:
    """Run the search as ``cfg`` says; writes ``cfg.job.output`` atomically when set."""
    p = CoffeeShopParams.from_config(cfg)
    report = RunReport("coffee_shops", params=asdict(p))
    area = p.area
    level = cfg.practices.storage_level
    check_lattice_size(p, 1)  # one station: refused before anything is read
    with report.step("read_inputs"):
        crime_in = read_crimes(spark, p.crimes, p.categories, p.ignored_types, area,
                               p.sample, p.seed, multiline=p.csv_multiline)
        stations_in = read_stations(spark, p.stations, area)
        competitors_in = read_competitors(spark, p.competitors, area, p.competitor_filter)
    if stations_in.points.empty:
        raise InputError(f"{p.stations}: no usable station ({_why_empty(stations_in)})")
    check_lattice_size(p, len(stations_in.points))
    with optional_output(spark, p.output, "coffee_shops") as out, ExitStack() as stack:
        # the crime file is parsed once: counts, search, rejects and maps all read this cache
        stack.enter_context(cached(crime_in.classified, "crime_rows", level, report))
        c = compute(spark, p, crime_in, stations_in, competitors_in, stack, level,
                    cfg.practices.local_checkpoint)
        report.merge(c.stats)
        result = CoffeeShopResult(top=c.top, stations=c.stations, candidates=c.candidates,
                                  rejects=c.rejects, report=report,
                                  candidate_count=c.candidate_count,
                                  in_search_count=c.in_search_count, output=p.output)
        if out is not None:
            _write(spark, result, c, competitors_in.points, out)
        publish(spark, out, report, cfg.practices.skew_ratio_threshold,
                cfg.job.get("max_reject_fraction"))
    log.info(report.summary())
    return result


def compute(spark: SparkSession, p: CoffeeShopParams, crime_in: CrimeInput,
            stations_in: PointInput, competitors_in: PointInput, stack: ExitStack,
            level: str | StorageLevel = StorageLevel.MEMORY_AND_DISK_DESER,
            local_checkpoint: bool = False) -> CoffeeShopComputed:
    """The read inputs in; the eligible stations, the ranked locations, every candidate and
    what was counted out. Writes nothing; the frames it caches live as long as ``stack``."""
    stats = Stats()
    with stats.step("count_inputs"):
        counted = crime_in.outcome_counts()
    outcomes = _by_kind(counted)
    points = {"stations": stations_in, "competitors": competitors_in}
    stats.inputs = {"crimes": sum(counted.values()),
                    **{src: len(pin.points) + len(pin.rejects) for src, pin in points.items()}}
    categories = outcomes.get("category", {})
    if not categories:
        raise InputError(f"{p.crimes}: no usable crime rows ({_why_no_crimes(counted)})")
    stats.counts["crimes_by_category"] = categories
    stats.counts["crimes_ignored_by_type"] = outcomes.get("ignored", {})
    stats.counts["competitors_outside_city_filter"] = competitors_in.out_of_scope
    stats.add_rejects("crimes", outcomes.get("reject", {}))
    for src, pin in points.items():
        stats.add_rejects(src, pin.rejects["reason"].value_counts().to_dict())
    rejects = crime_in.rejects.unionByName(rejects_frame(spark, pd.concat(
        [pin.rejects for pin in points.values()], ignore_index=True)))

    with stats.step("stations"):
        stations = evaluate_stations(stations_in.points, competitors_in.points,
                                     p.competitor_radius_m)
        eligible = stations[stations["eligible"]].reset_index(drop=True)
    stats.counts["stations_eligible"] = int(len(eligible))
    c = CoffeeShopComputed(stations=stations, top=_empty_top(p), rejects=rejects, stats=stats)
    if eligible.empty:
        stats.note("no eligible station: every station has a competitor within "
                   f"{p.competitor_radius_m:g} m")
        return c

    c.crimes = stack.enter_context(cached(crime_in.crimes, "crimes", level, stats))
    found, in_search = _search(spark, p, c.crimes, eligible, stats, local_checkpoint, stack)
    cands, n_candidates = stack.enter_context(cached_rows(found, "candidates", level, stats))
    with stats.step("rank"):
        top = rank(cands, p.top).toPandas()
    c.candidates = cands
    c.candidate_count = int(n_candidates)
    c.in_search_count = int(in_search.value)
    c.top = _describe_top(spark, p, top, c.crimes)
    stats.counts["lattice_points_in_search"] = c.in_search_count
    stats.outputs["candidates"] = c.candidate_count
    stats.outputs["top_locations"] = int(len(c.top))
    return c


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


def lattice_estimate(p: CoffeeShopParams, stations: int) -> float:
    """Lattice points the first search level visits at most: each station's disk, capped by
    the study area. Refinement levels add ``refine_keep`` boxes of a few cells each."""
    a = p.area
    per_station = math.pi * p.search_radius_m ** 2 / p.grid_step_m ** 2
    area_points = ((a.xmax - a.xmin) / p.grid_step_m + 1) * ((a.ymax - a.ymin) / p.grid_step_m + 1)
    total = min(stations * per_station, area_points)
    prev = p.grid_step_m
    for step in p.refine:
        total = max(total, p.refine_keep * (2 * prev / step + 1) ** 2)
        prev = step
    return total


def check_lattice_size(p: CoffeeShopParams, stations: int) -> None:
    """Refuse a search too large to finish (exit 2) before any Spark work."""
    n = lattice_estimate(p, stations)
    if n > p.max_lattice_points:
        raise ConfigError(
            f"the search lattice would have about {n:.2g} points ({stations} station(s), "
            f"{p.search_radius_m:g} m radius, {p.grid_step_m:g} m step), over the limit of "
            f"{p.max_lattice_points:.2g}: use a larger --grid-step-m (or --refine), or raise "
            "search.max_lattice_points in conf/jobs/coffee_shops.yaml")


def _empty_top(p: CoffeeShopParams) -> pd.DataFrame:
    cols = TOP_COLUMNS + [f"{c}_count" for c in p.categories] + ["count_radius_m"]
    return pd.DataFrame({c: pd.Series(dtype="object") for c in cols})


def _search(spark: SparkSession, p: CoffeeShopParams, crimes: DataFrame,
            eligible: pd.DataFrame, stats: Stats, local_checkpoint: bool, stack: ExitStack
            ) -> tuple[DataFrame, Accumulator[int]]:
    """Every candidate of the last search level, and the lattice points that level had in
    reach (counted as the candidates are computed)."""
    parts = int(p.tile_partitions or _default_partitions(spark))
    steps = [p.grid_step_m, *p.refine]
    checkpoint = Checkpointer(every=1, local=local_checkpoint, stack=stack)
    boxes = None
    candidates = None
    for level, step in enumerate(steps):
        in_search = spark.sparkContext.accumulator(0)
        label = f"level{level}_step{step:g}m" if len(steps) > 1 else "search"
        with stats.step(f"search_{label}"):
            found, measured = search_with_stats(spark, crimes, eligible, p.search_radius_m,
                                                p.exclude_m, step, p.tile_cells, parts, boxes,
                                                in_search)
            for name, skew in measured.skew.items():
                stats.skew[f"{label}.{name}"] = skew
            if measured.tiles:
                stats.counts[f"{label}.tiles"] = measured.tiles
                stats.counts[f"{label}.crime_tile_rows"] = measured.crime_tile_rows
            found = with_station_names(found, eligible, spark)
            if level < len(steps) - 1:
                # coarse level: keep the best cells and look again, finer, around them
                found = checkpoint(found, level + 1)
                best = rank(found, p.refine_keep).select("x", "y").collect()
                stats.counts[f"{label}.candidates"] = found.count()
                boxes = [(r["x"] - step, r["y"] - step, r["x"] + step, r["y"] + step)
                         for r in best]
                if not boxes:
                    candidates = found
                    break
            else:
                candidates = found
    assert candidates is not None
    return candidates, in_search


def _describe_top(spark: SparkSession, p: CoffeeShopParams, top: pd.DataFrame,
                  crimes: DataFrame) -> pd.DataFrame:
    if top.empty:
        return _empty_top(p)
    top = top.reset_index(drop=True)
    top.insert(0, "rank", np.arange(1, len(top) + 1))
    lon, lat = UTM10N.to_lonlat(top["x"].to_numpy(), top["y"].to_numpy())
    top["longitude"] = np.round(lon, 7)
    top["latitude"] = np.round(lat, 7)
    top = top.rename(columns={"distance_m": "distance_to_station_m"})
    top = crime_counts_near(top, crimes, p.count_radius_m, list(p.categories), spark)
    top["count_radius_m"] = p.count_radius_m
    return top[TOP_COLUMNS + [f"{c}_count" for c in p.categories] + ["count_radius_m"]]


DENSITY_CELL_M = 100.0


def _density(crimes: DataFrame) -> pd.DataFrame:
    cell = DENSITY_CELL_M
    return (
        crimes.groupBy(F.floor(F.col("x") / cell).alias("i"), F.floor(F.col("y") / cell).alias("j"))
        .count()
        .select(((F.col("i") + 0.5) * cell).alias("cx"), ((F.col("j") + 0.5) * cell).alias("cy"),
                F.col("count").alias("n"))
        .toPandas()
    )


def _write(spark: SparkSession, result: CoffeeShopResult, c: CoffeeShopComputed,
           competitors: pd.DataFrame, out: AtomicOutput) -> None:
    report = result.report
    if c.candidates is not None:
        with report.step("write_candidates"):
            out.write_parquet("candidates", c.candidates)
    if c.crimes is not None:
        result.extras["density"] = _density(c.crimes)
    with report.step("write_outputs"):
        if c.candidates is None:
            out.write_parquet("candidates", spark.createDataFrame(
                [], "x double, y double, station string, station_id int, distance_m double"))
        out.write_csv("top_locations.csv", result.top)
        stations_out = result.stations.rename(columns={"name": "station"})[
            ["station", "longitude", "latitude", "x", "y", "nearest_competitor",
             "nearest_competitor_m", "eligible"]]
        out.write_csv("stations.csv", stations_out)
        out.write_parquet("rejects", result.rejects, partitions=1)
        density = result.extras.get("density", pd.DataFrame(columns=["cx", "cy", "n"]))
        title = f"Coffee-shop search: top {len(result.top)} locations"
        with report.optional("map.png"):
            out.write_bytes("map.png", maps.map_png(result.stations, competitors, density,
                                                    result.top, DENSITY_CELL_M, title))
        with report.optional("map.html"):
            out.write_text("map.html", maps.map_html(result.stations, competitors, density,
                                                     result.top, DENSITY_CELL_M, title))
