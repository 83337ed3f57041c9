"""Readers for crimes, stations and competitors: every input row ends up used, ignored (a known
type outside the categories, or a competitor outside the city) or rejected with a reason.

Why one module: the three inputs (crimes, stations, competitors) each have their reader, rejects
and column rules here, and they share the file-format handling."""

from __future__ import annotations

import csv
import gzip
import json
from dataclasses import dataclass
from functools import reduce
from importlib import resources

import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from sparkfield.core.errors import InputError
from sparkfield.core.io import (
    CORRUPT_COL,
    as_record,
    corrupt_record,
    csv_options,
    read_csv_strings,
    read_text_file,
    require_path,
)
from sparkfield.core.practices import sample
from sparkfield.geo.crs import UTM10N


@dataclass(frozen=True)
class StudyArea:
    xmin: float
    ymin: float
    xmax: float
    ymax: float

    def contains_cols(self, x: Column, y: Column) -> Column:
        return x.between(self.xmin, self.xmax) & y.between(self.ymin, self.ymax)

    def contains(self, x: float, y: float) -> bool:
        return self.xmin <= x <= self.xmax and self.ymin <= y <= self.ymax


BUNDLED = "bundled:"


def bundled(name: str) -> str:
    """The name of a data file shipped inside the package (the embedded Vancouver demo), as
    ``bundled:vancouver/<name>``: readers take it wherever they take a path.

    Bundled files are read on the driver (from the package, zipped or not) and handed to Spark
    as data, never as a path: executors on other machines cannot see the driver's files."""
    return f"{BUNDLED}vancouver/{name}"


def is_bundled(path: str) -> bool:
    return path.startswith(BUNDLED)


def bundled_text(path: str) -> str:
    """The content of a ``bundled:`` file (gunzipped when it ends in .gz)."""
    rel = path[len(BUNDLED):]
    res = resources.files("sparkfield") / "resources"
    for part in rel.split("/"):
        res = res / part
    if not res.is_file():
        raise InputError(f"no bundled file {rel}")
    raw = res.read_bytes()
    if rel.endswith(".gz"):
        raw = gzip.decompress(raw)
    return raw.decode("utf-8", errors="replace")


def _records(text: str) -> list[str]:
    """CSV text split into records: a line continues the record while its quotes are open."""
    out: list[str] = []
    pending: list[str] = []
    for line in text.splitlines():
        pending.append(line)
        if "\n".join(pending).count('"') % 2 == 0:
            out.append("\n".join(pending))
            pending = []
    if pending:
        out.append("\n".join(pending))
    return out


def _header(record: str) -> list[str]:
    """The column names Spark's CSV reader takes from a header record (read here, so no job
    stops a Python worker half-way): an empty name becomes ``_c<i>`` and a name repeated
    (ignoring case) gets its index appended."""
    names = next(csv.reader([record]), [])
    lower = [n.lower() for n in names]
    repeated = {n for n in lower if lower.count(n) > 1}
    return [f"_c{i}" if not n else f"{n}{i}" if n.lower() in repeated else n
            for i, n in enumerate(names)]


def _csv_strings(spark: SparkSession, path: str, **options: str) -> DataFrame:
    """``read_csv_strings`` for a path or a ``bundled:`` file. A bundled file becomes one
    partition of records parsed by Spark's CSV reader exactly as the file would be."""
    if not is_bundled(path):
        return read_csv_strings(spark, path, **options)
    options = {k: v for k, v in csv_options(**options).items()
               # one record per element, already decoded
               if k.lower() not in ("multiline", "encoding", "charset")}
    records = _records(bundled_text(path))
    cols = _header(records[0]) if records else []
    if not cols:
        raise InputError(f"{path}: empty file or no header")
    # records as data, parsed by from_csv (the CSV reader's parser, one record per string): a
    # DataFrame, so this also works over Spark Connect. The reader skips blank lines; so does
    # this. One partition in file order, so a seeded sample picks the same rows everywhere.
    body = [(r,) for r in records[1:] if r.strip(_JAVA_BLANK)]
    lines = spark.createDataFrame(body, "value string").coalesce(1)
    ddl = ", ".join(f"`{c.replace('`', '``')}` string" for c in [*cols, CORRUPT_COL])
    parsed = F.from_csv("value", ddl, {"mode": "PERMISSIVE",
                                       "columnNameOfCorruptRecord": CORRUPT_COL, **options})
    return lines.select(parsed.alias("row")).select("row.*")


# what Java's String.trim removes: a CSV line of only these is blank to Spark's CSV reader
_JAVA_BLANK = "".join(chr(c) for c in range(33))


def _require(spark: SparkSession, path: str, what: str) -> None:
    if not is_bundled(path):
        require_path(spark, path, what)


def _find(columns: list[str], *names: str) -> str | None:
    lower = {c.lower().strip(): c for c in columns}
    for n in names:
        if n.lower() in lower:
            return lower[n.lower()]
    return None


def _num(col: str) -> Column:
    return F.trim(F.col(f"`{col}`")).try_cast("double")


def _blank(col: str) -> Column:
    return F.col(f"`{col}`").isNull() | (F.trim(F.col(f"`{col}`")) == "")


@dataclass
class CrimeInput:
    crimes: DataFrame  # x, y, category (one row per usable crime)
    ignored: DataFrame  # known types outside the categories
    rejects: DataFrame  # source, reason, record
    classified: DataFrame  # every row read (after sampling) with its outcome
    path: str  # the file read, for messages

    @classmethod
    def of(cls, classified: DataFrame, path: str) -> CrimeInput:
        """The rows of :func:`classify_crimes` split by outcome."""
        ok = F.col("reject_reason").isNull()
        crimes = classified.where(ok & F.col("__cat").isNotNull()).select(
            F.col("__x").alias("x"), F.col("__y").alias("y"), F.col("__cat").alias("category"))
        ignored = classified.where(ok & F.col("__cat").isNull()).select(
            F.col("__type").alias("type"))
        rejects = classified.where(~ok).select(
            F.lit("crimes").alias("source"), F.col("reject_reason").alias("reason"),
            F.col("__record").alias("record"))
        return cls(crimes=crimes, ignored=ignored, rejects=rejects, classified=classified,
                   path=path)

    def outcome_counts(self) -> dict[str, int]:
        """Rows per outcome in one pass: a category, ``ignored:<type>`` or ``reject:<reason>``."""
        outcome = (
            F.when(F.col("reject_reason").isNotNull(), F.concat(F.lit("reject:"), "reject_reason"))
            .when(F.col("__cat").isNotNull(), F.col("__cat"))
            .otherwise(F.concat(F.lit("ignored:"), F.coalesce("__type", F.lit(""))))
        )
        rows = self.classified.groupBy(outcome.alias("o")).count().collect()
        return {r["o"]: int(r["count"]) for r in rows}


def read_crimes(
    spark: SparkSession,
    path: str,
    categories: dict[str, list[str]],
    ignored_types: list[str],
    area: StudyArea,
    fraction: float | None = None,
    seed: int = 42,
    multiline: bool = True,
    encoding: str = "utf-8",
) -> CrimeInput:
    """Police open-data CSV (``TYPE,...,X,Y``) or the same with ``Latitude``/``Longitude``
    (or ``LAT``/``LON``), each row used, ignored or rejected (:func:`classify_crimes`).
    ``multiline=False`` reads the file line by line (splittable; a quoted line break then
    makes malformed rows); ``encoding``: the file's (see :func:`read_csv_strings`)."""
    raw = sample(_csv_strings(spark, path, multiLine=str(multiline).lower(),
                              encoding=encoding), fraction, seed)
    columns = find_crime_columns(raw.columns, path)
    return CrimeInput.of(classify_crimes(raw, columns, categories, ignored_types, area), path)


@dataclass(frozen=True)
class CrimeColumns:
    """The columns of a crimes file that classifying reads; a coordinate column the file
    lacks is None."""

    type: str
    x: str | None = None
    y: str | None = None
    latitude: str | None = None
    longitude: str | None = None

    @property
    def has_xy(self) -> bool:
        return self.x is not None and self.y is not None

    @property
    def has_lonlat(self) -> bool:
        return self.latitude is not None and self.longitude is not None


def find_crime_columns(columns: list[str], path: str) -> CrimeColumns:
    """The type and coordinate columns among ``columns`` (any case); :class:`InputError`
    when there is no type column or neither X/Y nor Latitude/Longitude."""
    cols = [c for c in columns if c != CORRUPT_COL]
    type_col = _find(cols, "TYPE", "type", "offence", "crime_type")
    if type_col is None:
        raise InputError(f"{path}: no TYPE column (columns: {', '.join(cols)})")
    found = CrimeColumns(type_col, x=_find(cols, "X"), y=_find(cols, "Y"),
                         latitude=_find(cols, "Latitude", "LAT"),
                         longitude=_find(cols, "Longitude", "LON", "LONG"))
    if not (found.has_xy or found.has_lonlat):
        raise InputError(f"{path}: needs X/Y or Latitude/Longitude columns")
    return found


@dataclass(frozen=True)
class Coordinates:
    """A position as column expressions over a row's text columns."""

    x: Column
    y: Column
    non_numeric: Column  # a value is given but is not a number
    found: Column  # x and y hold a usable position


def _pair(a: str, b: str) -> Coordinates:
    """Two text columns read as numbers; usable when both are numeric and non-zero."""
    av, bv = _num(a), _num(b)
    zero = F.lit(0.0)
    return Coordinates(
        x=av, y=bv,
        non_numeric=(~_blank(a) & av.isNull()) | (~_blank(b) & bv.isNull()),
        found=av.isNotNull() & bv.isNotNull() & (av != zero) & (bv != zero),
    )


def crime_coordinates(columns: CrimeColumns) -> Coordinates:
    """A crime's position in EPSG:26910 metres: X/Y where both are numeric and non-zero,
    otherwise latitude/longitude projected; a value that is not a number makes the row
    non-numeric only when no usable pair is left."""
    none = F.lit(None).cast("double")
    xy = _pair(columns.x, columns.y) if columns.has_xy else \
        Coordinates(none, none, F.lit(False), F.lit(False))
    if not columns.has_lonlat:
        return xy
    ll = _pair(columns.longitude, columns.latitude)  # degrees: x longitude, y latitude
    px, py = UTM10N.to_xy_cols(ll.x, ll.y)
    return Coordinates(
        x=F.when(xy.found, xy.x).when(ll.found, px),
        y=F.when(xy.found, xy.y).when(ll.found, py),
        non_numeric=F.when(xy.found, F.lit(False)).otherwise(
            ll.non_numeric | (xy.non_numeric & ~ll.found)),
        found=xy.found | ll.found,
    )


def classify_crimes(raw: DataFrame, columns: CrimeColumns, categories: dict[str, list[str]],
                    ignored_types: list[str], area: StudyArea) -> DataFrame:
    """Every row of ``raw`` (text columns as read) with its outcome: ``__x``, ``__y`` (metres),
    ``__cat`` (the category of its type, null outside them), ``__type``, ``reject_reason``
    (null for a used or ignored row) and ``__record`` (the raw row, rejected rows only)."""
    category_of = F.create_map(
        *[F.lit(v) for cat, types in categories.items() for t in types for v in (t, cat)]
    )
    crime_type = F.trim(F.col(f"`{columns.type}`"))
    at = crime_coordinates(columns)
    staged = raw.select("*", at.x.alias("__x"), at.y.alias("__y"),
                        category_of[crime_type].alias("__cat"), crime_type.alias("__type"))
    reason = _reject_reason(raw, columns, at, crime_type, ignored_types, area)
    # narrow rows: the raw text is kept (as JSON) only for rejected rows, so caching this
    # frame costs a few columns per crime, not the whole CSV line
    return staged.withColumn("reject_reason", reason).select(
        "__x", "__y", "__cat", "__type", "reject_reason",
        F.when(F.col("reject_reason").isNotNull(), as_record(raw)).alias("__record"),
    )


def _reject_reason(raw: DataFrame, columns: CrimeColumns, at: Coordinates, crime_type: Column,
                   ignored_types: list[str], area: StudyArea) -> Column:
    """Why a staged row is rejected, first reason first; null for a row used or ignored (a
    known type outside the categories)."""
    known = F.array_contains(F.array(*[F.lit(t) for t in ignored_types] or [F.lit("")]),
                             crime_type)
    return (
        F.when(corrupt_record(raw).isNotNull(), "malformed row")
        .when(_blank(columns.type), "missing crime type")
        .when(F.col("__cat").isNull() & ~known, "unknown crime type")
        .when(F.col("__cat").isNull(), None)
        .when(at.non_numeric, "non-numeric coordinates")
        .when(~at.found, "missing or zero coordinates")
        .when(~area.contains_cols(F.col("__x"), F.col("__y")), "outside study area")
    )


@dataclass
class PointInput:
    points: pd.DataFrame  # name, x, y, longitude, latitude
    rejects: pd.DataFrame  # source, reason, record
    out_of_scope: int = 0


def _points_from_lonlat(
    frame: pd.DataFrame, name_col: str | None, lon_col: str, lat_col: str, source: str,
    area: StudyArea, default_name: str,
) -> PointInput:
    good, bad = [], []
    for i, row in enumerate(frame.to_dict("records")):
        corrupt = row.pop(CORRUPT_COL, None)
        if not _is_blank(corrupt):
            bad.append((source, "malformed row", str(corrupt)))
            continue
        record = json.dumps(row, default=str)
        name = str(row.get(name_col) or "").strip() if name_col else ""
        name = name or f"{default_name} {i + 1}"
        lon = pd.to_numeric(pd.Series([row.get(lon_col)]), errors="coerce").iloc[0]
        lat = pd.to_numeric(pd.Series([row.get(lat_col)]), errors="coerce").iloc[0]
        raw_lon, raw_lat = row.get(lon_col), row.get(lat_col)
        if (pd.isna(lon) and not _is_blank(raw_lon)) or (pd.isna(lat) and not _is_blank(raw_lat)):
            bad.append((source, "non-numeric coordinates", record))
            continue
        if pd.isna(lon) or pd.isna(lat) or lon == 0 or lat == 0:
            bad.append((source, "missing or zero coordinates", record))
            continue
        x, y = UTM10N.to_xy(lon, lat)
        x, y = float(x), float(y)
        if not area.contains(x, y):
            bad.append((source, "outside study area", record))
            continue
        good.append((name, x, y, float(lon), float(lat)))
    return PointInput(
        pd.DataFrame(good, columns=["name", "x", "y", "longitude", "latitude"]),
        pd.DataFrame(bad, columns=["source", "reason", "record"]),
    )


def _is_blank(v: object) -> bool:
    return v is None or (isinstance(v, float) and pd.isna(v)) or str(v).strip() == ""


def _small_csv(spark: SparkSession, path: str, **options: str) -> pd.DataFrame:
    return _csv_strings(spark, path, **options).toPandas()


def _geojson_stations(text: str, path: str, area: StudyArea) -> PointInput:
    """Point features of a GeoJSON FeatureCollection; any other geometry is a reject."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        line = f"line {exc.lineno}: " if hasattr(exc, "lineno") else ""
        raise InputError(f"{path}: not valid GeoJSON ({line}{getattr(exc, 'msg', exc)})") \
            from None
    features = doc.get("features") if isinstance(doc, dict) else None
    if not isinstance(features, list):
        raise InputError(f"{path}: not a GeoJSON FeatureCollection (no features list)")
    rows, bad = [], []
    for feat in features:
        feat = feat if isinstance(feat, dict) else {}
        props = feat.get("properties") or {}
        geom = feat.get("geometry") or {}
        coords = geom.get("coordinates") if isinstance(geom, dict) else None
        kind = geom.get("type") if isinstance(geom, dict) else None
        if kind != "Point" or not isinstance(coords, list) or len(coords) < 2 \
                or any(isinstance(c, (list, dict)) for c in coords):
            bad.append(("stations", f"not a Point geometry ({kind or 'none'})",
                        json.dumps(feat, default=str)[:2000]))
            continue
        rows.append({"station": props.get("station") or props.get("name"),
                     "longitude": coords[0], "latitude": coords[1]})
    frame = pd.DataFrame(rows, columns=["station", "longitude", "latitude"])
    out = _points_from_lonlat(frame, "station", "longitude", "latitude", "stations", area,
                              "station")
    if bad:
        out.rejects = pd.concat([out.rejects, pd.DataFrame(bad, columns=out.rejects.columns)],
                                ignore_index=True)
    return out


def read_stations(spark: SparkSession, path: str, area: StudyArea,
                  encoding: str = "utf-8") -> PointInput:
    """Stations as CSV (``station,longitude,latitude``, in ``encoding``) or GeoJSON point
    features."""
    _require(spark, path, "stations file")
    if path.endswith((".geojson", ".json")):
        return _geojson_stations(bundled_text(path) if is_bundled(path)
                                 else read_text_file(spark, path), path, area)
    frame = _small_csv(spark, path, encoding=encoding)
    cols = [c for c in frame.columns if c != CORRUPT_COL]
    name_col = _find(cols, "station", "name")
    lon_col, lat_col = _find(cols, "longitude", "lon", "long"), _find(cols, "latitude", "lat")
    if lon_col is None or lat_col is None:
        raise InputError(f"{path}: stations need longitude/latitude columns")
    return _points_from_lonlat(frame, name_col, lon_col, lat_col, "stations", area, "station")


def read_competitors(
    spark: SparkSession, path: str, area: StudyArea, city_filter: dict[str, str],
    encoding: str = "utf-8",
) -> PointInput:
    """The Starbucks ``directory.csv`` schema (filtered to the city) or a plain lon/lat CSV,
    in ``encoding``."""
    _require(spark, path, "competitors file")
    frame = _small_csv(spark, path, encoding=encoding)
    cols = [c for c in frame.columns if c != CORRUPT_COL]
    lon_col, lat_col = _find(cols, "Longitude", "lon", "long"), _find(cols, "Latitude", "lat")
    if lon_col is None or lat_col is None:
        raise InputError(f"{path}: competitors need Longitude/Latitude columns")
    out_of_scope = 0
    filters = {k: v for k, v in city_filter.items() if _find(cols, k)}
    if filters and len(filters) == len(city_filter):
        keep = reduce(
            lambda acc, kv: acc & (frame[_find(cols, kv[0])].fillna("").str.strip() == kv[1]),
            filters.items(),
            pd.Series(True, index=frame.index),
        )
        if CORRUPT_COL in frame:
            keep = keep | frame[CORRUPT_COL].notna()
        out_of_scope = int((~keep).sum())
        frame = frame[keep]
    name_col = _find(cols, "Store Name", "name", "store")
    out = _points_from_lonlat(frame, name_col, lon_col, lat_col, "competitors", area, "competitor")
    out.out_of_scope = out_of_scope
    return out
