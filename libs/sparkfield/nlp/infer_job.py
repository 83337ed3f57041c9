"""The infer job: a local Hugging Face model over a table's texts, as one of the inference
stages (classify, entities, zero-shot, answer, generate), with rejects, counts and where the
workers' time went.

:func:`run` reads the table and makes the stage, calls :func:`compute` and writes through one
atomic output: ``results/`` (a row per input row with a result: its id, the columns it was
given, the result's fields), ``rejects/`` (a row per input row without one: its id, inputs and
reason), ``attention/`` (task generate: cross-attention maps of the first rows) and the run
report. :func:`compute` takes DataFrames and a stage and returns DataFrames and counts."""

from __future__ import annotations

import logging
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from pyspark.ml import Transformer
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sparkfield.core.columns import column
from sparkfield.core.conf import Config
from sparkfield.core.errors import ConfigError
from sparkfield.core.failures import raises_input_errors
from sparkfield.core.io import AtomicOutput, optional_output
from sparkfield.core.practices import cached, sample
from sparkfield.core.report import RunReport, Stats
from sparkfield.core.spark_ui import publish
from sparkfield.nlp.embed import SPLIT
from sparkfield.nlp.encoder import Split
from sparkfield.nlp.model import check_model_dir
from sparkfield.nlp.params import INFER, InferParams, check_infer
from sparkfield.nlp.tables import ROW_ID, read_table

log = logging.getLogger("sparkfield.nlp")
RESULT = "__result"  # the stage's result column while the job works on it
OUTCOME_FIELDS = ("truncated", "reason")


@dataclass
class InferResult:
    """What :func:`run` returns: the results (rows with a result), the rejects (rows without
    one, with the reason), the run report, and the cross-attention maps drawn (task
    generate: (id, PNG bytes))."""

    results: DataFrame
    rejects: DataFrame
    report: RunReport
    output: str | None = None
    maps: list[tuple[str, bytes]] = field(default_factory=list)


@dataclass
class InferComputed:
    """What :func:`compute` returns; ``results`` and ``rejects`` read the cached scored rows
    until the ``stack`` given to compute closes."""

    results: DataFrame
    rejects: DataFrame
    stats: Stats
    maps: list[tuple[str, bytes]] = field(default_factory=list)


def input_columns(p: InferParams) -> list[str]:
    """The text columns the task reads."""
    if p.task == "answer":
        return [p.question_col, p.context_col]
    return [p.text_col, *([p.pair_col] if p.task == "classify" and p.pair_col else [])]


def _shared(p: InferParams) -> dict[str, Any]:
    """The stage params every task takes from the job's keys."""
    return {"modelPath": p.model, "outputCol": RESULT, "device": p.device,
            "batchSize": p.batch_size, "maxTokens": p.max_tokens, "bucket": p.bucket,
            "onLongText": p.on_long_text, "precision": p.precision}


def _engine(p: InferParams) -> dict[str, Any]:
    """The engine params of the stages that run on ONNX Runtime too."""
    return {"engine": p.engine, "quantize": p.quantize}


def stage_for(p: InferParams) -> Transformer:
    """The inference stage of ``p.task``, set from the job's parameters."""
    shared = _shared(p)
    if p.task == "classify":
        from sparkfield.nlp.classify import TextClassifier

        return TextClassifier(inputCol=p.text_col, pairCol=p.pair_col,
                              function=p.classify.function,
                              probabilities=p.classify.probabilities, **shared, **_engine(p))
    if p.task == "entities":
        from sparkfield.nlp.classify import TokenClassifier

        return TokenClassifier(inputCol=p.text_col,
                               aggregationStrategy=p.entities.aggregation,
                               ignoreLabels=list(p.entities.ignore_labels), **shared,
                               **_engine(p))
    if p.task == "zero-shot":
        from sparkfield.nlp.zero_shot import ZeroShotClassifier

        return ZeroShotClassifier(inputCol=p.text_col,
                                  candidateLabels=list(p.zero_shot.labels),
                                  hypothesisTemplate=p.zero_shot.template,
                                  multiLabel=p.zero_shot.multi_label, **shared, **_engine(p))
    if p.task == "answer":
        from sparkfield.nlp.question_answering import QuestionAnswerer

        a = p.answer
        return QuestionAnswerer(questionCol=p.question_col, contextCol=p.context_col,
                                stride=a.stride, maxAnswerLength=a.max_answer_length,
                                topK=a.top_k, handleImpossibleAnswer=a.handle_impossible,
                                **shared)
    if p.task == "generate":
        from sparkfield.nlp.generation import TextGenerator

        g = p.generate
        return TextGenerator(inputCol=p.text_col, numBeams=g.num_beams,
                             maxNewTokens=g.max_new_tokens, prefix=g.prefix, **shared)
    raise ConfigError(f"unknown task {p.task!r}")


@raises_input_errors
def run(spark: SparkSession, cfg: Config) -> InferResult:
    """Load, compute, write. What the executors raise for the user to fix (a device they
    lack, bad input) comes back as itself: one ``error:`` line on the command line."""
    p = INFER.parse(cfg.job)
    check_infer(p.input, p.model, p.task, list(p.zero_shot.labels), p.engine, p.quantize)
    check_model_dir(p.model)  # before any Spark work
    seed = cfg.practices.sample_seed
    report = RunReport("infer", params={**asdict(p), "seed": seed})
    id_col = p.id_col or ROW_ID
    with optional_output(spark, p.output) as out, ExitStack() as stack:
        rows = sample(read_table(spark, p.input, [*input_columns(p), *p.keep_cols], p.id_col),
                      p.sample, seed)
        stage = stage_for(p)
        c = compute(p, id_col, rows, stage, stack)
        report.merge(c.stats)
        if out is not None:
            _write(out, c, report)
        publish(spark, out, report, cfg.practices.skew_ratio_threshold, p.max_reject_fraction)
    log.info(report.summary())
    return InferResult(results=c.results, rejects=c.rejects, report=report, output=p.output,
                       maps=c.maps)


def compute(p: InferParams, id_col: str, rows: DataFrame, stage: Transformer,
            stack: ExitStack) -> InferComputed:
    """Rows in (``id_col`` and the task's input columns); the results, the rejects, their
    counts and the workers' time split out. The model runs once, while the scored rows are
    cached; both outputs read the cache."""
    stats = Stats()
    # the id the job makes (no id_col) is written as "id"
    names = {c: ("id" if c == ROW_ID else c)
             for c in dict.fromkeys([id_col, *input_columns(p), *p.keep_cols])}
    if id_col == ROW_ID and "id" in names:
        raise ConfigError("the input has a column named 'id' among those the job reads: pass "
                          "--id-col id, or rename it")
    scored = rows.select(*(column(c).alias(n) for c, n in names.items())).withColumn(
        RESULT, stage.timed_result(rows))
    inputs = list(names.values())
    fields = result_fields(p, [f.name for f in scored.schema[RESULT].dataType.fields], inputs)
    with stats.step("infer"):
        scored = stack.enter_context(cached(scored, "scored rows", report=stats))
    result = F.col(RESULT)
    _count(scored, stats)
    results = scored.where(result["reason"].isNull()).select(
        *(column(c) for c in inputs), *(result[f].alias(name) for f, name in fields.items()))
    rejects = scored.where(result["reason"].isNotNull()).select(
        *(column(c) for c in inputs), result["reason"].alias("reason"))
    c = InferComputed(results=results, rejects=rejects, stats=stats)
    if p.task == "generate" and p.generate.attention_maps:
        with stats.step("cross-attention maps"):
            c.maps = _maps(p, names[id_col], results, stage)
    return c


# result fields written under another name: a generated text is not the input's text column
RENAMED = {"generate": {"text": "generated"}}


def result_fields(p: InferParams, fields: list[str], inputs: list[str]) -> dict[str, str]:
    """The stage's result fields that ``results/`` holds -> their column names there; a
    ``ConfigError`` when one would take the name of an input column (the id, a text column,
    ``keep_cols``)."""
    renamed = RENAMED.get(p.task, {})
    out = {f: renamed.get(f, f) for f in fields if f not in ("reason", SPLIT)}
    clash = sorted(set(out.values()) & set(inputs))
    if clash:
        raise ConfigError(f"input column(s) {', '.join(map(repr, clash))} would share a name "
                          f"with the {p.task} result in results/: rename them, or leave them "
                          "out of keep_cols")
    return out


def _count(scored: DataFrame, stats: Stats) -> None:
    """Rows, results, truncations, rejects by reason and the workers' time split, in one
    pass over the cached rows."""
    result = F.col(RESULT)
    by_reason = scored.groupBy(result["reason"].alias("reason")).agg(
        F.count(F.lit(1)).alias("n"),
        F.sum(result["truncated"].cast("int")).alias("cut"),
        *(F.sum(result[SPLIT][part]).alias(part) for part in Split.parts())).collect()
    total = sum(r["n"] for r in by_reason)
    done = next((r for r in by_reason if r["reason"] is None), None)
    seconds = next(s["seconds"] for s in reversed(stats.steps) if s["step"] == "infer")
    stats.inputs["rows"] = total
    stats.outputs["results"] = done["n"] if done else 0
    stats.counts["truncated"] = int(done["cut"] or 0) if done else 0
    stats.counts["infer_seconds"] = seconds
    stats.counts["rows_per_s"] = round(stats.outputs["results"] / seconds, 1) \
        if seconds > 0 and done else None
    stats.counts["infer_task_seconds"] = {
        part: round(sum(float(r[part] or 0.0) for r in by_reason), 3) for part in Split.parts()}
    stats.add_rejects("rows", {r["reason"]: r["n"] for r in by_reason
                               if r["reason"] is not None})


def _maps(p: InferParams, id_col: str, results: DataFrame,
          stage: Transformer) -> list[tuple[str, bytes]]:
    """Cross-attention maps of the first ``generate.attention_maps`` results by id: the
    stage again with ``crossAttention`` on those rows only, the grids drawn here."""
    from sparkfield.nlp.cross_attention import cross_attention_png

    first = results.orderBy(column(id_col)).limit(p.generate.attention_maps).select(
        column(id_col).cast("string").alias("id"), column(p.text_col).alias("text"))
    again = stage.copy({stage.crossAttention: True, stage.inputCol: "text",
                        stage.outputCol: "g"}).transform(first)
    out = []
    for row in again.orderBy("id").collect():
        g = row["g"]
        if g is None or g["cross_attention"] is None:
            continue
        weights = np.asarray(g["cross_attention"], dtype=np.float32)
        out.append((row["id"], cross_attention_png(g["source_tokens"], g["target_tokens"],
                                                    weights, row["text"])))
    return out


def _write(out: AtomicOutput, c: InferComputed, report: RunReport) -> None:
    out.write_parquet("results", c.results)
    out.write_parquet("rejects", c.rejects)
    for i, (_, png) in enumerate(c.maps):
        name = f"attention/row_{i + 1}.png"
        with report.optional(name):
            out.write_bytes(name, png)
