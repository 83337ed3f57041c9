"""Fine-tuned Hugging Face classifiers as Spark ML stages and DataFrame functions:
:class:`TextClassifier` / :func:`classify_texts` (one label per text or text pair) and
:class:`TokenClassifier` / :func:`classify_tokens` (entities with character offsets).

They run the sentence embeddings' engine (:func:`~sparkfield.nlp.embed.model_udf`: the model
loaded once per Python worker, the GPU Spark gave the task, length bucketing, batches) with a
classification head (:mod:`sparkfield.nlp.heads`), and save and load themselves as
:class:`~sparkfield.nlp.embedding_stage.SentenceEmbeddings` does, through the DataFrame API, so
they work over Spark Connect too.

Every input row is kept. A null or blank text (or text pair) gets a null result and a reason
(``null text``, ``empty text``, ``null text pair``, ``empty text pair``); a text longer than
``maxTokens`` is truncated and flagged (``truncated``), or with ``onLongText`` ``reject`` gets
a null result and the reason ``too long``. :func:`~sparkfield.nlp.head_rows.count_outcomes`
counts them. What every inference stage shares (params, input rows, the base stage) is in
:mod:`~sparkfield.nlp.head_params`, :mod:`~sparkfield.nlp.head_rows` and
:mod:`~sparkfield.nlp.head_stage`."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark import keyword_only
from pyspark.ml.param import TypeConverters
from pyspark.sql import Column, DataFrame
from pyspark.sql import types as T

from sparkfield.nlp.aggregation import STRATEGIES, entities, tokens_of
from sparkfield.nlp.embed import (
    SPLIT,
    SPLIT_TYPE,
    EngineSpec,
    model_udf,
)
from sparkfield.nlp.encoder import Split
from sparkfield.nlp.head_params import HeadParams, one_of, optional_string, stage_param
from sparkfield.nlp.head_rows import OUTCOME, outcome_arrays, rows_to_run, text_input
from sparkfield.nlp.head_stage import HeadStage
from sparkfield.nlp.heads import FUNCTIONS, SEQUENCE, TOKEN

ENTITY = T.StructType([
    T.StructField("label", T.StringType(), False),
    T.StructField("score", T.DoubleType(), False),
    T.StructField("word", T.StringType(), False),
    T.StructField("start", T.IntegerType(), False),
    T.StructField("end", T.IntegerType(), False),
    T.StructField("index", T.IntegerType(), True),
])


def classification_type(probabilities: bool) -> T.StructType:
    """label, score, (probabilities,) truncated, reason."""
    fields = [T.StructField("label", T.StringType(), True),
              T.StructField("score", T.DoubleType(), True)]
    if probabilities:
        fields.append(T.StructField("probabilities",
                                    T.MapType(T.StringType(), T.DoubleType(), False), True))
    return T.StructType([*fields, *OUTCOME])


ENTITIES_TYPE = T.StructType([T.StructField("entities", T.ArrayType(ENTITY, False), True),
                              *OUTCOME])


# --- sequence classification ---------------------------------------------------------------

def classification_udf(spec: EngineSpec, batch_size: int, bucket: bool, pairs: bool,
                       probabilities: bool, reject: bool) -> Callable[[Column], Column]:
    """An Arrow UDF: struct<text, pair, reason> -> :func:`classification_type` and
    :data:`SPLIT`."""

    def work(inputs: pa.StructArray, model: Callable[[], Any], split: Split) -> list[pa.Array]:
        n = len(inputs)
        rows, texts, second, reasons = rows_to_run(inputs, split, pairs)
        scores = np.zeros((n, 0))
        truncated = np.zeros(len(rows), dtype=bool)
        labels: tuple[str, ...] = ()
        if len(rows):
            result = model().classify(texts, second, batch_size, bucket, split)
            labels, truncated = result.labels, result.truncated
            scores = np.zeros((n, len(labels)))
            scores[rows] = result.scores
        t0 = time.perf_counter()
        keep, outcome = outcome_arrays(n, rows, truncated, reasons, reject)
        best = scores.argmax(axis=1) if scores.shape[1] else np.zeros(n, dtype=np.int64)
        label = pa.array([labels[b] if k else None
                          for b, k in zip(best.tolist(), keep, strict=True)], pa.string())
        score = pa.array(scores[np.arange(n), best] if scores.shape[1] else np.zeros(n),
                         mask=~keep)
        arrays = [label, score]
        if probabilities:
            arrays.append(_probability_map(labels, scores, keep))
        split.arrow_out += time.perf_counter() - t0
        return [*arrays, *outcome]

    result = classification_type(probabilities)
    return model_udf(spec, work, T.StructType([*result.fields,
                                               T.StructField(SPLIT, SPLIT_TYPE, True)]))


def _probability_map(labels: tuple[str, ...], scores: np.ndarray,
                     keep: np.ndarray) -> pa.Array:
    """map<label, score> per row (labels in id order), null where ``keep`` is false."""
    n, k = len(keep), len(labels)
    sizes = np.where(keep, k, 0)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(sizes, out=offsets[1:])
    keys = pa.array(list(labels) * int(keep.sum()), pa.string())
    items = pa.array(scores[keep].reshape(-1), pa.float64())
    return pa.MapArray.from_arrays(pa.array(offsets), keys, items, mask=pa.array(~keep))


class _TextClassifierParams(HeadParams):
    """TextClassifier's own params and defaults."""

    pairCol = stage_param("pairCol", "second text column (text pairs); None: single texts",
                     optional_string)
    function = stage_param("function", "logits to scores: auto, softmax, sigmoid or none",
                      one_of(*FUNCTIONS))
    probabilities = stage_param("probabilities", "add a map of every label's score",
                           TypeConverters.toBoolean)

    def __init__(self) -> None:
        super().__init__()
        self._setDefault(outputCol="classification", pairCol=None, function="auto",
                         probabilities=False)


class TextClassifier(HeadStage, _TextClassifierParams):
    """Text column (and optionally a second text column: ``pairCol``) -> struct ``label``,
    ``score`` (and with ``probabilities`` a map of every label's score), ``truncated``,
    ``reason``, from a local ``*ForSequenceClassification`` model folder.

    Scores as the Hugging Face text-classification pipeline gives them: ``function`` auto
    takes softmax for a single-label model and sigmoid for a multi-label one (config
    ``problem_type`` multi_label_classification) or one with a single output; ``label`` is
    the highest-scoring label of the config's ``id2label``. ``transform`` runs no Spark job:
    the texts are classified when the result is computed (on classic Spark it checks the model
    folder and ships it first). With ``quantize`` int8 and ``int8Check`` not off,
    ``transform`` runs a Spark job: the int8 accuracy check on a sample of the input."""

    task, kind = "sequence-classification", SEQUENCE

    @keyword_only
    def __init__(self, *, inputCol: str | None = None, outputCol: str | None = None,
                 modelPath: str | None = None, pairCol: str | None = None,
                 function: str | None = None, probabilities: bool | None = None,
                 device: str | None = None, batchSize: int | None = None,
                 maxTokens: int | None = None, bucket: bool | None = None,
                 onLongText: str | None = None, precision: str | None = None,
                 engine: str | None = None, quantize: str | None = None,
                 int8Check: str | None = None, int8MaxDisagreement: float | None = None,
                 int8SampleRows: int | None = None) -> None:
        super().__init__()
        self.setParams(**self._input_kwargs)

    @keyword_only
    def setParams(self, *, inputCol: str | None = None, outputCol: str | None = None,
                  modelPath: str | None = None, pairCol: str | None = None,
                  function: str | None = None, probabilities: bool | None = None,
                  device: str | None = None, batchSize: int | None = None,
                  maxTokens: int | None = None, bucket: bool | None = None,
                  onLongText: str | None = None, precision: str | None = None,
                  engine: str | None = None, quantize: str | None = None,
                  int8Check: str | None = None, int8MaxDisagreement: float | None = None,
                  int8SampleRows: int | None = None) -> TextClassifier:
        """Sets the params given; ``None`` sets ``modelPath``, ``pairCol`` or ``maxTokens``
        to None and leaves the others as they are."""
        return self._set_params(self._input_kwargs)

    def _inputs(self, dataset: DataFrame) -> list[str]:
        return [self.getInputCol(), *([self.getPairCol()] if self.getPairCol() else [])]

    def timed_result(self, dataset: DataFrame) -> Column:
        self._check_columns(dataset)
        spec = self.engine_spec(dataset, function=self.getFunction())
        udf = classification_udf(spec, self.getBatchSize(), self.getBucket(),
                                 bool(self.getPairCol()), self.getProbabilities(),
                                 self.getOnLongText() == "reject")
        result = udf(text_input(dataset, self.getInputCol(), self.getPairCol()))
        return result


def classify_texts(df: DataFrame, model_dir: str, input_col: str = "text",
                   output_col: str = "classification", **params: Any) -> DataFrame:
    """``df`` with ``output_col`` added by a :class:`TextClassifier` of ``model_dir``;
    ``params``: the stage's other params (``pairCol``, ``probabilities``, ``batchSize``...)."""
    return TextClassifier(inputCol=input_col, outputCol=output_col, modelPath=model_dir,
                          **params).transform(df)


# --- token classification ------------------------------------------------------------------

def entities_udf(spec: EngineSpec, batch_size: int, bucket: bool, strategy: str,
                 ignore: tuple[str, ...], reject: bool) -> Callable[[Column], Column]:
    """An Arrow UDF: struct<text, pair, reason> -> :data:`ENTITIES_TYPE` and :data:`SPLIT`."""

    def work(inputs: pa.StructArray, model: Callable[[], Any], split: Split) -> list[pa.Array]:
        n = len(inputs)
        rows, texts, _, reasons = rows_to_run(inputs, split, False)
        found: list[list | None] = [None] * n
        truncated = np.zeros(len(rows), dtype=bool)
        if len(rows):
            tagger = model()
            tagged = tagger.tag(texts, batch_size, bucket, split)
            truncated = tagged.tokens.truncated
            t0 = time.perf_counter()
            unk = tagger.tokenizer.unk_token_id
            prefix = getattr(tagger.tokenizer.backend_tokenizer.model,
                             "continuing_subword_prefix", None)
            for k, i in enumerate(rows.tolist()):
                text, encoding = texts[k], tagged.tokens.encodings[k]
                toks = tokens_of(text, encoding, tagged.scores[k], unk, prefix)
                found[i] = [asdict(e) for e in entities(text, toks, tagged.labels, strategy,
                                                          ignore)]
            split.pool += time.perf_counter() - t0
        t0 = time.perf_counter()
        keep, outcome = outcome_arrays(n, rows, truncated, reasons, reject)
        column = pa.array([f if k else None for f, k in zip(found, keep, strict=True)],
                          pa.list_(pa.field("element", _ENTITY_ARROW, False)))
        split.arrow_out += time.perf_counter() - t0
        return [column, *outcome]

    return model_udf(spec, work, T.StructType([*ENTITIES_TYPE.fields,
                                               T.StructField(SPLIT, SPLIT_TYPE, True)]))


_ENTITY_ARROW = pa.struct([
    pa.field("label", pa.string(), False), pa.field("score", pa.float64(), False),
    pa.field("word", pa.string(), False), pa.field("start", pa.int32(), False),
    pa.field("end", pa.int32(), False), pa.field("index", pa.int32(), True)])


class _TokenClassifierParams(HeadParams):
    """TokenClassifier's own params and defaults."""

    aggregationStrategy = stage_param("aggregationStrategy", "none, simple, first, average or max",
                                 one_of(*STRATEGIES))
    ignoreLabels = stage_param("ignoreLabels", "labels left out of the entities",
                          TypeConverters.toListString)

    def __init__(self) -> None:
        super().__init__()
        self._setDefault(outputCol="entities", aggregationStrategy="simple",
                         ignoreLabels=["O"])


class TokenClassifier(HeadStage, _TokenClassifierParams):
    """Text column -> struct ``entities`` (array of label, score, word, start, end, index),
    ``truncated``, ``reason``, from a local ``*ForTokenClassification`` model folder.

    ``aggregationStrategy`` groups tokens as the Hugging Face token-classification pipeline
    does: none (one entity per token, its full label and ``index``), simple (adjacent tokens
    of one tag, B-/I- prefixes dropped), first, average, max (whole words first, their label
    from the first token, the mean scores, or the most certain token). ``start``/``end`` are
    character offsets into the text and ``word`` the text between them; entities labelled
    one of ``ignoreLabels`` are left out. ``transform`` runs no Spark job: the texts are
    tagged when the result is computed (on classic Spark it checks the model folder and ships
    it first). With ``quantize`` int8 and ``int8Check`` not off, ``transform`` runs a Spark
    job: the int8 accuracy check on a sample of the input."""

    task, kind = "token-classification", TOKEN

    @keyword_only
    def __init__(self, *, inputCol: str | None = None, outputCol: str | None = None,
                 modelPath: str | None = None, aggregationStrategy: str | None = None,
                 ignoreLabels: list[str] | None = None, device: str | None = None,
                 batchSize: int | None = None, maxTokens: int | None = None,
                 bucket: bool | None = None, onLongText: str | None = None,
                 precision: str | None = None, engine: str | None = None,
                 quantize: str | None = None, int8Check: str | None = None,
                 int8MaxDisagreement: float | None = None,
                 int8SampleRows: int | None = None) -> None:
        super().__init__()
        self.setParams(**self._input_kwargs)

    @keyword_only
    def setParams(self, *, inputCol: str | None = None, outputCol: str | None = None,
                  modelPath: str | None = None, aggregationStrategy: str | None = None,
                  ignoreLabels: list[str] | None = None, device: str | None = None,
                  batchSize: int | None = None, maxTokens: int | None = None,
                  bucket: bool | None = None, onLongText: str | None = None,
                  precision: str | None = None, engine: str | None = None,
                  quantize: str | None = None, int8Check: str | None = None,
                  int8MaxDisagreement: float | None = None,
                  int8SampleRows: int | None = None) -> TokenClassifier:
        """Sets the params given; ``None`` sets ``modelPath`` or ``maxTokens`` to None and
        leaves the others as they are."""
        return self._set_params(self._input_kwargs)

    def timed_result(self, dataset: DataFrame) -> Column:
        self._check_columns(dataset)
        udf = entities_udf(self.engine_spec(dataset), self.getBatchSize(), self.getBucket(),
                           self.getAggregationStrategy(), tuple(self.getIgnoreLabels()),
                           self.getOnLongText() == "reject")
        result = udf(text_input(dataset, self.getInputCol(), None))
        return result


def classify_tokens(df: DataFrame, model_dir: str, input_col: str = "text",
                    output_col: str = "entities", **params: Any) -> DataFrame:
    """``df`` with ``output_col`` added by a :class:`TokenClassifier` of ``model_dir``;
    ``params``: the stage's other params (``aggregationStrategy``, ``batchSize``...)."""
    return TokenClassifier(inputCol=input_col, outputCol=output_col, modelPath=model_dir,
                           **params).transform(df)


