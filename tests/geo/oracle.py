"""Brute force: every lattice point against every station and every crime, all pairs, numpy.
Independent of the tiling, the interval rasteriser and Spark."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd


def brute_force(
    stations: pd.DataFrame,  # eligible, in tie-break order: name, x, y
    crimes: pd.DataFrame,  # x, y, category
    step: float,
    radius: float,
    exclude_m: dict[str, float],
) -> pd.DataFrame:
    sx, sy = stations["x"].to_numpy(), stations["y"].to_numpy()
    i0 = math.floor((sx.min() - radius) / step) - 1
    i1 = math.ceil((sx.max() + radius) / step) + 1
    j0 = math.floor((sy.min() - radius) / step) - 1
    j1 = math.ceil((sy.max() + radius) / step) + 1
    ii, jj = np.meshgrid(np.arange(i0, i1 + 1), np.arange(j0, j1 + 1))
    px, py = ii.ravel() * step, jj.ravel() * step
    d2 = (px[:, None] - sx[None, :]) ** 2 + (py[:, None] - sy[None, :]) ** 2
    k = d2.argmin(axis=1)  # first minimum = tie-break order
    best = d2[np.arange(len(px)), k]
    keep = best <= radius * radius
    px, py, k, best = px[keep], py[keep], k[keep], best[keep]
    ok = np.ones(len(px), dtype=bool)
    for cat, r in exclude_m.items():
        c = crimes[crimes["category"] == cat]
        cx, cy = c["x"].to_numpy(), c["y"].to_numpy()
        for s in range(0, len(cx), 2000):
            dx = px[:, None] - cx[None, s:s + 2000]
            dy = py[:, None] - cy[None, s:s + 2000]
            ok &= ~((dx * dx + dy * dy) <= r * r).any(axis=1)
    return pd.DataFrame({
        "x": px[ok], "y": py[ok], "station_id": k[ok].astype(np.int32),
        "distance_m": np.sqrt(best[ok]),
    })
