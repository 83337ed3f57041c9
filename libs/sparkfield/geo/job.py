"""The coffee-shop job: read -> eligible stations -> tiled lattice search -> rank -> write."""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sparkfield.core.conf import Config, ConfigError
from sparkfield.core.io import AtomicOutput, InputError, optional_output
from sparkfield.core.practices import Checkpointer, cached, cached_rows
from sparkfield.core.report import RunReport
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
            grid_step_m=s["grid_step_m"],
            search_radius_m=s["search_radius_m"],
            competitor_radius_m=s["competitor_radius_m"],
            exclude_m=s["exclude_m"],
            top=s["top"],
            count_radius_m=s["count_radius_m"],
            tile_cells=s["tile_cells"],
            tile_partitions=s["tile_partitions"],
            refine=s["refine"],
            refine_keep=s["refine_keep"],
            sample=job["sample"],
            seed=cfg.practices.sample_seed,
            categories=job["categories"],
            ignored_types=job["ignored_types"],
            competitor_filter=job["competitor_filter"],
            study_area=job["study_area"],
            max_lattice_points=float(s.get("max_lattice_points") or 1e8),
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


def run(spark: SparkSession, cfg: Config) -> CoffeeShopResult:
    """Run the search as ``cfg`` says; writes ``cfg.job.output`` atomically when set."""
    p = CoffeeShopParams.from_config(cfg)
    report = RunReport("coffee_shops", params=asdict(p))
    area = p.area
    check_lattice_size(p, 1)  # one station: refused before anything is read
    with report.step("read_inputs"):
        crime_in = read_crimes(spark, p.crimes, p.categories, p.ignored_types, area,
                               p.sample, p.seed)
        stations_in = read_stations(spark, p.stations, area)
        competitors_in = read_competitors(spark, p.competitors, area, p.competitor_filter)
    if stations_in.points.empty:
        raise InputError(f"{p.stations}: no usable station ({_why_empty(stations_in)})")
    check_lattice_size(p, len(stations_in.points))
    # the crime file is parsed once: counts, search, rejects and maps all read this cache
    with cached(crime_in.classified, "crime_rows", cfg.practices.storage_level, report):
        return _run(spark, cfg, p, report, crime_in, stations_in, competitors_in)


def _run(spark: SparkSession, cfg: Config, p: CoffeeShopParams, report: RunReport,
         crime_in: CrimeInput, stations_in: PointInput, competitors_in: PointInput
         ) -> CoffeeShopResult:
    with report.step("count_inputs"):
        outcomes = crime_in.outcome_counts()
    report.inputs = {
        "crimes": sum(outcomes.values()),
        "stations": len(stations_in.points) + len(stations_in.rejects),
        "competitors": len(competitors_in.points) + len(competitors_in.rejects),
    }
    report.counts["crimes_by_category"] = {k: v for k, v in outcomes.items() if ":" not in k}
    if not report.counts["crimes_by_category"]:
        raise InputError(f"{p.crimes}: no usable crime rows ({_why_no_crimes(outcomes)})")
    report.counts["crimes_ignored_by_type"] = {
        k.split(":", 1)[1]: v for k, v in outcomes.items() if k.startswith("ignored:")
    }
    report.counts["competitors_outside_city_filter"] = competitors_in.out_of_scope
    report.add_rejects("crimes", {k.split(":", 1)[1]: v for k, v in outcomes.items()
                                  if k.startswith("reject:")})
    for src, pin in (("stations", stations_in), ("competitors", competitors_in)):
        report.add_rejects(src, pin.rejects["reason"].value_counts().to_dict())
    rejects = crime_in.rejects.unionByName(
        rejects_frame(spark, pd.concat([stations_in.rejects, competitors_in.rejects],
                                       ignore_index=True))
    )

    with report.step("stations"):
        stations = evaluate_stations(stations_in.points, competitors_in.points,
                                     p.competitor_radius_m)
        eligible = stations[stations["eligible"]].reset_index(drop=True)
    report.counts["stations_eligible"] = int(len(eligible))

    result = CoffeeShopResult(top=_empty_top(p), stations=stations, candidates=None,
                              rejects=rejects, report=report, output=p.output)
    with optional_output(spark, p.output, "coffee_shops") as out:
        if eligible.empty:
            report.note("no eligible station: every station has a competitor within "
                        f"{p.competitor_radius_m:g} m")
        else:
            with cached(crime_in.crimes, "crimes", cfg.practices.storage_level, report) as crimes:
                _search_and_rank(spark, cfg, p, crimes, eligible, result, out)
                if out is not None:
                    result.extras["density"] = _density(crimes)
        if out is not None:
            _write(spark, result, competitors_in.points, out)
        publish(spark, out, report, cfg.practices.skew_ratio_threshold,
                cfg.job.get("max_reject_fraction"))
    log.info(report.summary())
    return result


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


def _search_and_rank(
    spark: SparkSession, cfg: Config, p: CoffeeShopParams, crimes: DataFrame,
    eligible: pd.DataFrame, result: CoffeeShopResult, out: AtomicOutput | None,
) -> None:
    report = result.report
    parts = int(p.tile_partitions or _default_partitions(spark))
    steps = [p.grid_step_m, *p.refine]
    checkpoint = Checkpointer(every=1, local=cfg.practices.local_checkpoint)
    boxes = None
    candidates = None
    for level, step in enumerate(steps):
        # lattice points in reach at this level (the last level's is the one reported)
        in_search = spark.sparkContext.accumulator(0)
        label = f"level{level}_step{step:g}m" if len(steps) > 1 else "search"
        with report.step(f"search_{label}"):
            found, stats = search_with_stats(spark, crimes, eligible, p.search_radius_m,
                                             p.exclude_m, step, p.tile_cells, parts, boxes,
                                             in_search)
            stats.to_report(report, label)
            found = with_station_names(found, eligible, spark)
            if level < len(steps) - 1:
                # coarse level: keep the best cells and look again, finer, around them
                found = checkpoint(found, level + 1)
                best = rank(found, p.refine_keep).select("x", "y").collect()
                report.counts[f"{label}.candidates"] = found.count()
                boxes = [(r["x"] - step, r["y"] - step, r["x"] + step, r["y"] + step)
                         for r in best]
                if not boxes:
                    candidates = found
                    break
            else:
                candidates = found
    assert candidates is not None
    with cached_rows(candidates, "candidates", cfg.practices.storage_level,
                     report) as (cands, n_candidates):
        with report.step("rank"):
            top = rank(cands, p.top).toPandas()
        result.candidate_count = int(n_candidates)
        result.in_search_count = int(in_search.value)
        result.top = _describe_top(spark, p, top, crimes)
        if out is not None:
            with report.step("write_candidates"):
                out.write_parquet("candidates", cands)
    report.counts["lattice_points_in_search"] = result.in_search_count
    report.outputs["candidates"] = result.candidate_count
    report.outputs["top_locations"] = int(len(result.top))
    result.candidates = candidates


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


def _write(spark: SparkSession, result: CoffeeShopResult, competitors: pd.DataFrame,
           out: AtomicOutput) -> None:
    report = result.report
    with report.step("write_outputs"):
        if result.candidates is None:
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
        out.write_bytes("map.png", maps.map_png(result.stations, competitors, density,
                                                result.top, DENSITY_CELL_M, title))
        out.write_text("map.html", maps.map_html(result.stations, competitors, density,
                                                 result.top, DENSITY_CELL_M, title))
