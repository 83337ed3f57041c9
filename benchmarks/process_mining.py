"""Process-mining views and XES export: Sparkfield vs pm4py on the same logs, in one run.

Logs: BPI Challenge 2012 (262,200 events, real) and a scaled-up log of about 2 million events
made from it by copying every case under new ids (``<case>#<copy>``; stated in the output).
Views (DFG with frequencies and durations, variants, start/end activities, case durations) and
XES export are timed separately; results are compared for identity.
pm4py is AGPL and is used here only as the reference.

``--whole LOG``: the whole processes instead, as a user runs them, start-up included: the
``process_mining`` job through ``submit.sh`` (``--driver-memory 1g``, the default conf, or with
``--views-only`` no statistics, model, conformance or CSV copy of the log: what pm4py's side
computes, written) against a Python process that imports pm4py, reads the log and computes the
same views; against the default conf, that process also does what the job adds, each in pm4py's
way: the statistics, IMd on the DFG and its PNML, token-based replay of every case, the CSV
copy of the log (neither side's drawings are counted out: pm4py's side draws none). Runs each
``--repeats`` times, best kept;
``--profile local,quick`` runs the job with the quick profile (C1-only JIT, for short runs).

Usage: python benchmarks/process_mining.py [--cores 2] [--copies 8]
       python benchmarks/process_mining.py --whole LOG [--views-only] [--repeats 2]
       [--profile local]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path

from machine import describe
from process_logs import (
    BPIC,
    ROOT,
    bpic_events,
    local_session,
    scaled,
    scaled_note,
    timed,
)

from sparkfield.process.analysis.views import case_sequences, compute_views
from sparkfield.process.eventlog.xes import write_xes_gz


def ours_views(events):
    seqs = case_sequences(events).cache()
    v = compute_views(events, seqs, seqs.count())
    dfg = {(r.source, r.target): int(r.frequency) for r in v.dfg.collect()}
    variants = Counter({r.variant: int(r.cases) for r in v.variants.collect()})
    starts = {r.activity: int(r.cases) for r in v.start_activities.collect()}
    ends = {r.activity: int(r.cases) for r in v.end_activities.collect()}
    durations = sorted(r.duration_s for r in v.cases.select("duration_s").collect())
    seqs.unpersist()
    return dfg, variants, starts, ends, durations


def pm4py_views(log):
    import json

    import pm4py

    dfg, starts, ends = pm4py.discover_dfg(log)
    perf = pm4py.discover_performance_dfg(log)  # mean/median arc times, as ours computes
    variants = pm4py.get_variants(log)
    durations = sorted(pm4py.get_all_case_durations(log))
    variants = Counter({json.dumps(list(k), separators=(",", ":")): int(v)
                        for k, v in variants.items()})
    return ({k: int(v) for k, v in dfg.items()}, variants, dict(starts), dict(ends), durations,
            perf)


# the pm4py side of --whole: a fresh interpreter imports pm4py, reads the log, computes the views
PM4PY_WHOLE = """
import sys, warnings
warnings.simplefilter("ignore")
import pm4py
log = pm4py.read_xes(sys.argv[1], show_progress_bar=False)
dfg, starts, ends = pm4py.discover_dfg(log)
perf = pm4py.discover_performance_dfg(log)
variants = pm4py.get_variants(log)
durations = pm4py.get_all_case_durations(log)
print(len(log), "events", len(dfg), "arcs", len(variants), "variants", len(durations), "cases")
"""

# ... and with the job's default conf, the analyses the job adds, each in pm4py's own way:
# statistics (events and active cases per day, case-duration histogram, activity and resource
# frequencies, resource x activity counts, handover of work), IMd on the DFG, its Petri net
# written as PNML, token-based replay of every case, and the log's CSV copy (gzip)
PM4PY_DEFAULT = PM4PY_WHOLE.rstrip() + """
import os, tempfile
import numpy as np
out = tempfile.mkdtemp(prefix="pm4py-whole-")
ts = log["time:timestamp"]
per_day = log.groupby(ts.dt.floor("D")).size()
cases = log.groupby("case:concept:name")["time:timestamp"].agg(["min", "max"])
active = {}
for lo, hi in zip(cases["min"].dt.floor("D"), cases["max"].dt.floor("D")):
    for day in range((hi - lo).days + 1):
        key = lo + np.timedelta64(day, "D")
        active[key] = active.get(key, 0) + 1
hist = np.histogram(durations, bins=20)
acts = pm4py.get_event_attribute_values(log, "concept:name")
res = pm4py.get_event_attribute_values(log, "org:resource")
matrix = log.groupby(["org:resource", "concept:name"]).size()
# pm4py's handover fails on events without a resource (NaN); the job counts them out too
handover = pm4py.discover_handover_of_work_network(log.dropna(subset=["org:resource"]))
tree = pm4py.discover_process_tree_inductive(pm4py.discover_dfg_typed(log))
net, im, fm = pm4py.convert_to_petri_net(tree)
pm4py.write_pnml(net, im, fm, os.path.join(out, "model.pnml"))
replay = pm4py.conformance_diagnostics_token_based_replay(log, net, im, fm)
fit = sum(r["trace_fitness"] for r in replay) / len(replay)
log.to_csv(os.path.join(out, "event_log.csv.gz"), index=False)
print(len(per_day), "days", len(active), "active days", len(acts), "activities", len(res),
      "resources", len(matrix), "resource-activity pairs", "replayed", len(replay),
      "cases, mean fitness", round(fit, 4))
"""


def _wall(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, str]:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t0
    if done.returncode:
        raise SystemExit(f"{cmd[:3]} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return wall, done.stdout + done.stderr


def whole(log: str, views_only: bool, repeats: int, profile: str = "local") -> None:
    """The job as a user runs it against pm4py's whole process, best of ``repeats`` each."""
    out = Path(tempfile.mkdtemp(prefix="sparkfield-pm-whole-"))
    job = [str(ROOT / "submit.sh"), "process_mining", "--profile", profile, "--driver-memory",
           "1g", "--log", log, "--output", str(out / "out")]
    if views_only:
        job += ["--no-statistics", "--no-model", "--no-conformance", "--exports", "none"]
    env = {**os.environ, "SPARKFIELD_PYTHON": sys.executable}
    try:
        ours = []
        for _ in range(repeats):
            wall, text = _wall(job, env)
            ours.append(wall)
        steps = [line.strip() for line in text.splitlines() if line.strip().startswith("steps:")]
        child = PM4PY_WHOLE if views_only else PM4PY_DEFAULT
        theirs, said = [], ""
        for _ in range(repeats):
            wall, said = _wall([sys.executable, "-c", child, log])
            theirs.append(wall)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    mode = ("views only (no statistics, model, conformance, exports)" if views_only
            else "default conf")
    mode += f", --profile {profile}"
    what = ("read + views" if views_only else
            "read + views + statistics + IMd + PNML + token replay + CSV copy")
    print(f"{log}: process_mining job ({mode}, JVM start included) "
          f"{', '.join(f'{w:.1f}' for w in ours)} s; pm4py {what} "
          f"{', '.join(f'{w:.1f}' for w in theirs)} s -> ours at "
          f"{min(theirs) / min(ours):.2f}x pm4py's speed (best of {repeats})")
    print(f"  pm4py's last run: {said.strip()}")
    if steps:
        print(f"  last run's {steps[-1]}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--copies", type=int, default=8)
    ap.add_argument("--whole", metavar="LOG", help="time the whole job against pm4py's process")
    ap.add_argument("--views-only", action="store_true")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--profile", default="local", help="the job's conf profile with --whole "
                    "(local,quick: C1-only JIT for short runs)")
    args = ap.parse_args()
    if args.whole:
        print(describe(), flush=True)
        whole(args.whole, args.views_only, args.repeats, args.profile)
        return 0
    if not getattr(args, "child", None):
        print(describe(), flush=True)
    warnings.simplefilter("ignore")
    import pm4py

    spark = local_session("process_mining", args.cores)
    work = Path(tempfile.mkdtemp(prefix="sparkfield-pm-bench-"))
    try:
        base, t_read = timed(lambda: bpic_events(spark))
        base = base.cache()
        n0 = base.count()
        pm_log, t_pm_read = timed(lambda: pm4py.read_xes(str(BPIC), show_progress_bar=False))
        print(f"read bpic2012: ours {t_read:.1f}+s (driver parse), pm4py {t_pm_read:.1f} s; "
              f"{n0:,} events")
        logs = [("bpic2012", base, pm_log)]
        big, pm_big = scaled(base, pm_log, args.copies, spark, args.cores)
        print(scaled_note(big.count(), args.copies))
        logs.append((f"bpic2012 x{args.copies}", big, pm_big))
        for name, events, pm in logs:
            ours_views(events)  # warm-up
            mine, t_ours = timed(lambda ev=events: ours_views(ev))
            ref, t_ref = timed(lambda p=pm: pm4py_views(p))
            same = (mine[0] == ref[0] and mine[1] == ref[1] and mine[2] == ref[2]
                    and mine[3] == ref[3] and len(mine[4]) == len(ref[4])
                    and max(abs(a - b) for a, b in zip(mine[4], ref[4], strict=True)) < 1e-3)
            print(f"[{name}] views: ours {t_ours:.1f} s, pm4py {t_ref:.1f} s -> "
                  f"{t_ref / t_ours:.2f}x; identical: {same}")
            target = str(work / f"{name.replace(' ', '_')}.xes.gz")
            _, t_x = timed(lambda ev=events, t=target: write_xes_gz(spark, ev, t))
            pm_target = str(work / f"{name.replace(' ', '_')}_pm4py.xes.gz")
            _, t_px = timed(lambda p=pm, t=pm_target: pm4py.write_xes(p, t))
            back = pm4py.read_xes(target, show_progress_bar=False)
            print(f"[{name}] XES export: ours {t_x:.1f} s, pm4py {t_px:.1f} s -> "
                  f"{t_px / t_x:.1f}x; ours reloads in pm4py with {len(back):,} events, DFG "
                  f"identical: {pm4py.discover_dfg(back)[0] == pm4py.discover_dfg(pm)[0]}")
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    sys.exit(main())
