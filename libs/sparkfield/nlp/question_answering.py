"""Extractive question answering as a Spark ML stage and a DataFrame function:
:class:`QuestionAnswerer` / :func:`answer_questions`, a question column and a context column ->
the answer span of a local ``*ForQuestionAnswering`` model folder.

It runs the classifiers' engine (:func:`~sparkfield.nlp.embed.model_udf`: the model loaded
once per Python worker, length bucketing, batches) with the span head
(:class:`~sparkfield.nlp.qa_head.SpanExtractor`), and keeps their result layout: every input
row is kept; a null or blank question or context gets a null result and a reason (``null
question``, ``empty question``, ``null context``, ``empty context``); a question longer than
``maxQuestionLength`` is truncated and flagged, or with ``onLongText`` ``reject`` gets a null
result and the reason ``too long``. A long context is no error: it is read in overlapping
windows, and the result says in how many. :func:`~sparkfield.nlp.classify.count_outcomes`
counts the rows."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark import keyword_only
from pyspark.ml.param import TypeConverters
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.core.columns import column
from sparkfield.core.connect import is_connect
from sparkfield.core.errors import ConfigError
from sparkfield.nlp.embed import SPLIT, SPLIT_TYPE, EngineSpec, model_udf, ready, worker_threads
from sparkfield.nlp.encoder import Split
from sparkfield.nlp.head_params import HeadParams, at_least, stage_param
from sparkfield.nlp.head_rows import OUTCOME, missing_reason, outcome_arrays, rows_to_run
from sparkfield.nlp.head_stage import HeadStage
from sparkfield.nlp.model import check_max_tokens, check_model_dir
from sparkfield.nlp.qa_head import QA, Span, check_qa_model, check_window

ANSWER = T.StructType([
    T.StructField("answer", T.StringType(), False),
    T.StructField("score", T.DoubleType(), False),
    T.StructField("start", T.IntegerType(), False),
    T.StructField("end", T.IntegerType(), False),
])
_ANSWER_ARROW = pa.struct([pa.field("answer", pa.string(), False),
                           pa.field("score", pa.float64(), False),
                           pa.field("start", pa.int32(), False),
                           pa.field("end", pa.int32(), False)])


def answer_type(top_k: int) -> T.StructType:
    """answer, score, start, end, windows, (answers with top_k > 1,) truncated, reason."""
    fields = [T.StructField(f.name, f.dataType, True) for f in ANSWER.fields]
    fields.append(T.StructField("windows", T.IntegerType(), True))
    if top_k > 1:
        fields.append(T.StructField("answers", T.ArrayType(ANSWER, False), True))
    return T.StructType([*fields, *OUTCOME])


def _input(question_col: str, context_col: str) -> Column:
    """struct<text (question), pair (context), reason>: the UDF's input."""
    question = column(question_col).cast("string")
    context = column(context_col).cast("string")
    reason = F.coalesce(missing_reason(question, "question"), missing_reason(context, "context"))
    return F.struct(question.alias("text"), context.alias("pair"), reason.alias("reason"))


def answers_udf(spec: EngineSpec, batch_size: int, bucket: bool, options: dict[str, Any],
                reject: bool) -> Callable[[Column], Column]:
    """An Arrow UDF: struct<text, pair, reason> -> :func:`answer_type` and :data:`SPLIT`;
    ``options``: :meth:`~sparkfield.nlp.qa_head.SpanExtractor.answer`'s keywords."""
    top_k = options["top_k"]

    def work(inputs: pa.StructArray, model: Callable[[], Any], split: Split) -> list[pa.Array]:
        n = len(inputs)
        rows, questions, contexts, reasons = rows_to_run(inputs, split, True)
        found: list[list[Span]] = [[] for _ in range(n)]
        windows = np.zeros(n, dtype=np.int64)
        truncated = np.zeros(len(rows), dtype=bool)
        if len(rows):
            result = model().answer(questions, contexts or [], batch_size, bucket, split,
                                    skip_long=reject, **options)
            truncated = result.truncated
            windows[rows] = result.windows
            for k, i in enumerate(rows.tolist()):
                found[i] = result.answers[k]
                if not found[i] and not (reject and truncated[k]):
                    reasons[i] = "empty context"  # no context token to answer from
        t0 = time.perf_counter()
        keep, outcome = outcome_arrays(n, rows, truncated, reasons, reject)
        keep &= np.fromiter((bool(f) for f in found), dtype=bool, count=n)
        best = [f[0] if k else None for f, k in zip(found, keep, strict=True)]
        arrays = [
            pa.array([b.answer if b else None for b in best], pa.string()),
            pa.array([b.score if b else None for b in best], pa.float64()),
            pa.array([b.start if b else None for b in best], pa.int32()),
            pa.array([b.end if b else None for b in best], pa.int32()),
            pa.array(windows, pa.int32(), mask=~keep),
        ]
        if top_k > 1:
            arrays.append(pa.array(
                [[vars(a) for a in f] if k else None for f, k in zip(found, keep, strict=True)],
                pa.list_(pa.field("element", _ANSWER_ARROW, False))))
        split.arrow_out += time.perf_counter() - t0
        return [*arrays, *outcome]

    return model_udf(spec, work, T.StructType([*answer_type(top_k).fields,
                                               T.StructField(SPLIT, SPLIT_TYPE, True)]))


class _QuestionAnswererParams(HeadParams):
    """QuestionAnswerer's own params and defaults."""

    questionCol = stage_param("questionCol", "question column", TypeConverters.toString)
    contextCol = stage_param("contextCol", "context column (the text the answer is taken from)",
                        TypeConverters.toString)
    stride = stage_param("stride", "tokens by which a long context's windows overlap (>= 0, "
                    "less than maxTokens)", at_least(0))
    maxAnswerLength = stage_param("maxAnswerLength", "most tokens in an answer (>= 1)",
                             at_least(1))
    maxQuestionLength = stage_param("maxQuestionLength", "most tokens of a question (>= 1); a "
                               "longer one is truncated or rejected (onLongText)",
                               at_least(1))
    topK = stage_param("topK", "answers per question (>= 1); over 1 adds the array answers",
                  at_least(1))
    handleImpossibleAnswer = stage_param("handleImpossibleAnswer", "the null answer (\"\") "
                                    "competes too", TypeConverters.toBoolean)

    def __init__(self) -> None:
        super().__init__()
        self._setDefault(outputCol="answer", questionCol="question", contextCol="context",
                         stride=128, maxAnswerLength=15, maxQuestionLength=64, topK=1,
                         handleImpossibleAnswer=False)


class QuestionAnswerer(HeadStage, _QuestionAnswererParams):
    """Question and context columns -> struct ``answer``, ``score``, ``start``, ``end``,
    ``windows`` (and with ``topK`` > 1 the array ``answers``), ``truncated``, ``reason``, from
    a local ``*ForQuestionAnswering`` model folder.

    The answer is chosen as the Hugging Face question-answering pipeline (transformers 4.x)
    chooses it; ``start``/``end`` are character offsets into the context and ``answer`` the
    context between them. A context longer than a window is read in windows of ``maxTokens``
    tokens overlapping by ``stride`` (``windows`` says how many). ``transform`` runs no Spark
    job: the questions are answered when the result is computed (on classic Spark it checks
    the model folder and ships it first)."""

    task, kind = "question-answering", QA

    @keyword_only
    def __init__(self, *, questionCol: str | None = None, contextCol: str | None = None,
                 outputCol: str | None = None, modelPath: str | None = None,
                 stride: int | None = None, maxAnswerLength: int | None = None,
                 maxQuestionLength: int | None = None, topK: int | None = None,
                 handleImpossibleAnswer: bool | None = None, device: str | None = None,
                 batchSize: int | None = None, maxTokens: int | None = None,
                 bucket: bool | None = None, onLongText: str | None = None,
                 precision: str | None = None) -> None:
        super().__init__()
        self.setParams(**self._input_kwargs)

    @keyword_only
    def setParams(self, *, questionCol: str | None = None, contextCol: str | None = None,
                  outputCol: str | None = None, modelPath: str | None = None,
                  stride: int | None = None, maxAnswerLength: int | None = None,
                  maxQuestionLength: int | None = None, topK: int | None = None,
                  handleImpossibleAnswer: bool | None = None, device: str | None = None,
                  batchSize: int | None = None, maxTokens: int | None = None,
                  bucket: bool | None = None, onLongText: str | None = None,
                  precision: str | None = None) -> QuestionAnswerer:
        """Sets the params given; ``None`` sets ``modelPath`` or ``maxTokens`` to None and
        leaves the others as they are."""
        return self._set_params(self._input_kwargs)

    def _inputs(self, dataset: DataFrame) -> list[str]:
        return [self.getQuestionCol(), self.getContextCol()]

    def _check_window(self) -> None:
        """The window params that can be checked without the model (the engine checks them
        again with its tokenizer's special tokens)."""
        if self.getMaxTokens() is not None:
            check_window(self.getMaxTokens(), self.getStride(), self.getMaxQuestionLength(),
                         special_tokens=0)

    def engine_spec(self, dataset: DataFrame, **extra: Any) -> EngineSpec:
        """What each worker builds, made ready for this session (checked and shipped on
        classic Spark; over Connect the executors check the folder)."""
        folder = self.getModelPath()
        if not folder:
            raise ConfigError(f"{type(self).__name__} needs modelPath (a local model folder)")
        # the shared engine params, where the classifiers have them: EngineSpec refuses an
        # engine other than torch for question answering
        engine = self.getOrDefault("engine") if self.hasParam("engine") else "torch"
        spark = dataset.sparkSession
        if not is_connect(spark):  # the folder is the driver's: fail before shipping it
            here = check_model_dir(folder)
            check_qa_model(here)
            check_max_tokens(here, self.getMaxTokens())
        return ready(spark, EngineSpec(
            folder, engine, self.getDevice(), self.getMaxTokens(),
            threads=worker_threads(spark), task=self.task, precision=self.getPrecision(),
            **extra))

    def timed_result(self, dataset: DataFrame) -> Column:
        self._check_columns(dataset)
        self._check_window()
        options = {"stride": self.getStride(), "max_answer_length": self.getMaxAnswerLength(),
                   "max_question_length": self.getMaxQuestionLength(), "top_k": self.getTopK(),
                   "handle_impossible": self.getHandleImpossibleAnswer()}
        udf = answers_udf(self.engine_spec(dataset), self.getBatchSize(), self.getBucket(),
                          options, self.getOnLongText() == "reject")
        result = udf(_input(self.getQuestionCol(), self.getContextCol()))
        return result


def answer_questions(df: DataFrame, model_dir: str, question_col: str = "question",
                     context_col: str = "context", output_col: str = "answer",
                     **params: Any) -> DataFrame:
    """``df`` with ``output_col`` added by a :class:`QuestionAnswerer` of ``model_dir``;
    ``params``: the stage's other params (``topK``, ``stride``, ``batchSize``...)."""
    return QuestionAnswerer(questionCol=question_col, contextCol=context_col,
                            outputCol=output_col, modelPath=model_dir, **params).transform(df)
