"""The events' Parquet files and the CSV and XES copies: each case whole in one file, its
events in event order, however the input's rows were spread; made from the cache's
partitions (no shuffle of their own) when nothing regroups the events, and ordered by the
writer when something does."""

import gzip
import random
import re
from collections import Counter
from contextlib import ExitStack
from datetime import datetime, timedelta

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from sparkfield.core.conf import load_config
from sparkfield.core.session import session_setting
from sparkfield.process import run_process_mining
from sparkfield.process.eventlog.events import classify
from sparkfield.process.jobs.compute import _case_partitions, compute
from sparkfield.process.jobs.params import PROCESS_MINING

from .test_compute import RAW

CASES = 40


def _log(tmp_path):
    """A Parquet log of 40 cases in six files (read as several partitions), its rows in
    shuffled order, with ties in time broken by file order, and a lifecycle column for the
    classifier that renames activities."""
    rnd = random.Random(7)
    t0 = datetime(2021, 3, 1)
    rows = []
    for c in range(CASES):
        for k in range(rnd.randint(1, 9)):
            when = t0 + timedelta(hours=c, minutes=rnd.choice([0, 0, 5, 10]) + k // 3)
            rows.append((f"c{c:02d}", rnd.choice("ABCD"), f"{when:%Y-%m-%dT%H:%M:%S}Z",
                         rnd.choice(["start", "complete"])))
    rnd.shuffle(rows)
    path = tmp_path / "log"
    path.mkdir()
    for i in range(6):
        part = rows[i::6]
        pq.write_table(pa.table({k: [r[j] for r in part] for j, k in
                                 enumerate(["case", "act", "ts", "lifecycle"])}),
                       path / f"part-{i}.parquet")
    return path, len(rows)


def _files(events_dir):
    """Each Parquet part's rows in file order: (case, timestamp, row_order, activity)."""
    out = []
    for f in sorted(events_dir.glob("part-*.parquet")):
        t = pq.read_table(f).to_pydict()
        out.append(list(zip(t["case_id"], t["timestamp"], t["row_order"], t["activity"],
                            strict=True)))
    return out


@pytest.fixture
def several_partitions(spark):
    """Shuffles keep their 4 partitions: small data is not merged into one."""
    with session_setting(spark, "spark.sql.adaptive.coalescePartitions.enabled", "false"):
        yield


@pytest.mark.parametrize("job", [
    {},  # in the cache's order
    {"classifier": "name+lifecycle"},  # renamed activities: the writer orders them
    {"filters": [{"name": "filter_variants_top_k", "k": 1000}]},  # filtered: the writer too
])
def test_each_case_is_whole_in_one_file_in_event_order(spark, repo_root, tmp_path,
                                                        several_partitions, job):
    log, n = _log(tmp_path)
    out = tmp_path / "out"
    cfg = load_config("process_mining", "local", repo_root / "conf", {"job": {
        "log": str(log), "output": str(out), "model": False, "conformance": False,
        "statistics": False, "exports": "both", "render_map": False,
        "columns": {"case": "case", "activity": "act", "timestamp": "ts",
                    "lifecycle": "lifecycle"}, **job}})
    run_process_mining(spark, cfg)
    files = _files(out / "events")
    assert len([f for f in files if f]) > 1  # the test means something only then
    assert sum(len(f) for f in files) == n
    seen = [{r[0] for r in f} for f in files]
    assert all(not (a & b) for i, a in enumerate(seen) for b in seen[i + 1:])  # whole cases
    for f in files:
        assert f == sorted(f)  # by case, then time, then row order (all rows differ there)
    assert len(set().union(*seen)) == CASES
    # the CSV copy: the same events, each case's together in event order (in the files'
    # case order when written from the cache's partitions, else in case id order)
    csv = pd.read_csv(out / "event_log.csv.gz", dtype=str, keep_default_na=False)
    got = list(zip(csv["case_id"], csv["activity"], csv["timestamp"], strict=True))
    stamp = "%Y-%m-%dT%H:%M:%S.000Z"
    want = [(r[0], r[3], r[1].strftime(stamp)) for f in files for r in f]
    order = [r[0] for r in got]
    cases = list(dict.fromkeys(order))
    assert len(cases) == CASES and sorted(order) == sorted(r[0] for r in want)
    by_case = {c: [r for r in want if r[0] == c] for c in cases}
    assert got == [r for c in cases for r in by_case[c]]  # whole cases, in event order
    if not job:
        assert cases == list(dict.fromkeys(r[0] for r in want))  # the files' case order
        encoded = _dictionary_encoded(out / "events")  # (the resource is null here)
        assert {k: encoded[k] for k in ("case_id", "activity", "timestamp", "row_order")} == {
            "case_id": False, "activity": True, "timestamp": False, "row_order": False}
    else:
        assert cases == sorted(cases)
    # the XES copy: its traces in the CSV's case order, each trace's events in event order
    text = gzip.decompress((out / "event_log.xes.gz").read_bytes()).decode()
    traces = re.findall(r'<trace><string key="concept:name" value="([^"]*)"/>(.*?)</trace>',
                        text)
    assert [name for name, _ in traces] == cases
    for name, body in traces:
        acts = re.findall(r'<event><string key="concept:name" value="([^"]*)"/>', body)
        assert acts == [r[1] for r in by_case[name]]


def _dictionary_encoded(events_dir):
    """Whether each column of the first Parquet part that holds rows is dictionary-encoded:
    conf/base.yaml leaves the dictionary out for the case id, row order and time, for every
    write of the session (options of one write missed some of its files while writes with
    other options ran beside it)."""
    for f in sorted(events_dir.glob("part-*.parquet")):
        meta = pq.ParquetFile(f).metadata
        if meta.num_rows:
            group = meta.row_group(0)
            return {group.column(i).path_in_schema: any(
                "DICTIONARY" in e for e in group.column(i).encodings)
                for i in range(group.num_columns) if "." not in group.column(i).path_in_schema}
    raise AssertionError("no events were written")


def _computed(spark, rows, partitions, stack):
    """:func:`compute` on inline rows spread over ``partitions`` (no model, conformance or
    statistics)."""
    classified = classify(spark.createDataFrame(rows, RAW).repartition(partitions), None, None,
                          dedupe=False)
    p = PROCESS_MINING.parse({"output": None, "model": False, "conformance": False,
                              "statistics": False})
    return compute(classified, F.lit("log"), {0: "log"}, p, stack, "inline")


def test_events_in_order_skip_the_writers_shuffle(spark, several_partitions):
    """The claim behind the flag: a write of the events as computed plans no exchange."""
    d = datetime(2020, 1, 1)
    rows = [(f"c{i % 7}", "A", d + timedelta(minutes=i), None, None, None, 0, i,
             (d + timedelta(minutes=i)).isoformat()) for i in range(50)]
    with ExitStack() as stack:
        c = _computed(spark, rows, 3, stack)
        plan = c.events._jdf.queryExecution().executedPlan().toString()
        parts = c.events.rdd.glom().collect()
    assert c.events_in_order
    assert "Exchange" not in plan.split("InMemoryRelation")[0]
    keys = [[(r["case_id"], r["timestamp"], r["row_order"]) for r in part] for part in parts]
    assert all(k == sorted(k) for k in keys)
    cases = [{k[0] for k in part} for part in keys]
    assert sum(len(s) for s in cases) == 7


def test_the_case_table_is_cached_in_few_partitions(spark, several_partitions):
    """The per-case table, which many small aggregations read, is cached in
    ``_case_partitions`` partitions rather than the events' own (coalesced, not shuffled),
    every case once with its events."""
    d = datetime(2020, 1, 1)
    rnd = random.Random(5)
    rows = [(f"c{rnd.randrange(200)}", "A", d + timedelta(minutes=i), None, None, None, 0, i,
             "x") for i in range(2000)]
    with ExitStack() as stack:
        c = _computed(spark, rows, 5, stack)
        assert c.events.rdd.getNumPartitions() > 2
        assert c.views.cases.rdd.getNumPartitions() == 2
        cases = {r["case_id"]: r["events"] for r in c.views.cases.collect()}
        assert c.views.cases.count() == len(cases)
    assert cases == dict(Counter(r[0] for r in rows))
    # one event a case: the cases decide
    assert [_case_partitions(n, n) for n in (0, 1, 400_000, 400_001, 1_046_960)] == \
        [2, 2, 2, 3, 6]
    # a few long cases: one task per EVENTS_PER_PARTITION of their events
    assert [_case_partitions(1_000, n) for n in (8_000_000, 8_000_001, 100_000_000)] == \
        [2, 3, 25]


def test_sequences_of_grouped_events_are_aggregated_in_order(spark, several_partitions):
    """Each case's sequence made one case after another from the cache's order (no hash map
    of the cases, no sort of its own), the same as the events sorted by hand; the session's
    setting is as it was after."""
    key = "spark.sql.execution.useObjectHashAggregateExec"
    before = spark.conf.get(key)
    d = datetime(2020, 1, 1)
    rnd = random.Random(3)
    rows = [(f"c{rnd.randrange(300)}", rnd.choice("ABC"), d + timedelta(minutes=rnd.randrange(99)),
             None, None, None, 0, i, "x") for i in range(3000)]
    with ExitStack() as stack:
        c = _computed(spark, rows, 5, stack)
        plan = c.views.cases._jdf.queryExecution().executedPlan().toString()
        got = {r["case_id"]: r["variant"] for r in c.views.cases.collect()}
    assert "SortAggregate" in plan and "ObjectHashAggregate" not in plan
    want: dict[str, list] = {}
    for r in sorted(rows, key=lambda r: (r[0], r[2], r[7])):
        want.setdefault(r[0], []).append(r[1])
    assert got == {k: "[" + ",".join(f'"{a}"' for a in v) + "]" for k, v in want.items()}
    assert spark.conf.get(key) == before
