"""Token-based replay at scale: Sparkfield's ``replay_cases`` vs pm4py's
``conformance_diagnostics_token_based_replay`` on the same log and net, in one run.

Log: BPI Challenge 2012 (262,200 events, real) scaled up by copying every case under new ids
(``<case>#<copy>``; stated in the output). Net: the IMd net of bpic2012 (discovered by
Sparkfield, handed to pm4py as PNML). Both replay every case; the per-case token counts and the
log-level fitness are compared for identity. Timed: the replay with its per-case results on the
driver (ours: ``replay_cases(...).collect()``, after one warm-up run; pm4py: the list of
``conformance_diagnostics_token_based_replay``), not the comparison of the two. pm4py is AGPL
and is used here only as the reference.

Usage: python benchmarks/replay.py [--cores 2] [--copies 8]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

import pandas as pd
from machine import describe
from process_logs import (
    BPIC,
    PM4PY_CASE,
    bpic_events,
    local_session,
    scaled,
    scaled_note,
    timed,
)

from sparkfield.process.analysis.inductive import discover_process_tree
from sparkfield.process.analysis.petri import from_process_tree, write_pnml
from sparkfield.process.analysis.replay import log_fitness, replay_cases

COUNTS = ("missing", "remaining", "produced", "consumed")


def ours(events, net) -> list:
    """Every case replayed on the executors, the per-case rows collected (what is timed)."""
    return replay_cases(events, net, order_col="row_order").collect()


def ours_by_case(rows) -> dict[str, tuple]:
    """case_id -> (is_fit, missing, remaining, produced, consumed, fitness)."""
    return {d["case_id"]: (d["is_fit"], *(d[c] for c in COUNTS), d["fitness"])
            for d in (r.asDict() for r in rows)}


def reference(pm_log: pd.DataFrame, pm_net) -> list[dict]:
    """pm4py's replay of every case: its list of per-case diagnostics (what is timed)."""
    import pm4py

    return pm4py.conformance_diagnostics_token_based_replay(pm_log, *pm_net)


def reference_by_case(pm_log: pd.DataFrame, diagnostics: list[dict]) -> dict[str, tuple]:
    cases = pm_log.groupby(PM4PY_CASE).size().index  # pm4py's order of the cases
    return {str(c): (d["trace_is_fit"], d["missing_tokens"], d["remaining_tokens"],
                     d["produced_tokens"], d["consumed_tokens"], d["trace_fitness"])
            for c, d in zip(cases, diagnostics, strict=True)}


def agreement(mine: dict[str, tuple], ref: dict[str, tuple]) -> str:
    same = sum(1 for c, r in ref.items() if c in mine and mine[c][:5] == r[:5]
               and abs(mine[c][5] - r[5]) < 1e-12)
    return f"{same:,} of {len(ref):,} cases identical (ours has {len(mine):,})"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--copies", type=int, default=8)
    args = ap.parse_args()
    print(describe(), flush=True)
    warnings.simplefilter("ignore")
    import pm4py

    spark = local_session("replay", args.cores)
    work = Path(tempfile.mkdtemp(prefix="sparkfield-replay-bench-"))
    try:
        base = bpic_events(spark).cache()
        pm_log = pm4py.read_xes(str(BPIC), show_progress_bar=False)
        net, t_disc = timed(lambda: from_process_tree(
            discover_process_tree(base, order_col="row_order"), "bpic2012_imd"))
        write_pnml(net, work / "net.pnml")
        pm_net = pm4py.read_pnml(str(work / "net.pnml"))
        silent = sum(t.silent for t in net.transitions)
        print(f"net: IMd of bpic2012 ({len(net.places)} places, {len(net.transitions)} "
              f"transitions, {silent} silent), read and discovered in {t_disc:.1f} s")
        big, pm_big = scaled(base, pm_log, args.copies, spark, args.cores)
        print(scaled_note(big.count(), args.copies), flush=True)
        ours(big, net)  # warm-up: Python workers started, the scaled log cached
        mine, t_ours = timed(lambda: ours(big, net))
        ref, t_ref = timed(lambda: reference(pm_big, pm_net))
        print(f"[bpic2012 x{args.copies}] token replay: ours {t_ours:.1f} s "
              f"(local[{args.cores}]), pm4py {t_ref:.1f} s -> {t_ref / t_ours:.2f}x")
        print(f"[bpic2012 x{args.copies}] "
              f"{agreement(ours_by_case(mine), reference_by_case(pm_big, ref))}")
        got = log_fitness(replay_cases(big, net, order_col="row_order"))
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
