"""The coffee-shop job: read -> eligible stations -> tiled lattice search -> rank -> write."""

from __future__ import annotations

import logging
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sparkfield.core.conf import Config
from sparkfield.core.errors import InputError
from sparkfield.core.io import AtomicOutput, optional_output, rejects_from_rows
from sparkfield.core.practices import cached
from sparkfield.core.report import RunReport, Stats
from sparkfield.core.spark_ui import publish
from sparkfield.geo import maps
from sparkfield.geo.inputs import (
    CrimeInput,
    PointInput,
    StudyArea,
    bundled,
    read_competitors,
    read_crimes,
    read_stations,
)
from sparkfield.geo.locations import (
    Extent,
    SearchContext,
    best_locations_pandas,
    check_lattice_size,
    site_columns,
)
from sparkfield.geo.params import CoffeeShopsParams, parse

log = logging.getLogger("sparkfield.geo")

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
    check_lattice_size(p.search, 1, _extent(p))  # one station: refused before anything is read
    with report.step("read_inputs"):
        crime_in, stations_in, competitors_in = read_inputs(spark, p, paths, seed)
    check_lattice_size(p.search, len(stations_in.points), _extent(p))
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
                           seed, multiline=p.inputs.csv_multiline,
                           encoding=p.inputs.csv_encoding)
    stations_in = read_stations(spark, paths.stations, area, encoding=p.inputs.csv_encoding)
    competitors_in = read_competitors(spark, paths.competitors, area, p.competitor_filter,
                                      encoding=p.inputs.csv_encoding)
    if stations_in.points.empty:
        raise InputError(f"{paths.stations}: no usable station ({_why_empty(stations_in)})")
    return crime_in, stations_in, competitors_in


def compute(spark: SparkSession, p: CoffeeShopsParams, crime_in: CrimeInput,
            stations_in: PointInput, competitors_in: PointInput, stack: ExitStack,
            level: str | StorageLevel = StorageLevel.MEMORY_AND_DISK_DESER,
            local_checkpoint: bool = False) -> CoffeeShopComputed:
    """The read inputs in; the eligible stations, the ranked locations, every candidate, the
    crime density and what was counted out. Writes nothing; the frames it caches live as
    long as ``stack``. The search and ranking are :func:`best_locations_pandas`'."""
    stats = Stats()
    rejects = _count_inputs(spark, p, crime_in, stations_in, competitors_in, stats)
    ctx = SearchContext(stack, stats, level, local_checkpoint)
    top = best_locations_pandas(crime_in.crimes, stations_in.points, competitors_in.points,
                                **asdict(p.search), context=ctx)
    c = CoffeeShopComputed(stations=ctx.stations, top=top[_top_columns(p)], rejects=rejects,
                           stats=stats, crimes=ctx.crimes, candidates=ctx.candidates,
                           candidate_count=ctx.candidate_count,
                           in_search_count=ctx.in_search_count)
    if ctx.crimes is not None:
        with stats.step("density"):
            c.density = crime_density(ctx.crimes)
    return c


def _count_inputs(spark: SparkSession, p: CoffeeShopsParams, crime_in: CrimeInput,
                  stations_in: PointInput, competitors_in: PointInput, stats: Stats
                  ) -> DataFrame:
    """Every input row counted into ``stats`` as used, ignored or rejected; the rejects of
    all three inputs. :class:`InputError` when no crime row is usable."""
    with stats.step("count_inputs"):
        return _counted_inputs(spark, crime_in, stations_in, competitors_in, stats)


def _counted_inputs(spark: SparkSession, crime_in: CrimeInput, stations_in: PointInput,
                    competitors_in: PointInput, stats: Stats) -> DataFrame:
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


def _extent(p: CoffeeShopsParams) -> Extent:
    a = p.study_area
    return a.xmin, a.ymin, a.xmax, a.ymax


def _top_columns(p: CoffeeShopsParams) -> list[str]:
    return site_columns(list(p.categories))


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
