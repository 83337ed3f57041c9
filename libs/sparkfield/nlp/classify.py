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
a null result and the reason ``too long``. :func:`count_outcomes` counts them.

Why one module: the two classifier stages, their DataFrame functions and their shared checks and
counts follow one engine and one result layout."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark import keyword_only
from pyspark.ml import Transformer
from pyspark.ml.param import Param, Params, TypeConverters
from pyspark.ml.param.shared import HasInputCol, HasOutputCol
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.core.columns import column, require_columns
from sparkfield.core.connect import is_connect
from sparkfield.core.errors import ConfigError
from sparkfield.core.ml import Persistent, given
from sparkfield.nlp.aggregation import STRATEGIES, entities, tokens_of
from sparkfield.nlp.embed import (
    ENGINES,
    SPLIT,
    SPLIT_TYPE,
    EngineSpec,
    blank,
    model_udf,
    ready,
    worker_threads,
)
from sparkfield.nlp.embedding_stage import ModelParams
from sparkfield.nlp.encoder import PRECISIONS, Split
from sparkfield.nlp.heads import FUNCTIONS, SEQUENCE, TOKEN, read_head
from sparkfield.nlp.model import check_max_tokens, check_model_dir
from sparkfield.nlp.onnx_engine import QUANTIZE

LONG_TEXT = ("truncate", "reject")
TOO_LONG = "too long"
OUTCOME = [T.StructField("truncated", T.BooleanType(), True),
           T.StructField("reason", T.StringType(), True)]
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


# --- params --------------------------------------------------------------------------------

def _checked(base: Callable[[Any], Any], problem: Callable[[Any], str | None]) -> Callable:
    """A type converter: ``base``, then ``problem`` (None: fine); Params._set names the
    param in the TypeError."""

    def convert(value: Any) -> Any:
        value = base(value)
        found = problem(value)
        if found:
            raise TypeError(found)
        return value

    return convert


def _one_of(*allowed: str) -> Callable:
    return _checked(TypeConverters.toString, lambda v: None if v in allowed else
                    f"must be one of {', '.join(allowed)}, got {v!r}")


def _at_least(low: int, nullable: bool = False) -> Callable:
    def problem(v: int | None) -> str | None:
        return None if (v is None and nullable) or (v is not None and v >= low) else \
            f"must be >= {low}, got {v!r}"

    def base(v: Any) -> int | None:
        return None if v is None and nullable else TypeConverters.toInt(v)

    return _checked(base, problem)


def _share(v: float) -> str | None:
    return None if 0.0 <= v <= 1.0 else f"must be a share from 0 to 1, got {v!r}"


def _optional_string(v: Any) -> str | None:
    return None if v is None else TypeConverters.toString(v)


def _param(name: str, doc: str, converter: Callable) -> Param:
    return Param(Params._dummy(), name, doc, typeConverter=converter)


NULLABLE = frozenset({"modelPath", "maxTokens", "pairCol"})


INT8_CHECKS = ("warn", "refuse", "off")


class _HeadParams(HasInputCol, HasOutputCol, ModelParams):
    """The params both classifiers share: the model params of every engine stage (folder,
    device, batching), then the text's length limit, what a longer text gets, the precision,
    the engine (torch, or ONNX Runtime with optional int8) and the int8 accuracy check
    (:mod:`sparkfield.nlp.int8_check`).
    """

    maxTokens = _param("maxTokens", "tokens per text (>= 8); None: the model's window",
                       _at_least(8, nullable=True))
    onLongText = _param("onLongText", "a text over maxTokens: truncate (and flag it), or "
                        "reject (null result, reason 'too long')", _one_of(*LONG_TEXT))
    precision = _param("precision", "fp32, fp16 or bf16 on a GPU (the CPU runs fp32)",
                       _one_of(*PRECISIONS))
    engine = _param("engine", "torch, or onnx: ONNX Runtime on an export of the model's "
                    "logits (made once, cached in the model folder)", _one_of(*ENGINES))
    quantize = _param("quantize", "none, or int8: dynamic int8 of the ONNX export (needs "
                      "engine onnx)", _one_of(*QUANTIZE))
    int8Check = _param("int8Check", "with quantize int8, compare int8 against fp32 on a "
                       "sample of the input: warn or refuse past int8MaxDisagreement, or off",
                       _one_of(*INT8_CHECKS))
    int8MaxDisagreement = _param("int8MaxDisagreement", "the largest share of sampled rows "
                                 "(token classification: of tokens) whose int8 label may differ "
                                 "from fp32's", _checked(TypeConverters.toFloat, _share))
    int8SampleRows = _param("int8SampleRows", "non-blank input rows the int8 check compares "
                            "(>= 1)", _at_least(1))

    def __init__(self) -> None:
        super().__init__()
        self._setDefault(inputCol="text", maxTokens=None, onLongText="truncate",
                         precision="fp32", engine="torch", quantize="none", int8Check="warn",
                         int8MaxDisagreement=0.02, int8SampleRows=256)


class _HeadStage(Transformer, _HeadParams, Persistent):
    """What both classifier stages do alike: the engine made ready, the columns checked."""

    task = ""  # EngineSpec.task
    kind = ""  # what the folder's architectures must name

    def _set_params(self, kwargs: dict[str, Any]) -> _HeadStage:
        return self._set(**given(kwargs, NULLABLE))

    # --- transform -------------------------------------------------------------------------

    def engine_spec(self, dataset: DataFrame, **extra: Any) -> EngineSpec:
        """What each worker builds, made ready for this session (checked and shipped on
        classic Spark, the ONNX export made here; over Connect the executors check the
        folder and export). With quantize int8 and int8Check not off, runs a Spark job: int8
        against fp32 on a sample of ``dataset`` (:func:`~sparkfield.nlp.int8_check.check_int8`).
        """
        folder = self.getModelPath()
        if not folder:
            raise ConfigError(f"{type(self).__name__} needs modelPath (a local model folder)")
        engine, quantize = self.getEngine(), self.getQuantize()
        if quantize != "none" and engine != "onnx":
            raise ConfigError(f"{type(self).__name__}: quantize {quantize} needs engine onnx "
                              f"(engine is {engine})")
        spark = dataset.sparkSession
        if not is_connect(spark):  # the folder is the driver's: fail before shipping it
            here = check_model_dir(folder)
            read_head(here, self.kind)
            check_max_tokens(here, self.getMaxTokens())
        spec = ready(spark, EngineSpec(
            folder, engine, self.getDevice(), self.getMaxTokens(), quantize=quantize,
            threads=worker_threads(spark), task=self.task, precision=self.getPrecision(),
            **extra))
        if quantize == "int8" and self.getInt8Check() != "off":
            from sparkfield.nlp.int8_check import check_int8

            check_int8(dataset, self, spec)
        return spec

    def _inputs(self, dataset: DataFrame) -> list[str]:
        return [self.getInputCol()]

    def _check_columns(self, dataset: DataFrame) -> None:
        require_columns(dataset, self._inputs(dataset))
        if self.getOutputCol() in dataset.columns:
            raise ConfigError(f"output column {self.getOutputCol()!r} already exists")

    def timed_result(self, dataset: DataFrame) -> Column:
        """The result column of ``dataset``'s rows with a last field :data:`SPLIT`: where
        each Arrow batch's time went (on its first row), which the infer job sums."""
        raise NotImplementedError

    def _transform(self, dataset: DataFrame) -> DataFrame:
        return dataset.withColumn(self.getOutputCol(),
                                  self.timed_result(dataset).dropFields(SPLIT))


def _reason(text: Column, what: str) -> Column:
    return F.when(text.isNull(), f"null {what}").when(blank(text), f"empty {what}")


def _input(dataset: DataFrame, text_col: str, pair_col: str | None) -> Column:
    """struct<text, pair, reason>: the UDF's input; reason set where a text is missing."""
    text = column(text_col).cast("string")
    pair = column(pair_col).cast("string") if pair_col else F.lit(None).cast("string")
    reason = _reason(text, "text")
    if pair_col:
        reason = F.coalesce(reason, _reason(pair, "text pair"))
    return F.struct(text.alias("text"), pair.alias("pair"), reason.alias("reason"))


def _todo(inputs: pa.StructArray, split: Split,
          pairs: bool) -> tuple[np.ndarray, list[str], list[str] | None, list[str | None]]:
    """(rows to run, their texts, their pairs, every row's reason so far)."""
    t0 = time.perf_counter()
    reasons = inputs.field("reason").to_pylist()
    rows = np.fromiter((i for i, r in enumerate(reasons) if r is None), dtype=np.int64)
    texts = inputs.field("text").take(pa.array(rows)).to_pylist()
    second = inputs.field("pair").take(pa.array(rows)).to_pylist() if pairs else None
    split.arrow_in += time.perf_counter() - t0
    return rows, texts, second, reasons


def _outcome(n: int, rows: np.ndarray, truncated: np.ndarray, reasons: list[str | None],
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


# --- sequence classification ---------------------------------------------------------------

def classification_udf(spec: EngineSpec, batch_size: int, bucket: bool, pairs: bool,
                       probabilities: bool, reject: bool) -> Callable[[Column], Column]:
    """An Arrow UDF: struct<text, pair, reason> -> :func:`classification_type` and
    :data:`SPLIT`."""

    def work(inputs: pa.StructArray, model: Callable[[], Any], split: Split) -> list[pa.Array]:
        n = len(inputs)
        rows, texts, second, reasons = _todo(inputs, split, pairs)
        scores = np.zeros((n, 0))
        truncated = np.zeros(len(rows), dtype=bool)
        labels: tuple[str, ...] = ()
        if len(rows):
            result = model().classify(texts, second, batch_size, bucket, split)
            labels, truncated = result.labels, result.truncated
            scores = np.zeros((n, len(labels)))
            scores[rows] = result.scores
        t0 = time.perf_counter()
        keep, outcome = _outcome(n, rows, truncated, reasons, reject)
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


class _TextClassifierParams(_HeadParams):
    """TextClassifier's own params and defaults."""

    pairCol = _param("pairCol", "second text column (text pairs); None: single texts",
                     _optional_string)
    function = _param("function", "logits to scores: auto, softmax, sigmoid or none",
                      _one_of(*FUNCTIONS))
    probabilities = _param("probabilities", "add a map of every label's score",
                           TypeConverters.toBoolean)

    def __init__(self) -> None:
        super().__init__()
        self._setDefault(outputCol="classification", pairCol=None, function="auto",
                         probabilities=False)


class TextClassifier(_HeadStage, _TextClassifierParams):
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
        result = udf(_input(dataset, self.getInputCol(), self.getPairCol()))
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
        rows, texts, _, reasons = _todo(inputs, split, False)
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
        keep, outcome = _outcome(n, rows, truncated, reasons, reject)
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


class _TokenClassifierParams(_HeadParams):
    """TokenClassifier's own params and defaults."""

    aggregationStrategy = _param("aggregationStrategy", "none, simple, first, average or max",
                                 _one_of(*STRATEGIES))
    ignoreLabels = _param("ignoreLabels", "labels left out of the entities",
                          TypeConverters.toListString)

    def __init__(self) -> None:
        super().__init__()
        self._setDefault(outputCol="entities", aggregationStrategy="simple",
                         ignoreLabels=["O"])


class TokenClassifier(_HeadStage, _TokenClassifierParams):
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
        result = udf(_input(dataset, self.getInputCol(), None))
        return result


def classify_tokens(df: DataFrame, model_dir: str, input_col: str = "text",
                    output_col: str = "entities", **params: Any) -> DataFrame:
    """``df`` with ``output_col`` added by a :class:`TokenClassifier` of ``model_dir``;
    ``params``: the stage's other params (``aggregationStrategy``, ``batchSize``...)."""
    return TokenClassifier(inputCol=input_col, outputCol=output_col, modelPath=model_dir,
                           **params).transform(df)


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
