"""The rows an inference stage's Arrow UDF reads and the outcome every result carries: the
input struct (text, pair, reason: a null or blank text has its reason before any model runs),
the rows to run, the ``truncated`` and ``reason`` fields, and :func:`count_outcomes`."""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.core.columns import column
from sparkfield.nlp.embed import blank
from sparkfield.nlp.encoder import Split

TOO_LONG = "too long"
OUTCOME = [T.StructField("truncated", T.BooleanType(), True),
           T.StructField("reason", T.StringType(), True)]


def missing_reason(text: Column, what: str) -> Column:
    return F.when(text.isNull(), f"null {what}").when(blank(text), f"empty {what}")


def text_input(dataset: DataFrame, text_col: str, pair_col: str | None) -> Column:
    """struct<text, pair, reason>: the UDF's input; reason set where a text is missing."""
    text = column(text_col).cast("string")
    pair = column(pair_col).cast("string") if pair_col else F.lit(None).cast("string")
    reason = missing_reason(text, "text")
    if pair_col:
        reason = F.coalesce(reason, missing_reason(pair, "text pair"))
    return F.struct(text.alias("text"), pair.alias("pair"), reason.alias("reason"))


def rows_to_run(inputs: pa.StructArray, split: Split,
          pairs: bool) -> tuple[np.ndarray, list[str], list[str] | None, list[str | None]]:
    """(rows to run, their texts, their pairs, every row's reason so far)."""
    t0 = time.perf_counter()
    reasons = inputs.field("reason").to_pylist()
    rows = np.fromiter((i for i, r in enumerate(reasons) if r is None), dtype=np.int64)
    texts = inputs.field("text").take(pa.array(rows)).to_pylist()
    second = inputs.field("pair").take(pa.array(rows)).to_pylist() if pairs else None
    split.arrow_in += time.perf_counter() - t0
    return rows, texts, second, reasons


def outcome_arrays(n: int, rows: np.ndarray, truncated: np.ndarray, reasons: list[str | None],
             reject: bool) -> tuple[np.ndarray, list[pa.Array]]:
    """(rows with a result, [truncated, reason] arrays) once ``rows`` ran."""
    cut = np.zeros(n, dtype=bool)
    cut[rows] = truncated
    ran = np.zeros(n, dtype=bool)
    ran[rows] = True
    if reject:
        for i in rows[truncated].tolist():
            reasons[i] = TOO_LONG
    keep = ran & ~(cut & reject)
    return keep, [pa.array(cut, mask=~ran), pa.array(reasons, pa.string())]


def count_outcomes(df: DataFrame, name: str) -> dict[str, int]:
    """Rows of ``df`` by what became of them in a classifier's result column ``name``:
    ``classified`` (with a result), ``truncated`` (of those, cut to maxTokens), and one count
    per reason (``null text``, ``too long``...). Runs one Spark job."""
    result = column(name)
    rows = df.groupBy(result["reason"].alias("reason")).agg(
        F.count(F.lit(1)).alias("n"),
        F.sum(result["truncated"].cast("int")).alias("cut")).collect()
    out = {"classified": 0, "truncated": 0}
    for r in rows:
        if r["reason"] is None:
            out["classified"] += r["n"]
            out["truncated"] += int(r["cut"] or 0)
        else:
            out[r["reason"]] = r["n"]
    return out
