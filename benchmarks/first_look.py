"""First looks against Spark's own start-up: small inputs run as a user runs them (one
``./submit.sh`` process each, timed from the command to its exit, the JVM start included),
against a hello-world ``spark-submit`` on the same machine in the same sitting (a script that
starts a session and counts ``spark.range(1000)``, with the same Python, master and driver
memory as the jobs' local profile).

Inputs, both real:
- ``event_log`` on an OCEL mapping of the first ``--orders`` Olist orders with six object types
  (``ocel_first_look.py`` builds it: orders, customers, products, sellers, payments, reviews);
- ``process_mining`` with its default conf on ``receipt.xes.gz`` (pm4py's receipt log: 1,434
  cases, 8,577 events).

Each command runs once "first", as on the first run after ``make run`` on a fresh checkout:
the driver JVM's class archive is removed and ``make run`` run once (it writes the archive
as a user's quick start does), then the page cache is dropped before each first run (needs
root); then ``--repeat`` rounds warm, each running every command once in turn, and the best
warm wall of each is kept. Goals: a small input
takes at most 2x the hello world warm and 3x first.

Usage: python benchmarks/first_look.py [--orders 830] [--repeat 3] [--no-first]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from machine import describe
from ocel_first_look import build_input, mapping, steps

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("SPARKFIELD_DATA", ROOT.parent / "shared/data"))
RECEIPT = DATA / "process_mining/event_logs/pm4py/receipt.xes.gz"
PY = os.environ.get("SPARKFIELD_PYTHON", str(ROOT / ".venv/bin/python"))
GOAL_WARM, GOAL_FIRST = 2.0, 3.0

HELLO = """
from pyspark.sql import SparkSession
spark = SparkSession.builder.appName("hello").getOrCreate()
print("rows", spark.range(1000).count())
spark.stop()
"""


def _make_run(env: dict[str, str]) -> float:
    """``make run`` as on a fresh checkout: without the driver's class archive, which it
    writes."""
    shutil.rmtree(ROOT / "build/jvm", ignore_errors=True)
    return _wall(["make", "run"], env)


def _drop_caches() -> bool:
    """Drop the page cache (root only): a first run's state."""
    try:
        subprocess.run(["sync"], check=True)
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def _wall(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t0
    if done.returncode:
        sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
        raise SystemExit(f"failed (exit {done.returncode}): {' '.join(cmd)}")
    return wall


def _local_profile() -> tuple[str, str]:
    """The local profile's master and driver memory, which the hello world runs with too."""
    doc = yaml.safe_load((ROOT / "conf/local.yaml").read_text())["spark"]
    return doc["master"], doc["conf"]["spark.driver.memory"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--orders", type=int, default=830)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-first", action="store_true", help="warm runs only")
    ap.add_argument("--work", type=Path, default=ROOT / "build/bench_first_look")
    a = ap.parse_args()
    print(describe())
    work = a.work
    shutil.rmtree(work, ignore_errors=True)
    paths = build_input(a.orders, work / "input")
    mapping_file = work / "olist_ocel.yaml"
    mapping_file.write_text(yaml.safe_dump(mapping(paths, 6), sort_keys=False))
    hello = work / "hello.py"
    hello.write_text(HELLO)
    master, memory = _local_profile()
    spark_home = subprocess.run([PY, "-c", "import os, pyspark; print(os.path.dirname("
                                 "pyspark.__file__))"], capture_output=True, text=True,
                                check=True).stdout.strip()
    env = {**os.environ, "PYSPARK_PYTHON": PY, "PYSPARK_DRIVER_PYTHON": PY,
           "SPARKFIELD_PYTHON": PY}
    out = Path(tempfile.mkdtemp(prefix="sparkfield-first-look-"))
    commands = {
        "hello world": [f"{spark_home}/bin/spark-submit", "--master", master,
                        "--driver-memory", memory, "--conf", "spark.ui.showConsoleProgress=false",
                        str(hello)],
        f"event_log, OCEL of {a.orders} orders, 6 object types":
            [str(ROOT / "submit.sh"), "event_log", "--mapping", str(mapping_file), "--output",
             str(out / "event_log")],
        "process_mining, receipt.xes.gz (8,577 events), default conf":
            [str(ROOT / "submit.sh"), "process_mining", "--log", str(RECEIPT), "--output",
             str(out / "process_mining")],
    }
    first: dict[str, float] = {}
    warm: dict[str, float] = {}
    if not a.no_first:
        print(f"make run (writes the driver's class archive): {_make_run(env):.1f} s")
    try:
        if not a.no_first:
            for name, cmd in commands.items():
                if not _drop_caches():
                    print("(not root: the page cache stays warm for the first runs)")
                first[name] = _wall(cmd, env)
        # warm rounds alternate between the commands, so that a drift in the machine's speed
        # reaches every command alike
        walls: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(a.repeat):
            for name, cmd in commands.items():
                walls[name].append(_wall(cmd, env))
        for name in commands:
            warm[name] = min(walls[name])
            said = f"first {first[name]:.1f} s, " if name in first else ""
            print(f"{name}: {said}best warm {warm[name]:.1f} s of "
                  f"{', '.join(f'{w:.1f}' for w in walls[name])}")
        for name, folder in (("event_log", "event_log"), ("process_mining", "process_mining")):
            _, timed = steps(out / folder)
            print(f"{name}'s last run, steps (s): " + ", ".join(
                f"{s['step']} {s['seconds']:.1f}" for s in timed if "within" not in s))
    finally:
        shutil.rmtree(out, ignore_errors=True)
    base = "hello world"
    for name in list(commands)[1:]:
        ratio = warm[name] / warm[base]
        line = (f"{name}: warm {ratio:.2f}x the hello world "
                f"({'meets' if ratio <= GOAL_WARM else 'misses'} {GOAL_WARM:.0f}x)")
        if name in first:
            r1 = first[name] / first[base]
            line += (f"; first {r1:.2f}x "
                     f"({'meets' if r1 <= GOAL_FIRST else 'misses'} {GOAL_FIRST:.0f}x)")
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
