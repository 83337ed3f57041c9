"""XES import: the executors' readers (traces parsed in the JVM, ``read_xes(..., jvm=True)``
as process_mining reads a plain log, and in Python workers) against the driver's reader and
pm4py's default reader, on the same logs in one run, each reader in a process of its own (so
its peak memory is its own). A ``.xes.gz`` is always parsed in Python workers.

Log: BPI Challenge 2012 (262,200 events, real) copied 8 times under new case ids
(``<case>#<copy>``: a synthetic scale-up of real traces, about 2.1 million events), as a plain
``.xes`` and as ``.xes.gz``. Every reader materialises every event (Spark: a ``noop`` write of
the raw rows; pm4py: its DataFrame). The Spark readers run with a small
``spark.driver.memory`` to show what the driver needs.

Usage: python benchmarks/xes_import.py [--cores 2] [--copies 8] [--driver-memory 1g]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import describe
from process_logs import ROOT, scaled_xes


def _jvm_peak_mib(spark) -> float:
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child(reader: str, log: str, cores: int, driver_memory: str) -> dict:
    """One reader on one log, in this process: seconds, events and peak memory."""
    import warnings

    warnings.simplefilter("ignore")
    if reader == "pm4py":
        import pm4py

        t0 = time.perf_counter()
        df = pm4py.read_xes(log, show_progress_bar=False)
        seconds = time.perf_counter() - t0
        return {"seconds": seconds, "events": len(df),
                "python_peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    from sparkfield.core.conf import load_config
    from sparkfield.core.session import build_session
    from sparkfield.process.eventlog.xes import read_xes_on_driver
    from sparkfield.process.eventlog.xes_split import read_xes

    cfg = load_config("process_mining", "local", ROOT / "conf", {"spark": {
        "master": f"local[{cores}]", "conf": {"spark.driver.memory": driver_memory}}})
    spark = build_session(cfg)
    spark.sparkContext.setLogLevel("ERROR")
    try:
        t0 = time.perf_counter()
        raw = (read_xes(spark, log, jvm=reader == "jvm") if reader in ("jvm", "executors")
               else read_xes_on_driver(spark, log))
        raw.write.format("noop").mode("overwrite").save()
        seconds = time.perf_counter() - t0
        events = raw.count()
        return {"seconds": seconds, "events": events,
                "python_peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "jvm_peak_mib": _jvm_peak_mib(spark)}
    finally:
        spark.stop()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--copies", type=int, default=8)
    ap.add_argument("--driver-memory", default="1g")
    ap.add_argument("--child", nargs=2, metavar=("READER", "LOG"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if not getattr(args, "child", None):
        print(describe(), flush=True)
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], args.cores, args.driver_memory)))
        return 0
    work = Path(tempfile.mkdtemp(prefix="sparkfield-xes-bench-"))
    try:
        plain = work / f"bpic2012_x{args.copies}.xes"
        scaled_xes(args.copies, plain)
        packed = work / f"bpic2012_x{args.copies}.xes.gz"
        with open(plain, "rb") as src, gzip.open(packed, "wb", compresslevel=6) as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        print(f"SCALED LOG: bpic2012 x {args.copies} (every trace copied under a new case id "
              f"'<case>#<copy>'): {plain.stat().st_size / 2**20:.0f} MiB plain, "
              f"{packed.stat().st_size / 2**20:.0f} MiB gzip; {args.cores} cores, "
              f"spark.driver.memory={args.driver_memory}")
        for log in (plain, packed):
            got = {}
            readers = ("pm4py", "driver", "executors") + (("jvm",) if log == plain else ())
            for reader in readers:
                out = subprocess.run(
                    [sys.executable, __file__, "--cores", str(args.cores), "--driver-memory",
                     args.driver_memory, "--child", reader, str(log)],
                    capture_output=True, text=True, check=False)
                if out.returncode != 0:
                    print(f"[{log.name}] {reader}: failed\n{out.stderr[-2000:]}")
                    continue
                got[reader] = json.loads(out.stdout.strip().splitlines()[-1])
                r = got[reader]
                jvm = f", JVM peak {r['jvm_peak_mib']:.0f} MiB" if "jvm_peak_mib" in r else ""
                print(f"[{log.name}] {reader:9s} {r['seconds']:7.1f} s  {r['events']:,} events;"
                      f" driver Python peak {r['python_peak_mib']:.0f} MiB{jvm}", flush=True)
            if {"pm4py", "executors", "driver"} <= set(got):
                ex = got["executors"]["seconds"]
                same = len({g["events"] for g in got.values()}) == 1
                print(f"[{log.name}] executors vs pm4py: {got['pm4py']['seconds'] / ex:.2f}x, "
                      f"vs driver reader: {got['driver']['seconds'] / ex:.2f}x; same event "
                      f"count: {same}")
            if {"jvm", "executors"} <= set(got):
                print(f"[{log.name}] JVM parse vs Python workers: "
                      f"{got['executors']['seconds'] / got['jvm']['seconds']:.2f}x, vs pm4py: "
                      f"{got['pm4py']['seconds'] / got['jvm']['seconds']:.2f}x", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    sys.exit(main())
