"""Sequence-to-sequence generation (translation, summarisation) as a Spark ML stage and a
DataFrame function: :class:`TextGenerator` / :func:`generate_texts`, with a local
``*ForConditionalGeneration`` / ``MarianMTModel`` folder (Marian, T5, BART families).

They run the classifiers' engine (:func:`~sparkfield.nlp.embed.model_udf`: the model loaded
once per Python worker, length bucketing, batches) with the generation head
(:class:`~sparkfield.nlp.seq2seq.Seq2SeqGenerator`), keep every input row and flag it as the
classifiers do (``truncated``, ``reason``; :func:`~sparkfield.nlp.classify.count_outcomes`
counts them), and save and load themselves through the DataFrame API.

With ``crossAttention`` each result also carries the attention every decoder head paid to the
source while producing each generated token; :func:`~sparkfield.nlp.cross_attention.
cross_attention_png` draws it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark import keyword_only
from pyspark.ml.param import TypeConverters
from pyspark.sql import Column, DataFrame
from pyspark.sql import types as T

from sparkfield.core.connect import is_connect
from sparkfield.core.errors import ConfigError
from sparkfield.nlp.embed import SPLIT, SPLIT_TYPE, EngineSpec, model_udf, ready, worker_threads
from sparkfield.nlp.encoder import Split
from sparkfield.nlp.head_params import HeadParams, at_least, stage_param
from sparkfield.nlp.head_rows import OUTCOME, outcome_arrays, rows_to_run, text_input
from sparkfield.nlp.head_stage import HeadStage
from sparkfield.nlp.model import check_max_tokens, check_model_dir
from sparkfield.nlp.seq2seq import CrossAttention, Options, check_seq2seq

TASK = "text2text-generation"
_TOKENS = T.ArrayType(T.StringType(), False)
_WEIGHTS = T.ArrayType(T.ArrayType(T.ArrayType(T.ArrayType(T.FloatType(), False), False),
                                   False), False)


def generation_type(cross_attention: bool) -> T.StructType:
    """text, tokens, stopped, (source_tokens, target_tokens, cross_attention,) truncated,
    reason."""
    fields = [T.StructField("text", T.StringType(), True),
              T.StructField("tokens", T.IntegerType(), True),
              T.StructField("stopped", T.StringType(), True)]
    if cross_attention:
        fields += [T.StructField("source_tokens", _TOKENS, True),
                   T.StructField("target_tokens", _TOKENS, True),
                   T.StructField("cross_attention", _WEIGHTS, True)]
    return T.StructType([*fields, *OUTCOME])


def _list(inner: pa.DataType) -> pa.DataType:
    return pa.list_(pa.field("element", inner, False))


_STRINGS = _list(pa.string())


def _offsets(sizes: list[int]) -> pa.Array:
    out = np.zeros(len(sizes) + 1, dtype=np.int32)
    np.cumsum(np.asarray(sizes, dtype=np.int64), out=out[1:])
    return pa.array(out)


def weights_array(rows: list[CrossAttention | None]) -> pa.Array:
    """list<list<list<list<float>>>> [layer][head][target][source] per row, null where a
    row has none: one float32 buffer with three levels of offsets."""
    present = [r for r in rows if r is not None]
    values = pa.array(np.concatenate([r.weights.reshape(-1) for r in present])
                      if present else np.zeros(0, np.float32), pa.float32())
    sources, targets, heads, layers = [], [], [], []
    for r in rows:
        if r is None:
            layers.append(0)
            continue
        n_layers, n_heads, n_tgt, n_src = r.weights.shape
        layers.append(n_layers)
        heads += [n_heads] * n_layers
        targets += [n_tgt] * (n_layers * n_heads)
        sources += [n_src] * (n_layers * n_heads * n_tgt)
    kind = pa.float32()
    arr: pa.Array = values
    for sizes in (sources, targets, heads):
        kind = _list(kind)
        arr = pa.ListArray.from_arrays(_offsets(sizes), arr, type=kind)
    missing = pa.array([r is None for r in rows])
    return pa.ListArray.from_arrays(_offsets(layers), arr, type=_list(kind), mask=missing)


def generation_udf(spec: EngineSpec, batch_size: int, bucket: bool, options: Options,
                   prefix: str, cross: bool, reject: bool) -> Callable[[Column], Column]:
    """An Arrow UDF: struct<text, pair, reason> -> :func:`generation_type` and
    :data:`~sparkfield.nlp.embed.SPLIT`."""

    def work(inputs: pa.StructArray, model: Callable[[], Any], split: Split) -> list[pa.Array]:
        n = len(inputs)
        rows, texts, _, reasons = rows_to_run(inputs, split, False)
        truncated = np.zeros(len(rows), dtype=bool)
        text: list[str | None] = [None] * n
        count: list[int | None] = [None] * n
        stopped: list[str | None] = [None] * n
        attention: list[CrossAttention | None] = [None] * n
        if len(rows):
            generator = model()
            run = np.arange(len(rows))
            if reject:  # a text over the window is not generated from at all
                t0 = time.perf_counter()
                truncated = generator.tokenize([prefix + t for t in texts]).truncated
                split.tokenise += time.perf_counter() - t0
                run = np.flatnonzero(~truncated)
            sources = [texts[k] for k in run.tolist()]
            if sources:
                made = generator.generate(sources, batch_size, bucket, split,
                                          options.num_beams, options.max_new_tokens, prefix,
                                          options.length_penalty, options.no_repeat_ngram_size)
                if not reject:
                    truncated = made.tokens.truncated
                maps = generator.cross_attention(sources, made.ids, batch_size, prefix,
                                                 split) if cross else None
                for j, k in enumerate(run.tolist()):
                    i = int(rows[k])
                    text[i], count[i], stopped[i] = made.texts[j], len(made.ids[j]), \
                        made.stopped[j]
                    if maps is not None:
                        attention[i] = maps[j]
        t0 = time.perf_counter()
        _, outcome = outcome_arrays(n, rows, truncated, reasons, reject)
        arrays = [pa.array(text, pa.string()), pa.array(count, pa.int32()),
                  pa.array(stopped, pa.string())]
        if cross:
            arrays += [
                pa.array([a.source_tokens if a else None for a in attention], _STRINGS),
                pa.array([a.target_tokens if a else None for a in attention], _STRINGS),
                weights_array(attention)]
        split.arrow_out += time.perf_counter() - t0
        return [*arrays, *outcome]

    result = generation_type(cross)
    return model_udf(spec, work, T.StructType([*result.fields,
                                               T.StructField(SPLIT, SPLIT_TYPE, True)]))


class _TextGeneratorParams(HeadParams):
    """TextGenerator's own params and defaults."""

    numBeams = stage_param("numBeams", "beams of the beam search (1: greedy)", at_least(1))
    maxNewTokens = stage_param("maxNewTokens", "most tokens generated per text (>= 1)",
                          at_least(1))
    prefix = stage_param("prefix", "prepended to each text, e.g. 'translate English to German: ' "
                    "for T5 (counted in maxTokens)", TypeConverters.toString)
    lengthPenalty = stage_param("lengthPenalty", "beam search: exponent on the length the scores "
                           "are divided by (> 0 favours longer texts)", TypeConverters.toFloat)
    noRepeatNgramSize = stage_param("noRepeatNgramSize", "no n-gram of this size twice in a text "
                               "(0: off)", at_least(0))
    crossAttention = stage_param("crossAttention", "add the source and generated tokens and the "
                            "cross-attention weights [layer][head][target][source]",
                            TypeConverters.toBoolean)

    def __init__(self) -> None:
        super().__init__()
        self._setDefault(outputCol="generated", numBeams=1, maxNewTokens=128, prefix="",
                         lengthPenalty=1.0, noRepeatNgramSize=0, crossAttention=False)


class TextGenerator(HeadStage, _TextGeneratorParams):
    """Text column -> struct ``text`` (generated), ``tokens`` (how many were generated, the
    eos included), ``stopped`` (``eos``: the model ended the text; ``max_new_tokens``: it
    reached the limit), with ``crossAttention`` also ``source_tokens``, ``target_tokens``
    and ``cross_attention``, then ``truncated`` and ``reason``; from a local
    sequence-to-sequence model folder (``*ForConditionalGeneration``, ``MarianMTModel``).

    Texts are generated as ``model.generate`` does on each text alone, greedy or beam search
    (``numBeams``) and decoded without special tokens; the model's own generation config
    gives what these params leave (a forced eos, a minimum length). ``transform`` runs no
    Spark job: the texts are generated when the result is computed (on classic Spark it
    checks the model folder and ships it first). Generation runs on the torch engine: the
    classifiers' ``engine``, ``quantize`` and int8 params must keep their defaults."""

    task = TASK

    @keyword_only
    def __init__(self, *, inputCol: str | None = None, outputCol: str | None = None,
                 modelPath: str | None = None, numBeams: int | None = None,
                 maxNewTokens: int | None = None, prefix: str | None = None,
                 lengthPenalty: float | None = None, noRepeatNgramSize: int | None = None,
                 crossAttention: bool | None = None, device: str | None = None,
                 batchSize: int | None = None, maxTokens: int | None = None,
                 bucket: bool | None = None, onLongText: str | None = None,
                 precision: str | None = None) -> None:
        super().__init__()
        self.setParams(**self._input_kwargs)

    @keyword_only
    def setParams(self, *, inputCol: str | None = None, outputCol: str | None = None,
                  modelPath: str | None = None, numBeams: int | None = None,
                  maxNewTokens: int | None = None, prefix: str | None = None,
                  lengthPenalty: float | None = None, noRepeatNgramSize: int | None = None,
                  crossAttention: bool | None = None, device: str | None = None,
                  batchSize: int | None = None, maxTokens: int | None = None,
                  bucket: bool | None = None, onLongText: str | None = None,
                  precision: str | None = None) -> TextGenerator:
        """Sets the params given; ``None`` sets ``modelPath`` or ``maxTokens`` to None and
        leaves the others as they are."""
        return self._set_params(self._input_kwargs)

    def engine_spec(self, dataset: DataFrame, **extra: Any) -> EngineSpec:
        """What each worker builds (checked and shipped on classic Spark; over Connect the
        executors check the folder)."""
        folder = self.getModelPath()
        if not folder:
            raise ConfigError("TextGenerator needs modelPath (a local model folder)")
        if self.getEngine() != "torch" or self.getQuantize() != "none":
            raise ConfigError(f"TextGenerator runs on the torch engine only (engine "
                              f"{self.getEngine()}, quantize {self.getQuantize()})")
        spark = dataset.sparkSession
        if not is_connect(spark):
            here = check_model_dir(folder)
            check_seq2seq(here)
            check_max_tokens(here, self.getMaxTokens())
        return ready(spark, EngineSpec(
            folder, "torch", self.getDevice(), self.getMaxTokens(),
            threads=worker_threads(spark), task=self.task, precision=self.getPrecision()))

    def options(self) -> Options:
        return Options(self.getNumBeams(), self.getMaxNewTokens(), self.getLengthPenalty(),
                       self.getNoRepeatNgramSize())

    def timed_result(self, dataset: DataFrame) -> Column:
        self._check_columns(dataset)
        udf = generation_udf(self.engine_spec(dataset), self.getBatchSize(), self.getBucket(),
                             self.options(), self.getPrefix(), self.getCrossAttention(),
                             self.getOnLongText() == "reject")
        result = udf(text_input(dataset, self.getInputCol(), None))
        return result


def generate_texts(df: DataFrame, model_dir: str, input_col: str = "text",
                   output_col: str = "generated", **params: Any) -> DataFrame:
    """``df`` with ``output_col`` added by a :class:`TextGenerator` of ``model_dir``;
    ``params``: the stage's other params (``numBeams``, ``maxNewTokens``, ``prefix``...)."""
    return TextGenerator(inputCol=input_col, outputCol=output_col, modelPath=model_dir,
                         **params).transform(df)
