"""Scale: every job at three (coffee_shops: four) sizes, each run as a user runs it.

Each run is ``./submit.sh JOB ...`` in a process of its own, timed from the command to its exit
(the JVM start included). Per run: wall seconds, units/s, the driver Python process's own peak
RSS (the job's interpreter reports its ``ru_maxrss`` as it exits; the JVM and the Python workers
are not in it), the JVM's peak heap (``JVMHeapMemory`` of Spark's executor metrics) and the
bytes the tasks spilled (memory and disk), both read from Spark's event log of the run.

Sizes (generated inputs go under ``--work``, never into the repository; a size's input is made
once and reused):

- process_mining: bpic2012 (262,200 real events) x8, x32, x80 as plain XES, every trace copied
  under ``<case>#<copy>``; ``spark.driver.memory=1g``, the job's default conf. Beside it, at
  each size, pm4py's ``read_xes`` and the same views in a child process held to 16 GiB of
  address space (less when the machine has less free) and a timeout: where and how it stops
  is recorded.
- event_log: the OCEL mapping conf/event_logs/olist_ocel.yaml on Olist's 4,000-order sample
  x1, x25 (100,000 orders: the size of the full 99 k-order data set, which the shared data
  does not hold) and x625 (25 times that); order, customer and review ids suffixed ``#<copy>``,
  products and sellers shared by the copies.
- bag_of_words: the 372 Gutenberg books x1, x4, x16 as the Parquet ``pages/`` of an earlier run
  (``text/plain`` pages; each copy a page of its own URL ``...#<copy>``).
- coffee_shops: the bundled data on 10 m, 2 m, 1 m and 0.5 m lattices.
- embed: 3,000, 30,000 and 100,000 real sentences (Wikipedia pages of the shared corpus, then
  Gutenberg books when those run out), no embedding store (``cache_dir`` null).

Results are merged by job and size into ``--out`` (results of runs not made now are kept), the
chart (seconds against units, log-log, one panel per job, a slope-1 line through the smallest
measured point) is drawn from all of them, and each job's figures are printed against the
goals: per-unit time at the largest size at most 1.2x the next smaller size's; driver Python
peak RSS at most 512 MiB at every size.

Usage: python benchmarks/scale.py [--jobs process_mining,embed] [--sizes smallest|middle|
       largest|LABEL,...] [--work DIR] [--out JSON] [--chart PNG] [--timeout 600] [--no-pm4py]
       [--chart-only]
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import glob
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from machine import cpu, describe

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("SPARKFIELD_DATA", ROOT.parent / "shared/data"))
PY = ROOT / ".venv/bin/python"
MIB = 1024 * 1024
GOAL_RATIO = 1.2
GOAL_RSS_MIB = 512
PM4PY_CAP = 16 * 1024 ** 3

# the driver's interpreter: runs the job script and writes its own peak RSS (KiB) as it exits
DRIVER_WRAPPER = """#!/bin/sh
exec {python} -c '
import atexit, os, resource, runpy, sys
def _peak():
    with open(os.environ["SCALE_DRIVER_RSS"], "w") as f:
        f.write(str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))
atexit.register(_peak)
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0])))
runpy.run_path(sys.argv[0], run_name="__main__")
' "$@"
"""

# pm4py beside process_mining: import, read, the job's views; a line per stage done
PM4PY_CHILD = """
import json, resource, sys, time, warnings
warnings.simplefilter("ignore")
t0 = time.perf_counter()
def done(stage, **kw):
    print(json.dumps({"stage": stage, "s": round(time.perf_counter() - t0, 2),
                      "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
                      **kw}), flush=True)
try:
    import pm4py
    done("import")
    log = pm4py.read_xes(sys.argv[1], show_progress_bar=False)
    done("read_xes", events=len(log))
    dfg, starts, ends = pm4py.discover_dfg(log)
    perf = pm4py.discover_performance_dfg(log)
    variants = pm4py.get_variants(log)
    durations = pm4py.get_all_case_durations(log)
    done("views", arcs=len(dfg), variants=len(variants), cases=len(durations))
except MemoryError:
    print(json.dumps({"error": "MemoryError"}), flush=True)
    sys.exit(3)
"""


@dataclass(frozen=True)
class Size:
    label: str
    factor: float  # units relative to the job's first size, for the chart's not-run sizes


@dataclass(frozen=True)
class Job:
    name: str
    unit: str
    sizes: tuple[Size, ...]
    prepare: Callable[[Size, Path], tuple[list[str], dict]]  # (job flags, facts about the input)
    units_of: Callable[[dict, dict], int | None]  # (run report, facts) -> units
    submit: tuple[str, ...] = ()  # spark-submit options before the job flags


# ---- inputs ---------------------------------------------------------------------------------


def _copies(size: Size) -> int:
    return int(size.label.lstrip("x"))


def pm_input(size: Size, work: Path) -> tuple[list[str], dict]:
    from process_logs import scaled_xes

    copies = _copies(size)
    target = work / "inputs" / f"bpic2012_x{copies}.xes"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        part = target.with_suffix(".part")
        scaled_xes(copies, part)
        part.rename(target)
    return ["--log", str(target)], {"log": str(target), "events": 262_200 * copies,
                                    "bytes": target.stat().st_size}


OLIST = DATA / "process_mining/olist"
OLIST_TABLES = {
    "orders": ("olist_orders_dataset.csv", ("order_id", "customer_id")),
    "items": ("olist_order_items_dataset.csv", ("order_id",)),
    "payments": ("olist_order_payments_dataset.csv", ("order_id",)),
    "reviews": ("olist_order_reviews_dataset.csv", ("order_id", "review_id")),
    "customers": ("olist_customers_dataset.csv", ("customer_id", "customer_unique_id")),
    "products": ("olist_products_dataset.csv", ()),
}


def ocel_input(size: Size, work: Path) -> tuple[list[str], dict]:
    import yaml

    copies = _copies(size)
    folder = work / "inputs" / f"olist_x{copies}"
    mapping_file = folder / "olist_ocel.yaml"
    if not mapping_file.exists():
        folder.mkdir(parents=True, exist_ok=True)
        for file, ids in OLIST_TABLES.values():
            with (OLIST / "sample_4000_orders" / file).open(newline="", encoding="utf-8") as f:
                rows = list(csv.reader(f))
            head, body = rows[0], rows[1:]
            cols = [head.index(c) for c in ids]
            with (folder / file).open("w", newline="", encoding="utf-8") as f:
                w = csv.writer(f)
                w.writerow(head)
                for k in range(copies if cols else 1):
                    for r in body:
                        r = list(r)
                        for c in cols:
                            r[c] = f"{r[c]}#{k}" if copies > 1 else r[c]
                        w.writerow(r)
        doc = yaml.safe_load((ROOT / "conf/event_logs/olist_ocel.yaml").read_text())
        for name, s in doc["sources"].items():
            s["path"] = str(folder / OLIST_TABLES[name][0]) if name in OLIST_TABLES else \
                str(OLIST / "full_dimensions/olist_sellers_dataset.csv")
        mapping_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    return ["--mapping", str(mapping_file)], {"orders": 4000 * copies}


def _books() -> list[tuple[str, str]]:
    """The Gutenberg books as ``bag_of_words.py`` reads them."""
    from bag_of_words import books

    return books()


def bow_input(size: Size, work: Path) -> tuple[list[str], dict]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    copies = _copies(size)
    folder = work / "inputs" / f"gutenberg_x{copies}_pages"
    books = None
    if not (folder / "_SUCCESS").exists():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        books = _books()
        for k in range(copies):  # one file a copy: no copy of the whole corpus in memory
            table = pa.table({
                "url": [f"https://www.gutenberg.org/ebooks/{d}#{k}" for d, _ in books],
                "status": pa.array([200] * len(books), pa.int32()),
                "content_type": ["text/plain"] * len(books),
                "html": [t for _, t in books]})
            pq.write_table(table, folder / f"part-{k:05d}.parquet")
        (folder / "_SUCCESS").touch()
    return ["--pages", str(folder)], {"books": 372 * copies}


def coffee_input(size: Size, work: Path) -> tuple[list[str], dict]:
    """The lattice step; below 1 m the conf is copied with ``search.max_lattice_points``
    raised, as the job's refusal says to (its bound counts the stations' whole squares)."""
    step = size.label.removesuffix("m")
    if float(step) >= 1:
        return ["--grid-step-m", step], {}
    import yaml

    conf = work / "inputs" / "conf_fine_lattice"
    if not conf.exists():
        shutil.copytree(ROOT / "conf", conf)
        job = conf / "jobs/coffee_shops.yaml"
        doc = yaml.safe_load(job.read_text())
        doc["search"]["max_lattice_points"] = 400_000_000
        job.write_text(yaml.safe_dump(doc, sort_keys=False))
    return ["--grid-step-m", step, "--conf-dir", str(conf)], \
        {"search.max_lattice_points": 400_000_000}


def _wiki_sentences(n: int) -> list[str]:
    import tarfile

    from sparkfield.text.bag_of_words.normalise import sentences
    from sparkfield.text.bag_of_words.parse import page_text

    out: list[str] = []
    with tarfile.open(DATA / "corpus/wikipedia_uoi_2020_html.tar.xz", "r:*") as tar:
        for m in tar:
            if m.isfile():
                _, text = page_text(tar.extractfile(m).read().decode("utf-8", "replace"))
                out += sentences(text)
                if len(out) >= n:
                    return out[:n]
    return out


def embed_input(size: Size, work: Path) -> tuple[list[str], dict]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = int(size.label.removesuffix("k")) * 1000
    target = work / "inputs" / f"sentences_{size.label}.parquet"
    if not target.exists():
        sys.path.insert(0, str(ROOT / "libs"))
        from sparkfield.text.bag_of_words.normalise import sentences

        texts = _wiki_sentences(n)
        wiki = len(texts)
        for _, text in _books():
            if len(texts) >= n:
                break
            texts += sentences(text)[: n - len(texts)]
        target.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"sentence": texts[:n]}), target.with_suffix(".part"))
        target.with_suffix(".part").rename(target)
        (target.with_suffix(".json")).write_text(json.dumps({"wikipedia": wiki}))
    facts = json.loads(target.with_suffix(".json").read_text())
    return ["--input", str(target)], {"sentences": n, "from_wikipedia": min(n, facts["wikipedia"])}


def _x(*labels: str) -> tuple[Size, ...]:
    first = float(labels[0].lstrip("x"))
    return tuple(Size(s, float(s.lstrip("x")) / first) for s in labels)


JOBS = {j.name: j for j in (
    Job("process_mining", "events", _x("x8", "x32", "x80"), pm_input,
        lambda rep, f: rep.get("outputs", {}).get("events") or f["events"],
        submit=("--driver-memory", "1g")),
    Job("event_log", "events", _x("x1", "x25", "x625"), ocel_input,
        lambda rep, f: rep.get("outputs", {}).get("events")),
    Job("bag_of_words", "books", _x("x1", "x4", "x16"), bow_input,
        lambda rep, f: rep.get("outputs", {}).get("pages") or f["books"]),
    Job("coffee_shops", "lattice points",
        (Size("10m", 1), Size("2m", 25), Size("1m", 100), Size("0.5m", 400)), coffee_input,
        lambda rep, f: rep.get("counts", {}).get("lattice_points_in_search")),
    Job("embed", "sentences", (Size("3k", 1), Size("30k", 10), Size("100k", 100 / 3)),
        embed_input, lambda rep, f: rep.get("inputs", {}).get("texts") or f["sentences"]),
)}


# ---- measuring ------------------------------------------------------------------------------


def event_log_figures(folder: Path) -> dict:
    """Peak JVM heap (MiB) and bytes spilled, from the Spark event log(s) under ``folder``."""
    heap, mem, disk, found = 0, 0, 0, False
    for path in glob.glob(str(folder / "**" / "*"), recursive=True):  # rolling logs: a folder
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                found = True
                if '"JVMHeapMemory"' not in line and "Bytes Spilled" not in line:
                    continue
                ev = json.loads(line)
                name = ev.get("Event")
                for key in ("Executor Metrics", "Task Executor Metrics"):
                    heap = max(heap, int((ev.get(key) or {}).get("JVMHeapMemory", 0) or 0))
                if name == "SparkListenerTaskEnd":
                    tm = ev.get("Task Metrics") or {}
                    mem += int(tm.get("Memory Bytes Spilled", 0) or 0)
                    disk += int(tm.get("Disk Bytes Spilled", 0) or 0)
    if not found:
        return {}
    return {"jvm_heap_peak_mib": round(heap / MIB) if heap else None,
            "memory_bytes_spilled": mem, "disk_bytes_spilled": disk}


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def run_job(job: Job, size: Size, work: Path, timeout: float) -> dict:
    t_prep = time.perf_counter()
    flags, facts = job.prepare(size, work)
    prep_s = time.perf_counter() - t_prep
    run_dir = work / "runs" / f"{job.name}_{size.label}"
    shutil.rmtree(run_dir, ignore_errors=True)
    events = run_dir / "events"
    events.mkdir(parents=True)
    wrapper = run_dir / "driver-python"
    wrapper.write_text(DRIVER_WRAPPER.format(python=PY))
    wrapper.chmod(0o755)
    rss_file = run_dir / "driver_rss_kib"
    output = run_dir / "out"
    conf = {"spark.eventLog.enabled": "true", "spark.eventLog.dir": events.as_uri(),
            "spark.eventLog.compress": "false",
            "spark.eventLog.logStageExecutorMetrics": "true",
            "spark.executor.metrics.pollingInterval": "1s"}
    cmd = [str(ROOT / "submit.sh"), job.name, *job.submit,
           *[a for k, v in conf.items() for a in ("--conf", f"{k}={v}")],
           *flags, "--output", str(output)]
    env = {**os.environ, "SPARKFIELD_PYTHON": str(PY), "PYSPARK_PYTHON": str(PY),
           "PYSPARK_DRIVER_PYTHON": str(wrapper), "SCALE_DRIVER_RSS": str(rss_file)}
    shown = " ".join(a if a not in (str(wrapper),) else "DRIVER" for a in cmd)
    print(f"[{job.name} {size.label}] input ready in {prep_s:.0f} s; running: {shown}",
          flush=True)
    log_file = run_dir / "console.log"
    t0 = time.perf_counter()
    with log_file.open("w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            proc.wait()
            code = None
    wall = time.perf_counter() - t0
    report_file = output / "run_report.json"
    report = json.loads(report_file.read_text()) if report_file.exists() else {}
    units = job.units_of(report, facts) if report else None
    row = {
        "job": job.name, "size": size.label, "unit": job.unit, "units": units,
        "status": "ok" if code == 0 else ("timeout" if code is None else f"exit {code}"),
        "wall_s": round(wall, 1),
        "units_per_s": round(units / wall, 1) if units and code == 0 else None,
        "report_total_s": report.get("total_seconds"),
        # other work on the machine during the run (the 1-minute load average at its end;
        # the run itself keeps about as many cores busy as it has)
        "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
        "driver_python_peak_rss_mib": (round(int(rss_file.read_text()) / 1024)
                                       if rss_file.exists() else None),
        **event_log_figures(events),
        "input": {k: v for k, v in facts.items() if k != "log"},
        "command": " ".join(["./submit.sh", job.name, *job.submit, *flags, "--output", "OUT"]),
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    if code != 0:
        row["console_tail"] = log_file.read_text(errors="replace")[-2000:]
    (run_dir / "run_report.json").write_text(json.dumps(report, indent=1))
    shutil.rmtree(output, ignore_errors=True)
    shutil.rmtree(events, ignore_errors=True)
    return row


def _available_bytes() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return PM4PY_CAP


def run_pm4py(log: str, timeout: float) -> dict:
    """pm4py's import, read and views of ``log`` in a child held to an address-space cap."""
    cap = min(PM4PY_CAP, _available_bytes() - 2 * 1024 ** 3)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    t0 = time.perf_counter()
    proc = subprocess.Popen([str(PY), "-c", PM4PY_CHILD, log], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=limit,
                            start_new_session=True)
    timer = threading.Timer(timeout, _kill_group, (proc,))
    timer.start()
    _, status, usage = os.wait4(proc.pid, 0)
    timer.cancel()
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    out, err = proc.communicate()
    stages = [json.loads(s) for s in out.splitlines() if s.startswith("{")]
    done = [s for s in stages if "stage" in s]
    if proc.returncode == 0:
        how = "ok"
    elif any(s.get("error") == "MemoryError" for s in stages) or "MemoryError" in err:
        how = "MemoryError"
    elif proc.returncode == -signal.SIGKILL and wall >= timeout:
        how = f"timeout after {timeout:.0f} s"
    else:
        how = f"exit {proc.returncode}: {err.strip().splitlines()[-1] if err.strip() else ''}"
    stopped = None if how == "ok" else \
        {"import": "read_xes", "read_xes": "views"}.get(done[-1]["stage"] if done else "", "import")
    return {"status": how, "stopped_in": stopped, "wall_s": round(wall, 1),
            "peak_rss_mib": usage.ru_maxrss // 1024, "address_space_cap_gib":
            round(cap / 1024 ** 3, 1), "stages": done}


# ---- results, chart, goals ------------------------------------------------------------------


def _machines(doc: dict) -> str:
    """The machines the rows ran on, each with its jobs when there are several."""
    jobs: dict[str, list[str]] = {}
    for r in doc.get("rows", []):
        line = r.get("machine_line") or doc.get("machine_line", "")
        if r["job"] not in jobs.setdefault(line, []):
            jobs[line].append(r["job"])
    if len(jobs) == 1:
        return next(iter(jobs)).replace(", flags", ",\nflags")
    return "\n".join(f"{', '.join(names)}:\n  "
                     + line.removeprefix("machine: ").replace(", flags", ",\n  flags")
                     for line, names in jobs.items())


def merge(out: Path, rows: list[dict]) -> dict:
    doc = json.loads(out.read_text()) if out.exists() else {"rows": []}
    keep = {(r["job"], r["size"]): r for r in doc.get("rows", [])}
    for r in keep.values():  # each row names the machine it ran on
        if doc.get("machine_line"):
            r.setdefault("machine_line", doc["machine_line"])
    for r in rows:
        r["machine_line"] = describe()
        old = keep.get((r["job"], r["size"]), {})
        if "pm4py" not in r and "pm4py" in old:  # a run with --no-pm4py keeps pm4py's figures
            r["pm4py"] = old["pm4py"]
        keep[(r["job"], r["size"])] = r
    order = {(j.name, s.label): (i, k) for i, j in enumerate(JOBS.values())
             for k, s in enumerate(j.sizes)}
    doc["rows"] = sorted(keep.values(), key=lambda r: order.get((r["job"], r["size"]), (99, 0)))
    if rows:
        doc["machine"] = cpu()
        doc["machine_line"] = describe()
    doc["goals"] = {"per_unit_time_largest_over_next": GOAL_RATIO,
                    "driver_python_peak_rss_mib": GOAL_RSS_MIB}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    return doc


def chart(doc: dict, target: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    by_job = {name: {r["size"]: r for r in doc["rows"] if r["job"] == name} for name in JOBS}
    fig, axes = plt.subplots(2, 3, figsize=(13, 8))
    for ax, job in zip(axes.flat, JOBS.values(), strict=False):
        rows = by_job[job.name]
        ok = [(s, rows[s.label]) for s in job.sizes
              if s.label in rows and rows[s.label]["status"] == "ok"]
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())
        # seconds: matplotlib labels the minor ticks where a panel spans under a decade
        ax.set_title(job.name)
        ax.set_xlabel(job.unit)
        ax.set_ylabel("wall seconds (JVM start included)")
        if not ok:
            ax.text(0.5, 0.5, "not measured", ha="center", transform=ax.transAxes)
            continue
        base_s, base = ok[0]
        per = base["units"] / base_s.factor
        xs = [r["units"] for _, r in ok]
        ys = [r["wall_s"] for _, r in ok]
        ax.plot(xs, ys, "o-", color="C0", label="measured")
        ax.margins(x=0.08, y=0.12)  # room for the size labels under the lowest point
        for (s, r) in ok:
            ax.annotate(s.label, (r["units"], r["wall_s"]), textcoords="offset points",
                        xytext=(4, -10), fontsize=8)
        line_x = [per * s.factor for s in job.sizes]
        ax.plot(line_x, [base["wall_s"] * x / base["units"] for x in line_x], "--",
                color="grey", label="slope 1 (from the first point)")
        for s in job.sizes:
            r = rows.get(s.label)
            if not r or r["status"] != "ok":
                x = per * s.factor
                ax.axvline(x, color="grey", lw=0.6, ls=":")
                what = "not run" if not r else r["status"]
                ax.annotate(f"{s.label}: {what}", (x, base["wall_s"]), rotation=90,
                            fontsize=7, color="grey", xytext=(2, 0),
                            textcoords="offset points")
        if job.name == "process_mining":
            pm = [(r["units"], r["pm4py"]["wall_s"]) for _, r in ok
                  if r.get("pm4py", {}).get("status") == "ok"]
            if pm:
                ax.plot(*zip(*pm, strict=True), "s-", color="C3",
                        label="pm4py read + views")
            for _, r in ok:  # where pm4py stopped (out of memory, out of time)
                stopped = r.get("pm4py", {})
                if stopped.get("status", "ok") != "ok" and stopped.get("wall_s"):
                    ax.plot(r["units"], stopped["wall_s"], "x", color="C3", ms=8)
                    ax.annotate(f"pm4py:\n{stopped['status']}\nafter {stopped['wall_s']:.0f} s",
                                (r["units"], stopped["wall_s"]), textcoords="offset points",
                                xytext=(-8, 4), ha="right", va="top", fontsize=7, color="C3",
                                bbox={"fc": "white", "ec": "none", "alpha": 0.85, "pad": 1})
        ax.legend(fontsize=7, loc="upper left")
    axes.flat[-1].axis("off")
    axes.flat[-1].text(0, 0.5, "dots joined by a line: measured runs\n"
                       "dotted verticals: sizes not measured (why, where a run stopped)\n"
                       "dashed: time proportional to size, from the first measured point\n"
                       "red cross: where pm4py stopped at that size\n\n"
                       + _machines(doc), fontsize=9)
    fig.suptitle("Sparkfield jobs at scale: wall time against size (log-log)")
    fig.tight_layout()
    target.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(target, dpi=90)
    plt.close(fig)


def verdicts(doc: dict) -> list[str]:
    lines = []
    for job in JOBS.values():
        rows = {r["size"]: r for r in doc["rows"] if r["job"] == job.name}
        ok = {k: r for k, r in rows.items() if r["status"] == "ok" and r.get("units")}
        big, mid = job.sizes[-1].label, job.sizes[-2].label
        if big in ok and mid in ok:
            ratio = (ok[big]["wall_s"] / ok[big]["units"]) / (ok[mid]["wall_s"] / ok[mid]["units"])
            r_line = f"per-unit time {big}/{mid} = {ratio:.2f} " \
                     f"({'meets' if ratio <= GOAL_RATIO else 'misses'} <= {GOAL_RATIO})"
        else:
            r_line = f"per-unit time {big}/{mid}: not measured"
        rss = {k: r.get("driver_python_peak_rss_mib") for k, r in rows.items()}
        over = [k for k, v in rss.items() if v and v > GOAL_RSS_MIB]
        missing = [s.label for s in job.sizes if s.label not in rows]
        rss_line = ", ".join(f"{k} {v} MiB" for k, v in rss.items()) or "none"
        not_run = f"; sizes not run: {', '.join(missing)}" if missing else ""
        lines.append(f"{job.name}: {r_line}; driver Python peak RSS {rss_line} "
                     f"({'over ' + ', '.join(over) if over else 'all within'} "
                     f"{GOAL_RSS_MIB} MiB{not_run})")
    return lines


def pick(job: Job, wanted: list[str] | None) -> list[Size]:
    if not wanted:
        return list(job.sizes)
    pos = {"smallest": 0, "middle": len(job.sizes) - 2, "largest": len(job.sizes) - 1}
    out = []
    for w in wanted:
        if w in pos:
            out.append(job.sizes[pos[w]])
        out += [s for s in job.sizes if s.label == w]
    return list(dict.fromkeys(out))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", default=",".join(JOBS))
    ap.add_argument("--sizes", help="smallest, middle, largest or size labels (x8, 2m, 30k)")
    ap.add_argument("--work", type=Path, default=Path("/work/bench/scale"))
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/scale.json")
    ap.add_argument("--chart", type=Path, default=ROOT / "docs/images/scale.png")
    ap.add_argument("--timeout", type=float, default=600, help="seconds a run may take")
    ap.add_argument("--no-pm4py", action="store_true")
    ap.add_argument("--chart-only", action="store_true", help="redraw from --out, run nothing")
    a = ap.parse_args()
    print(describe(), flush=True)
    rows: list[dict] = []
    if not a.chart_only:
        names = [n.strip() for n in a.jobs.split(",") if n.strip()]
        unknown = [n for n in names if n not in JOBS]
        if unknown:
            ap.error(f"unknown job(s) {unknown}; jobs: {', '.join(JOBS)}")
        wanted = a.sizes.split(",") if a.sizes else None
        a.work.mkdir(parents=True, exist_ok=True)
        for name in names:
            for size in pick(JOBS[name], wanted):
                row = run_job(JOBS[name], size, a.work, a.timeout)
                if name == "process_mining" and not a.no_pm4py:
                    log = str(a.work / "inputs" / f"bpic2012_x{_copies(size)}.xes")
                    row["pm4py"] = run_pm4py(log, a.timeout)
                rows.append(row)
                print(f"  {row['status']}: {row['wall_s']} s, {row['units']} {JOBS[name].unit}, "
                      f"{row['units_per_s']} /s, driver Python peak "
                      f"{row['driver_python_peak_rss_mib']} MiB, JVM heap peak "
                      f"{row.get('jvm_heap_peak_mib')} MiB, spilled "
                      f"{row.get('memory_bytes_spilled')} B memory / "
                      f"{row.get('disk_bytes_spilled')} B disk", flush=True)
                if "pm4py" in row:
                    p = row["pm4py"]
                    print(f"  pm4py: {p['status']}, {p['wall_s']} s, peak {p['peak_rss_mib']} MiB"
                          f" (cap {p['address_space_cap_gib']} GiB)"
                          + (f", stopped in {p['stopped_in']}" if p["stopped_in"] else ""),
                          flush=True)
                merge(a.out, [row])  # each run kept as soon as it is measured
    doc = merge(a.out, [])
    chart(doc, a.chart)
    print(f"results: {a.out}; chart: {a.chart}")
    for line in verdicts(doc):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
