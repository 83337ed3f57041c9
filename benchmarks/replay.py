"""Token-based replay at scale: Sparkfield's ``replay_cases`` vs pm4py's
``conformance_diagnostics_token_based_replay`` on the same log and net, in one run.

Log: BPI Challenge 2012 (262,200 events, real) scaled up by copying every case under new ids
(``<case>#<copy>``; stated in the output). Net: the IMd net of bpic2012 (discovered by
Sparkfield, handed to pm4py as PNML). Both replay every case; the per-case token counts and the
log-level fitness are compared for identity. pm4py is AGPL and is used here only as the
reference.

Usage: python benchmarks/replay.py [--cores 2] [--copies 8]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

import pandas as pd
from machine import describe
from pyspark.sql import functions as F

from sparkfield.core.conf import load_config
from sparkfield.core.session import build_session
from sparkfield.process.events import classify, good_events
from sparkfield.process.inductive import discover_process_tree
from sparkfield.process.logs import read_log
from sparkfield.process.params import PROCESS_MINING
from sparkfield.process.petri import from_process_tree, write_pnml
from sparkfield.process.replay import log_fitness, replay_cases

ROOT = Path(__file__).resolve().parents[1]
BPIC = Path(os.environ.get("SPARKFIELD_DATA", ROOT.parent / "shared/data")) / \
    "process_mining/event_logs/pm4py/bpic2012.xes.gz"
COUNTS = ("missing", "remaining", "produced", "consumed")


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def ours(events, net) -> dict[str, tuple]:
    rows = replay_cases(events, net, order="row_order").collect()
    return {r.case_id: (r.is_fit, *(r[c] for c in COUNTS), r.fitness) for r in rows}


def reference(pm_log: pd.DataFrame, pm_net) -> dict[str, tuple]:
    import pm4py

    diagnostics = pm4py.conformance_diagnostics_token_based_replay(pm_log, *pm_net)
    cases = pm_log.groupby("case:concept:name").size().index  # pm4py's order of the cases
    return {str(c): (d["trace_is_fit"], d["missing_tokens"], d["remaining_tokens"],
                     d["produced_tokens"], d["consumed_tokens"], d["trace_fitness"])
            for c, d in zip(cases, diagnostics, strict=True)}


def agreement(mine: dict[str, tuple], ref: dict[str, tuple]) -> str:
    same = sum(1 for c, r in ref.items() if c in mine and mine[c][:5] == r[:5]
               and abs(mine[c][5] - r[5]) < 1e-12)
    return f"{same:,} of {len(ref):,} cases identical (ours has {len(mine):,})"


def scaled(base, pm_log: pd.DataFrame, copies: int, spark, cores: int):
    """The log with every case copied ``copies`` times under ``<case>#<copy>``, both sides."""
    ids = spark.range(copies).withColumnRenamed("id", "copy")
    big = (base.crossJoin(ids).withColumn(
        "case_id", F.concat_ws("#", "case_id", F.col("copy").cast("string")))
        .drop("copy").repartition(4 * cores, "case_id").cache())
    parts = []
    for c in range(copies):
        part = pm_log.copy()
        part["case:concept:name"] = part["case:concept:name"] + f"#{c}"
        parts.append(part)
    return big, pd.concat(parts, ignore_index=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--copies", type=int, default=8)
    args = ap.parse_args()
    print(describe(), flush=True)
    warnings.simplefilter("ignore")
    import pm4py

    cfg = load_config("replay", "local", ROOT / "conf", {"spark": {
        "master": f"local[{args.cores}]",
        "conf": {"spark.sql.shuffle.partitions": str(4 * args.cores),
                 "spark.driver.memory": "8g"}}})
    spark = build_session(cfg)
    spark.sparkContext.setLogLevel("WARN")
    work = Path(tempfile.mkdtemp(prefix="sparkfield-replay-bench-"))
    try:
        columns = PROCESS_MINING.parse({}).columns
        base = good_events(classify(read_log(spark, str(BPIC), columns),
                                    "1970-01-01", "2100-01-01", dedupe=False)).cache()
        pm_log = pm4py.read_xes(str(BPIC), show_progress_bar=False)
        net, t_disc = timed(lambda: from_process_tree(
            discover_process_tree(base, order="row_order"), "bpic2012_imd"))
        write_pnml(net, work / "net.pnml")
        pm_net = pm4py.read_pnml(str(work / "net.pnml"))
        silent = sum(t.silent for t in net.transitions)
        print(f"net: IMd of bpic2012 ({len(net.places)} places, {len(net.transitions)} "
              f"transitions, {silent} silent), read and discovered in {t_disc:.1f} s")
        big, pm_big = scaled(base, pm_log, args.copies, spark, args.cores)
        n = big.count()
        print(f"SCALED LOG: {n:,} events = bpic2012 x {args.copies}, every case copied under a "
              "new id '<case>#<copy>' (synthetic scale-up of real traces)", flush=True)
        ours(big, net)  # warm-up: Python workers started, the scaled log cached
        mine, t_ours = timed(lambda: ours(big, net))
        ref, t_ref = timed(lambda: reference(pm_big, pm_net))
        print(f"[bpic2012 x{args.copies}] token replay: ours {t_ours:.1f} s "
              f"(local[{args.cores}]), pm4py {t_ref:.1f} s -> {t_ref / t_ours:.2f}x")
        print(f"[bpic2012 x{args.copies}] {agreement(mine, ref)}")
        got = log_fitness(replay_cases(big, net, order="row_order"))
        want = pm4py.fitness_token_based_replay(pm_big, *pm_net)
        print(f"[bpic2012 x{args.copies}] log fitness: ours {got['log_fitness']:.6f}, pm4py "
              f"{want['log_fitness']:.6f}; fitting traces: ours "
              f"{got['percentage_of_fitting_traces']:.2f} %, pm4py "
              f"{want['percentage_of_fitting_traces']:.2f} %")
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    sys.exit(main())
