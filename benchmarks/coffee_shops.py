"""Coffee-shop search: the Spark job against the obvious alternatives, measured in one run.

(a) small case (all eligible stations, 10 m grid, 2016 crimes): the job end to end vs an
    all-pairs pure-Python loop like the original analysis (timed on a slice, rate
    extrapolated) and a single-process KD-tree; results compared.
(b) scale: 1 m grid over every eligible station with the 2016 crimes scaled up to ~530,000
    rows by jittered replication (copies moved by N(0, 30 m)); the job end to end (read,
    search, rank, write candidates, maps, report), first at this size in the session and then
    again with the JVM's JIT warm, vs a single-process KD-tree (scipy cKDTree, one core).

Usage: python benchmarks/coffee_shops.py [--cores 2] [--scale-rows 530000] [--skip-scale]
       [--repeats 2]
"""

from __future__ import annotations

import argparse
import io
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from machine import describe
from scipy.spatial import cKDTree

from sparkfield.core.conf import load_config
from sparkfield.core.session import build_session
from sparkfield.geo import run
from sparkfield.geo.inputs import bundled, bundled_text

ROOT = Path(__file__).resolve().parents[1]
CATS = {
    "theft": ["Theft from Vehicle", "Other Theft", "Theft of Vehicle", "Theft of Bicycle"],
    "break_and_enter": ["Break and Enter Commercial", "Break and Enter Residential/Other"],
    "mischief": ["Mischief"],
}
EXCLUDE = {"theft": 50.0, "break_and_enter": 100.0, "mischief": 100.0}


def lattice_near(stations: pd.DataFrame, step: float, radius: float):
    """All lattice points within radius of a station, with nearest station and distance."""
    sx, sy = stations["x"].to_numpy(), stations["y"].to_numpy()
    tree = cKDTree(np.column_stack([sx, sy]))
    xs = np.arange(math.floor((sx.min() - radius) / step),
                   math.ceil((sx.max() + radius) / step) + 1)
    pts, dist = [], []
    for chunk in np.array_split(xs, max(1, len(xs) // 200)):
        ys = np.arange(math.floor((sy.min() - radius) / step),
                       math.ceil((sy.max() + radius) / step) + 1)
        gx, gy = (a.ravel() * step for a in np.meshgrid(chunk, ys))
        p = np.column_stack([gx, gy])
        d, _ = tree.query(p)
        keep = d <= radius
        pts.append(p[keep])
        dist.append(d[keep])
    return np.concatenate(pts), np.concatenate(dist)


def kd_tree_filter(points: np.ndarray, crimes: pd.DataFrame) -> np.ndarray:
    ok = np.ones(len(points), dtype=bool)
    for cat, r in EXCLUDE.items():
        c = crimes[crimes["TYPE"].isin(CATS[cat])][["X", "Y"]].to_numpy()
        tree = cKDTree(c)
        ok &= tree.query_ball_point(points, r, return_length=True, workers=1) == 0
    return ok


def python_loop(points: np.ndarray, crimes: pd.DataFrame) -> np.ndarray:
    """The original approach: every point against every crime, in Python."""
    lists = {cat: list(zip(*crimes[crimes["TYPE"].isin(CATS[cat])][["X", "Y"]].to_numpy().T,
                           strict=True)) for cat in EXCLUDE}
    out = []
    for px, py in points:
        good = True
        for cat, r in EXCLUDE.items():
            for cx, cy in lists[cat]:
                if (px - cx) ** 2 + (py - cy) ** 2 <= r * r:
                    good = False
                    break
            if not good:
                break
        out.append(good)
    return np.array(out)


def job_cfg(crimes: str, out: str | None, step: float, cores: int, stations_only=None):
    over = {
        "spark": {"master": f"local[{cores}]",
                  "conf": {"spark.sql.shuffle.partitions": str(4 * cores),
                           "spark.driver.memory": "8g"}},
        "job": {"inputs": {"crimes": crimes}, "output": out,
                "search": {"grid_step_m": step}},
    }
    return load_config("coffee_shops", "local", ROOT / "conf", over)


def timed(fn):
    t0 = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--scale-rows", type=int, default=530_000)
    ap.add_argument("--skip-scale", action="store_true")
    ap.add_argument("--repeats", type=int, default=2,
                    help="scale runs after the first one, in the same session")
    args = ap.parse_args()
    if not getattr(args, "child", None):
        print(describe(), flush=True)
    crimes_path = bundled("vancouver_crime_2016.csv.gz")
    crimes = pd.read_csv(io.StringIO(bundled_text(crimes_path)))  # read on the driver
    work = Path(tempfile.mkdtemp(prefix="sparkfield-bench-"))
    spark = build_session(job_cfg(crimes_path, None, 10, args.cores))
    spark.sparkContext.setLogLevel("WARN")
    try:
        # warm-up: JVM, Python workers
        run(spark, job_cfg(crimes_path, None, 100, args.cores))

        print("== (a) small case: all eligible stations, 10 m grid, 34,622 crimes (2016)")
        res, t_job = timed(lambda: run(spark, job_cfg(crimes_path, str(work / "a"), 10,
                                                      args.cores)))
        st = res.stations[res.stations["eligible"]].reset_index(drop=True)
        pts, _ = lattice_near(st, 10.0, 1000.0)
        ok, t_kd = timed(lambda: kd_tree_filter(pts, crimes))
        n = len(pts)
        sl = pts[:: max(1, n // 300)][:300]
        _, t_py = timed(lambda: python_loop(sl, crimes))
        py_rate = len(sl) / t_py
        same = "identical" if res.candidate_count == ok.sum() else "DIFFERENT"
        print(f"lattice points in search: {n:,}; passing: job {res.candidate_count:,}, "
              f"KD-tree {int(ok.sum()):,} -> {same}")
        print(f"job end to end (read, search, rank, write): {t_job:.2f} s "
              f"= {n / t_job:,.0f} points/s")
        print(f"KD-tree single process: {t_kd:.2f} s = {n / t_kd:,.0f} points/s")
        print(f"pure-Python all-pairs loop: {py_rate:,.1f} points/s (timed on {len(sl)} points), "
              f"so ~{n / py_rate / 3600:,.1f} h for the whole case")
        print(f"ratio job / python loop: {(n / t_job) / py_rate:,.0f}x; "
              f"job / KD-tree: {t_kd / t_job:.2f}x")

        if args.skip_scale:
            return 0
        print(f"\n== (b) scale: 1 m grid, crimes scaled to ~{args.scale_rows:,} rows")
        reps = math.ceil(args.scale_rows / len(crimes))
        rng = np.random.default_rng(2016)
        parts = [crimes]
        for _ in range(reps - 1):
            c = crimes.copy()
            c["X"] = c["X"] + rng.normal(0, 30, len(c))
            c["Y"] = c["Y"] + rng.normal(0, 30, len(c))
            parts.append(c)
        big = pd.concat(parts, ignore_index=True).iloc[: args.scale_rows]
        big_path = work / "crimes_scaled.csv"
        big.to_csv(big_path, index=False)
        print(f"SCALED DATA: {len(big):,} rows = the 2016 file + {reps - 1} copies jittered by "
              f"N(0, 30 m) (synthetic replication of real records)")
        times = []
        for i in range(1 + args.repeats):
            out = work / f"b{i}"
            res, t = timed(lambda out=out: run(spark, job_cfg(str(big_path), str(out), 1,
                                                              args.cores)))
            times.append(t)
            shutil.rmtree(out, ignore_errors=True)
        t_job = times[0]
        n = res.in_search_count
        print(f"job: {n:,} lattice points in search, {res.candidate_count:,} passing, first run "
              f"at this size {t_job:.1f} s end to end = {n / t_job / 1e6:.2f} M points/s on "
              f"{args.cores} cores")
        if args.repeats:
            t_warm = statistics.median(times[1:])
            print(f"job, same session again (JIT warm), median of {args.repeats}: {t_warm:.1f} s "
                  f"= {n / t_warm / 1e6:.2f} M points/s   (runs: "
                  f"{', '.join(f'{t:.2f}' for t in times)})")
        steps = {s['step']: s['seconds'] for s in res.report.steps}
        print(f"job steps: {steps}")
        print(f"skew: {res.report.skew}")
        pts, _ = lattice_near(st, 1.0, 1000.0)
        ok, t_kd = timed(lambda: kd_tree_filter(pts, big))
        print(f"KD-tree single process: {len(pts):,} points, {int(ok.sum()):,} passing, "
              f"{t_kd:.1f} s = {len(pts) / t_kd / 1e6:.2f} M points/s "
              f"-> {'identical count' if int(ok.sum()) == res.candidate_count else 'DIFFERENT'}")
        print(f"ratio job / KD-tree: {t_kd / t_job:.2f}x (first run)"
              + (f", {t_kd / t_warm:.2f}x (warm)" if args.repeats else ""))
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    sys.exit(main())
