"""A quick first look at an object-centric log: the event_log job on an OCEL mapping of about
1,000 Olist orders, run as a user runs it (``./submit.sh event_log --mapping ...`` in a
process of its own), timed from the command to its exit, the JVM start included.

Input: the first ``--orders`` orders of Olist's 4,000-order sample (real data, CC BY-NC-SA 4.0)
and their rows in the other tables (items, payments, reviews, customers, products; the seller
table is the full one, as in conf/event_logs/olist_ocel.yaml), written as CSV under
``--work``. Mapping: conf/event_logs/olist_ocel.yaml (orders, customers, products, sellers)
pointed at that input and, unless ``--types 4``, two more object types from the same tables:
``payment`` (one per order payment, related to the payment events) and ``review`` (related to
the review events): six object types.

Goal: at most 25 s wall for the whole run on 1,000 orders and six object types.

Usage: python benchmarks/ocel_first_look.py [--orders 1000] [--types 6] [--repeat 1]
       [--work DIR] [--keep] [--submit-arg=ARG ...]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml
from machine import describe

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("SPARKFIELD_DATA", ROOT.parent / "shared/data")) / \
    "process_mining/olist"
GOAL_S = 25.0
TABLES = {
    "orders": "olist_orders_dataset.csv", "items": "olist_order_items_dataset.csv",
    "payments": "olist_order_payments_dataset.csv",
    "reviews": "olist_order_reviews_dataset.csv",
    "customers": "olist_customers_dataset.csv", "products": "olist_products_dataset.csv",
}


def _read(path: Path) -> tuple[list[str], list[list[str]]]:
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


def _write(path: Path, header: list[str], rows: list[list[str]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def build_input(orders: int, work: Path) -> dict[str, Path]:
    """The first ``orders`` orders of the 4,000-order sample and their rows in the other
    tables, as CSV files under ``work``; paths by source name."""
    src = DATA / "sample_4000_orders"
    work.mkdir(parents=True, exist_ok=True)
    out = {name: work / file for name, file in TABLES.items()}
    head, rows = _read(src / TABLES["orders"])
    rows = rows[:orders]
    _write(out["orders"], head, rows)
    ids = {r[head.index("order_id")] for r in rows}
    customers = {r[head.index("customer_id")] for r in rows}
    products: set[str] = set()
    for name in ("items", "payments", "reviews"):
        h, rs = _read(src / TABLES[name])
        rs = [r for r in rs if r[h.index("order_id")] in ids]
        if name == "items":
            products = {r[h.index("product_id")] for r in rs}
        _write(out[name], h, rs)
    for name, key, keep in (("customers", "customer_id", customers),
                            ("products", "product_id", products)):
        h, rs = _read(src / TABLES[name])
        _write(out[name], h, [r for r in rs if r[h.index(key)] in keep])
    out["sellers"] = DATA / "full_dimensions/olist_sellers_dataset.csv"
    return out


def mapping(paths: dict[str, Path], types: int) -> dict:
    """conf/event_logs/olist_ocel.yaml on ``paths``; with six types, payments and reviews
    are objects too."""
    doc = yaml.safe_load((ROOT / "conf/event_logs/olist_ocel.yaml").read_text())
    for name, s in doc["sources"].items():
        s["path"] = str(paths[name])
    if types == 6:
        doc["objects"]["payment"] = {
            "source": "payments", "id": "concat(order_id, '/', payment_sequential)",
            "attributes": ["payment_type", "payment_value"]}
        doc["objects"]["review"] = {"source": "reviews", "id": "review_id",
                                    "attributes": ["review_score"]}
        for a in doc["activities"]:
            if a.get("label") == "Payment":
                a["objects"].append({"type": "payment",
                                     "id": "concat(order_id, '/', payment_sequential)",
                                     "qualifier": "payment"})
            elif a.get("name") in ("Create review", "Answer review"):
                a["objects"].append({"type": "review", "id": "review_id",
                                     "qualifier": "review"})
    return doc


def run_job(mapping_file: Path, output: Path, submit_args: list[str]) -> float:
    """One event_log run in a process of its own; its wall seconds."""
    shutil.rmtree(output, ignore_errors=True)
    cmd = [str(ROOT / "submit.sh"), "event_log", *submit_args, "--mapping", str(mapping_file),
           "--output", str(output)]
    env = {**os.environ, "PYSPARK_PYTHON": os.environ.get(
        "PYSPARK_PYTHON", str(ROOT / ".venv/bin/python"))}
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
        raise SystemExit(f"event_log failed (exit {done.returncode}): {' '.join(cmd)}")
    return wall


def steps(output: Path) -> tuple[dict, list[dict]]:
    """The run report and its steps (step, seconds, within), in the order they ran."""
    rep = json.loads((output / "run_report.json").read_text())
    return rep, rep["steps"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--orders", type=int, default=1000)
    ap.add_argument("--types", type=int, choices=(4, 6), default=6)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--work", type=Path, default=ROOT / "build/bench_ocel_first_look")
    ap.add_argument("--keep", action="store_true", help="keep the input and the output")
    ap.add_argument("--submit-arg", action="append", default=[], metavar="ARG",
                    help="passed to submit.sh before the job's flags (repeat it), e.g. "
                    "--submit-arg=--conf --submit-arg=spark.sql.shuffle.partitions=2")
    a = ap.parse_args()
    print(describe())
    if a.submit_arg:
        print(f"submit.sh arguments: {' '.join(a.submit_arg)}")
    paths = build_input(a.orders, a.work / "input")
    mapping_file = a.work / "olist_ocel.yaml"
    mapping_file.write_text(yaml.safe_dump(mapping(paths, a.types), sort_keys=False))
    output = a.work / "out"
    walls = []
    for i in range(a.repeat):
        walls.append(run_job(mapping_file, output, a.submit_arg))
        print(f"run {i + 1}: {walls[-1]:.1f} s wall (./submit.sh event_log, JVM start "
              "included)")
    rep, timed = steps(output)
    out, counts = rep.get("outputs", {}), rep.get("counts", {})
    print(f"log: {a.orders:,} orders, {len(counts.get('objects_by_type', {}))} object types, "
          f"{out.get('events', 0):,} events, {out.get('objects', 0):,} objects, "
          f"{out.get('e2o', 0):,} event-object relations, "
          f"{rep.get('total_rejects', 0):,} rejects")
    print(f"steps of the last run (seconds; the report's total {rep['total_seconds']:.1f} s "
          "runs from the session's start, the wall above from the command's):")
    for s in timed:
        within = f"  (in {s['within']})" if "within" in s else ""
        print(f"  {s['step']:<28} {s['seconds']:7.2f}{within}")
    best = min(walls)
    verdict = "meets" if best <= GOAL_S else "misses"
    print(f"best wall {best:.1f} s of {len(walls)} run(s): {verdict} the goal of "
          f"{GOAL_S:.0f} s")
    if not a.keep:
        shutil.rmtree(a.work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
