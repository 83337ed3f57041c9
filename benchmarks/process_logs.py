"""What the process-mining benchmarks share: the bpic2012 log (BPI Challenge 2012, 262,200
real events) read as Sparkfield's events, its synthetic scale-up (every case copied under a new
id ``<case>#<copy>``: as Spark rows, as pandas rows in pm4py's columns, as an XES file), a
local session on a number of cores and a timer.

Imported by ``process_mining.py``, ``replay.py`` and ``xes_import.py``; it measures nothing
itself. Spark and pandas are imported where they are used.
"""

from __future__ import annotations

import gzip
import os
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: xes_import's pm4py reader measures its own memory
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

ROOT = Path(__file__).resolve().parents[1]
BPIC = Path(os.environ.get("SPARKFIELD_DATA", ROOT.parent / "shared/data")) / \
    "process_mining/event_logs/pm4py/bpic2012.xes.gz"
PM4PY_CASE = "case:concept:name"
_TRACE_NAME = re.compile(rb'(key="concept:name"\s+value=")([^"]*)(")')


def timed(fn):
    """``fn()`` and the seconds it took."""
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def local_session(app: str, cores: int) -> SparkSession:
    """Sparkfield's session for ``app`` on ``local[cores]``, four shuffle partitions a core,
    an 8 GiB driver, warnings only."""
    from sparkfield.core.conf import load_config
    from sparkfield.core.session import build_session

    cfg = load_config(app, "local", ROOT / "conf", {"spark": {
        "master": f"local[{cores}]",
        "conf": {"spark.sql.shuffle.partitions": str(4 * cores),
                 "spark.driver.memory": "8g"}}})
    spark = build_session(cfg)
    spark.sparkContext.setLogLevel("WARN")
    return spark


def bpic_events(spark: SparkSession) -> DataFrame:
    """bpic2012 as Sparkfield's good events (the standard XES names, every date kept);
    not cached."""
    from sparkfield.process.eventlog.events import classify, good_events
    from sparkfield.process.eventlog.read import read_log
    from sparkfield.process.jobs.params import PROCESS_MINING

    columns = PROCESS_MINING.parse({}).columns
    return good_events(classify(read_log(spark, str(BPIC), columns), "1970-01-01",
                                "2100-01-01", dedupe=False))


def scaled(base: DataFrame, pm_log: pd.DataFrame, copies: int, spark: SparkSession,
           cores: int) -> tuple[DataFrame, pd.DataFrame]:
    """The log with every case copied ``copies`` times under ``<case>#<copy>``, both sides:
    Spark events (partitioned by case, cached) and pm4py's pandas rows."""
    import pandas as pd
    from pyspark.sql import functions as F

    ids = spark.range(copies).withColumnRenamed("id", "copy")
    big = (base.crossJoin(ids).withColumn(
        "case_id", F.concat_ws("#", "case_id", F.col("copy").cast("string")))
        .drop("copy").repartition(4 * cores, "case_id").cache())
    parts = []
    for c in range(copies):
        part = pm_log.copy()
        part[PM4PY_CASE] = part[PM4PY_CASE] + f"#{c}"
        parts.append(part)
    return big, pd.concat(parts, ignore_index=True)


def scaled_note(events: int, copies: int) -> str:
    """The line every benchmark prints about a scaled log."""
    return (f"SCALED LOG: {events:,} events = bpic2012 x {copies}, every case copied under a "
            "new id '<case>#<copy>' (synthetic scale-up of real traces)")


def scaled_xes(copies: int, target: Path) -> None:
    """bpic2012 as a plain XES file with every trace repeated ``copies`` times, the trace name
    suffixed ``#<copy>`` (the same scale-up as :func:`scaled`, at the file's level)."""
    text = gzip.decompress(BPIC.read_bytes())
    first = text.index(b"<trace")
    end = text.rindex(b"</log>")
    head, body, tail = text[:first], text[first:end], text[end:]
    traces = [b"<trace" + t for t in body.split(b"<trace")[1:]]
    with open(target, "wb") as out:
        out.write(head)
        for k in range(copies):
            suffix = f"#{k}".encode()
            for t in traces:
                cut = t.index(b"<event") if b"<event" in t else len(t)
                name = _TRACE_NAME.sub(lambda m, s=suffix: m.group(1) + m.group(2) + s
                                       + m.group(3), t[:cut], count=1)
                out.write(name + t[cut:])
        out.write(tail)
