"""Where a job's JVM time goes: one ``./submit.sh process_mining`` run with Java Flight
Recorder sampling the driver JVM (in the local profile it runs the executors' tasks too),
its samples put in categories by the Spark and library classes on their stacks.

The run report's steps say how long each step took; this says what the JVM did in them:
reading the XES records, the Python parse's Arrow traffic, shuffle writes, sorts, building and
reading the columnar caches (with the time their compression schemes take), the aggregations,
the CSV and Parquet writers, and the generated code's own work. The Python workers are
separate processes and are not sampled: the report gives the parse's share of their CPU.

Each sample is counted twice: by what it is doing (:data:`WORK`: the marker nearest the top
of its stack) and by what it works for (:data:`FOR`: a file writer, a cache being filled, a
shuffle's map side, a query's result); a sample with no marker counts under its thread's
name. Shares are of the samples, which JFR takes about every 10-20 ms from the running Java
threads.

Input: bpic2012 (262,200 real events) as plain XES, copied ``--copies`` times (every trace
under ``<case>#<copy>``, as ``scale.py`` does; 1 = the log as it is), written to a temporary
folder first. The job runs with its default conf and ``--driver-memory 1g``.

Usage: python benchmarks/jvm_profile.py [--copies 8] [--top 20] [--keep DIR]
Needs the JDK's ``jfr`` tool (next to ``java``; Debian's ``openjdk-17-jdk-headless``, not the
JRE the tests install): without it the script prints one line and exits 77 (this machine
cannot run it: `make bench` goes on to the next script).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from machine import describe
from process_logs import BPIC, scaled_xes

ROOT = Path(__file__).resolve().parents[1]

# what a sample is doing: the marker nearest the top of its stack names it (a date formatted
# for the CSV copy counts as formatting, the writer's own work as CSV text)
WORK = [
    ("columnar cache: compression stats", ("gatherCompressibilityStats",)),
    ("columnar cache: encoding", ("$Encoder.compress",)),
    ("columnar cache: decoding, reading", ("Encoding$Decoder", "PassThrough$Decoder",
                                           "Delta$Decoder", "BitSet$Decoder",
                                           "ColumnAccessor")),
    ("timestamp formatting (java.time)", ("DateTimeFormatter",)),
    ("percentile", ("Percentile",)),
    ("array_distinct", ("ArrayDistinct",)),
    ("lambda functions (transform, ...)", ("SimpleHigherOrderFunction",)),
    ("XES records read (text source)", ("LineReader",)),
    ("Arrow from the Python workers", ("ArrowColumnVector", "PythonArrowOutput")),
    ("Arrow to the Python workers", ("PythonArrowInput", "ArrowWriter")),
    ("CSV text (univocity)", ("com.univocity", "UnivocityGenerator")),
    ("size estimates of cached blocks", ("SizeEstimator",)),
    ("Parquet encoding", ("org.apache.parquet",)),
    ("sort", ("UnsafeExternalRowSorter", "UnsafeInMemorySorter", "UnsafeExternalSorter")),
    ("shuffle write", ("ShuffleExternalSorter", "DiskBlockObjectWriter",
                       "UnsafeRowSerializer")),
    ("shuffle read", ("ShuffleBlockFetcher", "BlockStoreShuffleReader")),
    ("hash aggregation (generated code)", ("hashAgg_",)),
    ("object aggregation (lists, percentiles)", ("ObjectAggregation", "TypedImperative")),
    ("sort aggregation", ("SortBasedAggregationIterator",)),
    ("code generation", ("org.codehaus.janino", "CodeGenerator")),
    ("columnar cache: build", ("CachedRDDBuilder", "ColumnBuilder")),
    ("other generated code", ("GeneratedClass",)),
]
# what a sample works for: the first of these, in this order, found anywhere in its stack (a
# CSV file's rows made for its writer count as writing the other files: only the writer's
# own frames name the CSV)
FOR = [
    ("writing the CSV files", ("CsvOutputWriter",)),
    ("writing the other files", ("FileFormatWriter",)),
    ("filling a cache", ("CachedRDDBuilder",)),
    ("a shuffle's map side", ("ShuffleMapTask",)),
    ("a query's result", ("ResultTask",)),
]
STACK_DEPTH = 256  # frames recorded and read a sample (JFR's default, 64, cuts Spark's stacks)
_FRAME = re.compile(r"^\s{4}(\S[^\n]*?)(?: line: \d+)?$", re.M)
_THREAD = re.compile(r'sampledThread = "([^"]*)"')


def jfr_tool() -> str:
    """The JDK's ``jfr``: in JAVA_HOME, else next to the ``java`` on PATH."""
    homes = [os.environ.get("JAVA_HOME", "")]
    java = shutil.which("java")
    if java:
        homes.append(str(Path(java).resolve().parents[1]))
    for home in homes:
        tool = Path(home) / "bin" / "jfr"
        if home and tool.exists():
            return str(tool)
    print("jvm_profile: the JDK's jfr tool was not found (install openjdk-17-jdk-headless or "
          "set JAVA_HOME to a JDK): not run")
    raise SystemExit(77)


def samples(jfr: str, recording: Path) -> list[tuple[str, list[str]]]:
    """(thread, frames top first) of each execution sample in ``recording``."""
    text = subprocess.run([jfr, "print", "--events", "jdk.ExecutionSample", "--stack-depth",
                           str(STACK_DEPTH), str(recording)], check=True, capture_output=True,
                          text=True).stdout
    out = []
    for block in text.split("jdk.ExecutionSample {")[1:]:
        thread = _THREAD.search(block)
        stack = block.split("stackTrace = [", 1)[-1]
        frames = [re.sub(r"\(.*", "", f) for f in _FRAME.findall(stack)
                  if f.strip() not in ("]", "...")]
        if frames:
            out.append((thread.group(1) if thread else "?", frames))
    return out


def _thread(name: str) -> str:
    return f"thread {re.sub(r'[0-9]+', 'N', name)}"


def doing(thread: str, frames: list[str]) -> str:
    for frame in frames:
        for label, markers in WORK:
            if any(m in frame for m in markers):
                return label
    return _thread(thread)


def working_for(thread: str, frames: list[str]) -> str:
    stack = "\n".join(frames)
    return next((label for label, markers in FOR if any(m in stack for m in markers)),
                _thread(thread))


def report(rows: list[tuple[str, list[str]]], top: int) -> None:
    n = len(rows)
    print(f"{n} samples of the driver JVM")
    for title, of in (("doing", doing), ("working for", working_for)):
        print(f"\nshare  {title}")
        counted = Counter(of(t, f) for t, f in rows).most_common()
        small = [count for _, count in counted if count < n / 200]
        for label, count in counted:
            if count >= n / 200:
                print(f"{100 * count / n:5.1f}%  {label}")
        if small:
            print(f"{100 * sum(small) / n:5.1f}%  {len(small)} more, under 0.5% each")
    print(f"\nshare  method at the top of the stack (its own time), top {top}")
    for frame, count in Counter(frames[0] for _, frames in rows).most_common(top):
        print(f"{100 * count / n:5.1f}%  {frame}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--copies", type=int, default=8, help="bpic2012 copied this many times")
    ap.add_argument("--top", type=int, default=20, help="methods listed by their own time")
    ap.add_argument("--keep", type=Path, help="keep the recording and the job's outputs here")
    args = ap.parse_args()
    if args.copies < 1:
        ap.error("--copies must be at least 1")
    if args.top < 1:
        ap.error("--top must be at least 1")
    if not BPIC.exists():
        raise SystemExit(f"error: {BPIC} not found (set SPARKFIELD_DATA to the data sets)")
    jfr = jfr_tool()
    print(describe())
    work = Path(tempfile.mkdtemp(prefix="jvm_profile_"))
    try:
        if re.search(r"[\s,]", str(work)):  # JFR's options are split at commas and spaces
            raise SystemExit(f"error: the temporary folder {work} holds a space or a comma, "
                             "which JFR's options cannot carry: set TMPDIR to another folder")
        log = work / f"bpic2012_x{args.copies}.xes"
        scaled_xes(args.copies, log)
        # the java launcher adds JDK_JAVA_OPTIONS to every JVM it starts: spark-submit's
        # launcher JVM writes a small recording of its own, the driver's is the largest. A
        # folder as the file name gives each JVM a file named by its pid (JDK 17 expands no
        # %p in a file name, so every JVM would write the same file)
        recorded = work / "recordings"
        recorded.mkdir()
        options = (f"-XX:FlightRecorderOptions:stackdepth={STACK_DEPTH} "
                   f"-XX:StartFlightRecording=settings=profile,filename={recorded}/")
        env = {**os.environ, "JDK_JAVA_OPTIONS": " ".join(
            filter(None, [os.environ.get("JDK_JAVA_OPTIONS"), options]))}
        cmd = [str(ROOT / "submit.sh"), "process_mining", "--driver-memory", "1g",
               "--log", str(log), "--output", str(work / "out")]
        t0 = time.perf_counter()
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if done.returncode:
            sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
            raise SystemExit(f"error: the job failed (exit {done.returncode})")
        recordings = sorted(recorded.glob("*.jfr"), key=lambda p: p.stat().st_size)
        if not recordings:
            raise SystemExit("error: the JVM wrote no recording (JDK_JAVA_OPTIONS ignored?)")
        recording = recordings[-1]
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            shutil.copy2(recording, args.keep / recording.name)
            shutil.copytree(work / "out", args.keep / "out", dirs_exist_ok=True)
        print(f"process_mining on bpic2012 x{args.copies}: {wall:.1f} s wall with the recorder")
        rows = samples(jfr, recording)
        if len(rows) < 100:  # a run of seconds takes thousands: not the driver's recording
            raise SystemExit(f"error: the largest of {len(recordings)} recordings "
                             f"({recording.name}) holds {len(rows)} samples")
        report(rows, args.top)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
