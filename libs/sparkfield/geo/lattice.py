"""The exact lattice kernel and tile planning, in numpy (runs inside Spark's Python workers).

A tile is a square block of ``tile_cells x tile_cells`` lattice points ``(i*step, j*step)``.
For one tile the kernel rasterises, exactly:

* the nearest eligible station of every point and its distance (ties: station order);
* the union of every crime's exclusion disk, as per-row column intervals accumulated in a
  difference array. Interval ends come from a square root and are then corrected with the
  same squared-distance test a brute-force check uses, so a point exactly on a radius is
  decided as ``dx*dx + dy*dy <= r*r`` decides it.

Cost is O(points + crimes * rows per disk) per tile instead of O(points * crimes).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Lattice:
    step: float
    tile_cells: int

    @property
    def tile_m(self) -> float:
        return self.step * self.tile_cells

    def index_range(self, lo: float, hi: float) -> tuple[int, int]:
        """Lattice indices k with lo <= k*step <= hi (may be empty: first > last)."""
        a = math.ceil(lo / self.step)
        b = math.floor(hi / self.step)
        while (a - 1) * self.step >= lo:
            a -= 1
        while a * self.step < lo:
            a += 1
        while (b + 1) * self.step <= hi:
            b += 1
        while b * self.step > hi:
            b -= 1
        return a, b

    def tile_of(self, k: int) -> int:
        return k // self.tile_cells

    def tile_bounds(self, t: int) -> tuple[float, float]:
        """Coordinates of the first and last lattice line of tile index ``t``."""
        k0 = t * self.tile_cells
        return k0 * self.step, (k0 + self.tile_cells - 1) * self.step


def _rect_dist2(px: float, py: float, x0: float, x1: float, y0: float, y1: float) -> float:
    dx = max(x0 - px, 0.0, px - x1)
    dy = max(y0 - py, 0.0, py - y1)
    return dx * dx + dy * dy


def plan_tiles(
    lattice: Lattice,
    stations_xy: np.ndarray,
    radius: float,
    boxes: Sequence[tuple[float, float, float, float]] | None = None,
) -> list[tuple[int, int]]:
    """Tiles that hold at least one lattice point within ``radius`` of a station (and inside
    one of ``boxes`` when given)."""
    tiles: set[tuple[int, int]] = set()
    r2 = radius * radius
    for sx, sy in stations_xy:
        i0, i1 = lattice.index_range(sx - radius, sx + radius)
        j0, j1 = lattice.index_range(sy - radius, sy + radius)
        if i0 > i1 or j0 > j1:
            continue
        for ti in range(lattice.tile_of(i0), lattice.tile_of(i1) + 1):
            x0, x1 = lattice.tile_bounds(ti)
            for tj in range(lattice.tile_of(j0), lattice.tile_of(j1) + 1):
                y0, y1 = lattice.tile_bounds(tj)
                if _rect_dist2(sx, sy, x0, x1, y0, y1) <= r2:
                    tiles.add((ti, tj))
    if boxes is not None:
        keep = set()
        for ti, tj in tiles:
            x0, x1 = lattice.tile_bounds(ti)
            y0, y1 = lattice.tile_bounds(tj)
            if any(bx0 <= x1 and bx1 >= x0 and by0 <= y1 and by1 >= y0
                   for bx0, by0, bx1, by1 in boxes):
                keep.add((ti, tj))
        tiles = keep
    return sorted(tiles)


@dataclass
class TileResult:
    x: np.ndarray
    y: np.ndarray
    station: np.ndarray  # index into the station arrays
    distance: np.ndarray
    in_search: int  # lattice points within the search radius (before crime filtering)


def _exclusion_mask(
    xs: np.ndarray, ys: np.ndarray, crime_x: np.ndarray, crime_y: np.ndarray,
    crime_r: np.ndarray, i0: int, j0: int, step: float,
) -> np.ndarray:
    """Boolean raster (rows = y, cols = x): True where some crime lies within its radius."""
    nj, ni = len(ys), len(xs)
    if len(crime_x) == 0:
        return np.zeros((nj, ni), dtype=bool)
    cx, cy, r = (np.asarray(a, dtype=np.float64) for a in (crime_x, crime_y, crime_r))
    r2 = r * r
    # rows each disk touches, clipped to the tile
    jlo = np.maximum(np.ceil((cy - r) / step).astype(np.int64) - 1, j0)
    jhi = np.minimum(np.floor((cy + r) / step).astype(np.int64) + 1, j0 + nj - 1)
    n_rows = np.maximum(jhi - jlo + 1, 0)
    keep = n_rows > 0
    if not keep.any():
        return np.zeros((nj, ni), dtype=bool)
    cx, cy, r2, jlo, n_rows = cx[keep], cy[keep], r2[keep], jlo[keep], n_rows[keep]
    owner = np.repeat(np.arange(len(cx)), n_rows)
    offsets = np.arange(owner.size) - np.repeat(np.cumsum(n_rows) - n_rows, n_rows)
    j = jlo[owner] + offsets
    dy = j * step - cy[owner]
    w2 = r2[owner] - dy * dy
    row_ok = w2 >= 0
    owner, j, dy, w2 = owner[row_ok], j[row_ok], dy[row_ok], w2[row_ok]
    ccx, rr2 = cx[owner], r2[owner]
    w = np.sqrt(w2)
    lo = np.ceil((ccx - w) / step).astype(np.int64)
    hi = np.floor((ccx + w) / step).astype(np.int64)
    dy2 = dy * dy

    def inside(k: np.ndarray) -> np.ndarray:
        d = k * step - ccx
        return d * d + dy2 <= rr2

    # one-cell corrections make the ends agree with the exact squared-distance test
    lo = np.where(inside(lo - 1), lo - 1, lo)
    lo = np.where(~inside(lo), lo + 1, lo)
    hi = np.where(inside(hi + 1), hi + 1, hi)
    hi = np.where(~inside(hi), hi - 1, hi)
    lo = np.maximum(lo, i0)
    hi = np.minimum(hi, i0 + ni - 1)
    ok = lo <= hi
    rows = (j[ok] - j0).astype(np.int64)
    width = ni + 1
    starts = rows * width + (lo[ok] - i0)
    ends = rows * width + (hi[ok] - i0 + 1)
    diff = np.bincount(starts, minlength=nj * width) - np.bincount(ends, minlength=nj * width)
    cover = np.cumsum(diff.reshape(nj, width)[:, :ni], axis=1)
    return cover > 0


def tile_candidates(
    ti: int,
    tj: int,
    lattice: Lattice,
    station_x: np.ndarray,
    station_y: np.ndarray,
    radius: float,
    crime_x: np.ndarray,
    crime_y: np.ndarray,
    crime_r: np.ndarray,
    boxes: Iterable[tuple[float, float, float, float]] | None = None,
) -> TileResult:
    """Passing lattice points of one tile.

    Stations must be given in tie-break order (name, then x, then y): on equal distance the
    first one wins."""
    tc, step = lattice.tile_cells, lattice.step
    i0, j0 = ti * tc, tj * tc
    xs = np.arange(i0, i0 + tc, dtype=np.int64) * step
    ys = np.arange(j0, j0 + tc, dtype=np.int64) * step
    x0, x1, y0, y1 = xs[0], xs[-1], ys[0], ys[-1]
    r2 = radius * radius
    best = np.full((tc, tc), np.inf)
    owner = np.full((tc, tc), -1, dtype=np.int32)
    for k, (sx, sy) in enumerate(zip(station_x, station_y, strict=True)):
        if _rect_dist2(sx, sy, x0, x1, y0, y1) > r2:
            continue
        dx2 = (xs - sx) ** 2
        dy2 = (ys - sy) ** 2
        d2 = dy2[:, None] + dx2[None, :]
        closer = d2 < best
        best = np.where(closer, d2, best)
        owner = np.where(closer, k, owner)
    within = best <= r2
    in_search = int(within.sum())
    if boxes is not None:
        box_mask = np.zeros((tc, tc), dtype=bool)
        for bx0, by0, bx1, by1 in boxes:
            box_mask |= ((ys >= by0) & (ys <= by1))[:, None] & ((xs >= bx0) & (xs <= bx1))[None, :]
        within &= box_mask
        in_search = int(within.sum())
    if in_search:
        within &= ~_exclusion_mask(xs, ys, crime_x, crime_y, crime_r, i0, j0, step)
    jj, ii = np.nonzero(within)
    return TileResult(
        x=xs[ii], y=ys[jj], station=owner[jj, ii], distance=np.sqrt(best[jj, ii]),
        in_search=in_search,
    )
