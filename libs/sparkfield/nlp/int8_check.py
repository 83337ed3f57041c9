"""The int8 accuracy check of the classifier stages: dynamic int8 keeps most models' labels,
but not every model's (weights or activations with outliers lose their resolution), so a
stage with ``quantize`` int8 compares the int8 export against the fp32 export on a sample of
its own input before it runs.

:func:`int8_agreement` measures: one Spark job over the first ``int8SampleRows`` non-blank
input rows runs both exports on the executors (so it works over Spark Connect and where only
the executors have the model) and returns the share of labels int8 changed (sequence
classification: each row's top label; token classification: each token's label, special
tokens left out) and the largest score difference. :func:`check_int8`, which ``transform``
calls, says nothing within ``int8MaxDisagreement``; past it, it warns (Python warning and
log) or, with ``int8Check`` refuse, raises an :class:`~sparkfield.core.errors.InputError`.
"""

from __future__ import annotations

import dataclasses
import logging
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.core.errors import ConfigError, InputError
from sparkfield.nlp.embed import SPLIT, SPLIT_TYPE, EngineSpec, model_udf, ready, worker_encoder
from sparkfield.nlp.encoder import Split
from sparkfield.nlp.head_rows import text_input

log = logging.getLogger("sparkfield.nlp")
_COMPARED = T.StructType([T.StructField("units", T.LongType(), False),
                          T.StructField("differing", T.LongType(), False),
                          T.StructField("max_difference", T.DoubleType(), False),
                          T.StructField(SPLIT, SPLIT_TYPE, True)])


class Int8DisagreementWarning(UserWarning):
    """int8 changed more labels than ``int8MaxDisagreement`` allows on the sampled rows."""


@dataclass(frozen=True)
class Int8Agreement:
    """int8 against fp32 on a sample of rows."""

    rows: int  # sampled rows compared
    units: int  # labels compared: one per row (sequence), one per token (token classification)
    differing: int  # of those, labels int8 changed
    max_score_difference: float  # the largest |int8 - fp32| of any label's score
    unit: str = "rows"  # what a unit is: rows or tokens

    @property
    def share(self) -> float:
        """The share of labels int8 changed (0 when nothing was compared)."""
        return self.differing / self.units if self.units else 0.0


def int8_agreement(df: DataFrame, stage: Any) -> Int8Agreement:
    """int8 against fp32 for a classifier stage (engine onnx, quantize int8) on the first
    ``int8SampleRows`` non-blank rows of ``df``, without transforming. Runs a Spark job."""
    if stage.getQuantize() != "int8":
        raise ConfigError(f"{type(stage).__name__}: int8_agreement needs quantize int8 "
                          f"(quantize is {stage.getQuantize()})")
    quiet = stage.copy({stage.int8Check: "off"})
    extra = {"function": stage.getFunction()} if stage.hasParam("function") else {}
    return measure(df, stage, quiet.engine_spec(df, **extra))


def check_int8(df: DataFrame, stage: Any, spec: EngineSpec) -> Int8Agreement:
    """:func:`measure`, then past the stage's ``int8MaxDisagreement`` a warning
    (:class:`Int8DisagreementWarning` and a log line) or, with ``int8Check`` refuse, an
    :class:`~sparkfield.core.errors.InputError`. Runs a Spark job."""
    found = measure(df, stage, spec)
    limit = float(stage.getInt8MaxDisagreement())
    if found.share <= limit:
        return found
    text = (f"{type(stage).__name__} with quantize int8: int8 changed {found.differing} of "
            f"{found.units} labels ({found.share:.1%} of the {found.unit}) on {found.rows} "
            f"sampled rows against fp32, over int8MaxDisagreement {limit:.1%}; largest score "
            f"difference {found.max_score_difference:.4f}. Use quantize none (fp32), or raise "
            "int8MaxDisagreement if that many changed labels are acceptable")
    if stage.getInt8Check() == "refuse":
        raise InputError(text)
    log.warning(text)
    warnings.warn(text, Int8DisagreementWarning, stacklevel=2)
    return found


def measure(df: DataFrame, stage: Any, spec: EngineSpec) -> Int8Agreement:
    """int8 (``spec``, made ready) against its fp32 export on the first ``int8SampleRows``
    non-blank rows of ``df``, both run on the executors. Runs a Spark job."""
    fp32 = ready(df.sparkSession, dataclasses.replace(spec, quantize="none", onnx_file=None))
    columns = stage._inputs(df)
    pairs = len(columns) > 1
    inputs = text_input(df, columns[0], columns[1] if pairs else None)
    # a stage whose label is not the head's (zero-shot: the best candidate label) says how it
    # scores its texts on a head
    scorer = stage.int8_scorer() if hasattr(stage, "int8_scorer") else None
    sample = (df.select(inputs.alias("x"))
              .where(F.col("x.reason").isNull()).limit(int(stage.getInt8SampleRows())))
    compare = model_udf(spec, _work(fp32, spec.export_task == "token-classification", pairs,
                                    stage.getBatchSize(), stage.getBucket(), scorer),
                        _COMPARED)
    row = sample.select(compare(F.col("x")).alias("c")).agg(
        F.count(F.lit(1)).alias("rows"), F.sum("c.units").alias("units"),
        F.sum("c.differing").alias("differing"),
        F.max("c.max_difference").alias("max_difference")).first()
    return Int8Agreement(int(row["rows"]), int(row["units"] or 0), int(row["differing"] or 0),
                         float(row["max_difference"] or 0.0),
                         "tokens" if spec.export_task == "token-classification" else "rows")


def _work(fp32: EngineSpec, tokens: bool, pairs: bool, batch_size: int, bucket: bool,
          scorer: Callable[..., np.ndarray] | None = None
          ) -> Callable[[pa.StructArray, Callable[[], Any], Split], list[pa.Array]]:
    """What the check's UDF does with one Arrow batch: both exports on its texts, per row
    the labels compared, the labels int8 changed and the largest score difference
    (``scorer``: the stage's own scores of its texts on a head, its best the label)."""

    def work(inputs: pa.StructArray, model: Callable[[], Any], split: Split) -> list[pa.Array]:
        texts = inputs.field("text").to_pylist()
        second = inputs.field("pair").to_pylist() if pairs else None
        int8, full = model(), worker_encoder(fp32)
        if scorer is not None:
            a = scorer(full, texts, batch_size, bucket, split)
            b = scorer(int8, texts, batch_size, bucket, split)
            units = np.ones(len(texts), dtype=np.int64)
            differing = (a.argmax(axis=1) != b.argmax(axis=1)).astype(np.int64)
            diff = np.abs(a - b).max(axis=1, initial=0.0)
        elif tokens:
            a = full.tag(texts, batch_size, bucket, split)
            b = int8.tag(texts, batch_size, bucket, split)
            units, differing, diff = _token_rows(a, b)
        else:
            a = full.classify(texts, second, batch_size, bucket, split)
            b = int8.classify(texts, second, batch_size, bucket, split)
            units = np.ones(len(texts), dtype=np.int64)
            differing = (a.best != b.best).astype(np.int64)
            diff = np.abs(a.scores - b.scores).max(axis=1, initial=0.0)
        return [pa.array(units, pa.int64()), pa.array(differing, pa.int64()),
                pa.array(diff, pa.float64())]

    return work


def _token_rows(a: Any, b: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per text: its tokens (special tokens left out), those whose label int8 changed, the
    largest score difference of any token's label."""
    n = len(a.scores)
    units, differing, diff = (np.zeros(n, np.int64), np.zeros(n, np.int64),
                              np.zeros(n, np.float64))
    for i, (x, y) in enumerate(zip(a.scores, b.scores, strict=True)):
        real = ~np.asarray(a.tokens.encodings[i].special_tokens_mask, dtype=bool)
        units[i] = int(real.sum())
        differing[i] = int((x.argmax(axis=1) != y.argmax(axis=1))[real].sum())
        diff[i] = float(np.abs(x - y)[real].max(initial=0.0))
    return units, differing, diff
