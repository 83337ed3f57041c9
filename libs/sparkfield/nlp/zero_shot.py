"""Zero-shot classification with a natural language inference (NLI) model:
:class:`ZeroShotClassifier` / :func:`classify_zero_shot`, labels chosen at run time.

Each text is the premise of one NLI pair per candidate label, the label put into a hypothesis
(``hypothesisTemplate``, default ``This example is {}.``), as the Hugging Face zero-shot
pipeline does. The pairs run on the classifiers' engine (a ``*ForSequenceClassification`` head
giving its raw logits: :mod:`sparkfield.nlp.classify`); only the premise is cut to fit
``maxTokens``, the hypothesis is kept whole. Scores: a softmax of the entailment logits over the
labels, or with ``multiLabel`` (or a single label) each label's entailment against
contradiction on its own. Every input row is kept, with ``truncated`` and ``reason`` as the
other classifiers give them."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark import keyword_only
from pyspark.ml.param import TypeConverters
from pyspark.sql import Column, DataFrame
from pyspark.sql import types as T

from sparkfield.core.connect import is_connect
from sparkfield.core.errors import ConfigError
from sparkfield.nlp.embed import SPLIT, SPLIT_TYPE, EngineSpec, model_udf
from sparkfield.nlp.encoder import Split
from sparkfield.nlp.head_params import HeadParams, checked, stage_param
from sparkfield.nlp.head_rows import OUTCOME, outcome_arrays, rows_to_run, text_input
from sparkfield.nlp.head_stage import HeadStage
from sparkfield.nlp.heads import SEQUENCE
from sparkfield.nlp.model import ModelError, check_model_dir, model_config

TEMPLATE = "This example is {}."
ZERO_SHOT_TYPE = T.StructType([
    T.StructField("labels", T.ArrayType(T.StringType(), False), True),
    T.StructField("scores", T.ArrayType(T.DoubleType(), False), True),
    T.StructField("label", T.StringType(), True),
    T.StructField("score", T.DoubleType(), True),
    *OUTCOME,
])
_LABELS_ARROW = pa.list_(pa.field("element", pa.string(), False))
_SCORES_ARROW = pa.list_(pa.field("element", pa.float64(), False))


def nli_ids(label2id: Mapping[str, Any], where: str) -> tuple[int, int]:
    """(entailment id, contradiction id) as the Hugging Face zero-shot pipeline finds them:
    the first label starting with "entail" (any case); contradiction is label 0, or the last
    label when entailment is 0. A :class:`ModelError` naming ``where`` without such a label."""
    for label, i in label2id.items():
        if str(label).lower().startswith("entail"):
            return int(i), (-1 if int(i) == 0 else 0)
    raise ModelError(f"{where}: not an NLI model: no label starting with 'entail' among "
                     f"{', '.join(map(str, label2id)) or 'none'} (config label2id)")


def _folder_label2id(folder: Any) -> dict[str, Any]:
    """The config's label2id (as the model loads it: from id2label where it has none)."""
    cfg = model_config(folder)
    raw = cfg.get("label2id") or {v: k for k, v in (cfg.get("id2label") or {}).items()}
    return dict(raw)


def scores_of(logits: np.ndarray, entail: int, contra: int, multi: bool) -> np.ndarray:
    """float64 [texts, labels] from logits [texts, labels, model labels]: a softmax of the
    entailment logits over the labels, or with ``multi`` a softmax of [contradiction,
    entailment] per label (its entailment side)."""
    x = logits.astype(np.float64)
    if multi:
        pair = x[..., [contra, entail]]
        e = np.exp(pair - pair.max(axis=-1, keepdims=True))
        return (e / e.sum(axis=-1, keepdims=True))[..., 1]
    ent = x[..., entail]
    e = np.exp(ent - ent.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def ranked(scores: np.ndarray) -> np.ndarray:
    """Label indices per row, highest score first, in the pipeline's order (its float32
    scores sorted ascending, then reversed: of equal scores, the later label first)."""
    return np.argsort(scores.astype(np.float32), axis=1, kind="stable")[:, ::-1]


def _lists(values: pa.Array, k: int, keep: np.ndarray, kind: pa.DataType) -> pa.Array:
    """``k`` items per kept row (``values``: theirs, row after row), null on the others."""
    offsets = np.zeros(len(keep) + 1, dtype=np.int32)
    np.cumsum(np.where(keep, k, 0), out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), values, type=kind,
                                    mask=pa.array(~keep))


def _check_hypotheses(head: Any, hypotheses: list[str]) -> None:
    """A hypothesis with the model's special tokens must leave room within ``maxTokens``:
    only the premise is ever cut."""
    for h in hypotheses:
        n = len(head.tokenizer("", h)["input_ids"])
        if n >= head.max_tokens:
            raise ConfigError(f"hypothesis {h!r} takes {n} tokens with the special tokens, "
                              f"maxTokens is {head.max_tokens}: no room for the text")


def zero_shot(head: Any, texts: list[str], hypotheses: list[str], multi: bool,
              batch_size: int | None = None, bucket: bool = False,
              split: Split | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(scores float64 [texts, hypotheses] in hypothesis order, truncated bool [texts]) of
    ``texts`` against ``hypotheses`` on ``head``, a sequence classifier giving raw logits.
    ``multi`` (taken for a single hypothesis too): each hypothesis scored on its own;
    ``batch_size``: pairs per model batch. A text is truncated when any of its pairs cut it.
    """
    k = len(hypotheses)
    multi = multi or k == 1
    entail, contra = nli_ids(_folder_label2id(head.folder), str(head.folder))
    _check_hypotheses(head, hypotheses)
    premises = [t for t in texts for _ in range(k)]
    tokens, logits = head.infer(premises, hypotheses * len(texts), batch_size, bucket, split,
                                truncation="only_first")
    truncated = tokens.truncated.reshape(len(texts), k).any(axis=1)
    return scores_of(logits.reshape(len(texts), k, -1), entail, contra, multi), truncated


def zero_shot_udf(spec: EngineSpec, labels: list[str], template: str, multi: bool,
                  batch_size: int, bucket: bool, reject: bool) -> Callable[[Column], Column]:
    """An Arrow UDF: struct<text, pair, reason> -> :data:`ZERO_SHOT_TYPE` and :data:`SPLIT`.
    ``batch_size``: (text, hypothesis) pairs per model batch."""
    hypotheses = [template.format(label) for label in labels]
    k = len(labels)

    def work(inputs: pa.StructArray, model: Callable[[], Any], split: Split) -> list[pa.Array]:
        n = len(inputs)
        rows, texts, _, reasons = rows_to_run(inputs, split, False)
        scores = np.zeros((n, k))
        truncated = np.zeros(len(rows), dtype=bool)
        if len(rows):
            scores[rows], truncated = zero_shot(model(), texts, hypotheses, multi, batch_size,
                                                bucket, split)
        t0 = time.perf_counter()
        keep, outcome = outcome_arrays(n, rows, truncated, reasons, reject)
        order = ranked(scores[keep])
        top = np.take_along_axis(scores[keep], order, axis=1)
        names = np.array(labels, dtype=object)[order]
        label = np.full(n, None, dtype=object)
        score = np.zeros(n)
        label[keep], score[keep] = names[:, 0], top[:, 0]
        arrays = [
            _lists(pa.array(names.reshape(-1).tolist(), pa.string()), k, keep, _LABELS_ARROW),
            _lists(pa.array(top.reshape(-1), pa.float64()), k, keep, _SCORES_ARROW),
            pa.array(label.tolist(), pa.string()),
            pa.array(score, mask=~keep),
        ]
        split.arrow_out += time.perf_counter() - t0
        return [*arrays, *outcome]

    return model_udf(spec, work, T.StructType([*ZERO_SHOT_TYPE.fields,
                                               T.StructField(SPLIT, SPLIT_TYPE, True)]))


# --- params --------------------------------------------------------------------------------

def _label_list(value: Any) -> list[str]:
    """A list of labels; a string is comma-separated labels, as the pipeline reads one."""
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return TypeConverters.toListString(value)


def _labels_problem(labels: list[str]) -> str | None:
    if not labels:
        return "must name at least one label"
    if any(not label.strip() for label in labels):
        return "must not hold a blank label"
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    return f"must not repeat a label, got {', '.join(map(repr, repeated))} twice" \
        if repeated else None


def _template_problem(template: str) -> str | None:
    try:
        fits = "{}" in template and template.format("x") != template
    except (IndexError, KeyError, ValueError):
        fits = False
    return None if fits else f"must hold {{}} where the label goes, got {template!r}"


class _ZeroShotParams(HeadParams):
    """ZeroShotClassifier's own params and defaults."""

    candidateLabels = stage_param("candidateLabels", "the labels to choose from (required; no "
                             "repeats)", checked(_label_list, _labels_problem))
    hypothesisTemplate = stage_param("hypothesisTemplate", "the hypothesis of each label: {} "
                                "where the label goes",
                                checked(TypeConverters.toString, _template_problem))
    multiLabel = stage_param("multiLabel", "score each label on its own (entailment against "
                        "contradiction) instead of a softmax over the labels",
                        TypeConverters.toBoolean)

    def __init__(self) -> None:
        super().__init__()
        self._setDefault(outputCol="zero_shot", hypothesisTemplate=TEMPLATE, multiLabel=False)


class ZeroShotClassifier(HeadStage, _ZeroShotParams):
    """Text column -> struct ``labels`` (the candidate labels, highest score first),
    ``scores`` (in that order), ``label`` and ``score`` (the top one), ``truncated``,
    ``reason``, from a local NLI ``*ForSequenceClassification`` model folder whose config
    names an entailment label.

    Scores as the Hugging Face zero-shot-classification pipeline gives them: each text paired
    with every label's hypothesis; a softmax of the entailment logits over the labels, or with
    ``multiLabel`` (or a single label) per label a softmax of its contradiction and entailment
    logits (contradiction: label 0, or the last label when entailment is 0, as the pipeline
    takes it). A text is ``truncated`` (or with ``onLongText`` reject, ``too long``) when it
    had to be cut to fit a pair within ``maxTokens``. ``transform`` runs no Spark job: the
    texts are classified when the result is computed (on classic Spark it checks the model
    folder and ships it first)."""

    task, kind = "zero-shot-classification", SEQUENCE

    @keyword_only
    def __init__(self, *, inputCol: str | None = None, outputCol: str | None = None,
                 modelPath: str | None = None, candidateLabels: list[str] | None = None,
                 hypothesisTemplate: str | None = None, multiLabel: bool | None = None,
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
                  modelPath: str | None = None, candidateLabels: list[str] | None = None,
                  hypothesisTemplate: str | None = None, multiLabel: bool | None = None,
                  device: str | None = None, batchSize: int | None = None,
                  maxTokens: int | None = None, bucket: bool | None = None,
                  onLongText: str | None = None, precision: str | None = None,
                  engine: str | None = None, quantize: str | None = None,
                  int8Check: str | None = None, int8MaxDisagreement: float | None = None,
                  int8SampleRows: int | None = None) -> ZeroShotClassifier:
        """Sets the params given; ``None`` sets ``modelPath`` or ``maxTokens`` to None and
        leaves the others as they are."""
        return self._set_params(self._input_kwargs)

    def engine_spec(self, dataset: DataFrame, **extra: Any) -> EngineSpec:
        """The engine of :class:`HeadStage` giving raw logits; on classic Spark the folder's
        entailment label is checked here first."""
        folder = self.getModelPath()
        if folder and not is_connect(dataset.sparkSession):
            here = check_model_dir(folder)
            nli_ids(_folder_label2id(here), str(here))
        return super().engine_spec(dataset, function="none", **extra)

    def int8_scorer(self) -> Callable[..., np.ndarray]:
        """What the int8 check (:mod:`~sparkfield.nlp.int8_check`) compares: each text's
        candidate-label scores as this stage computes them, on a given head."""
        hypotheses = [self.getHypothesisTemplate().format(label)
                      for label in self.getCandidateLabels()]
        multi = self.getMultiLabel()

        def scores(head: Any, texts: list[str], batch_size: int, bucket: bool,
                   split: Split) -> np.ndarray:
            return zero_shot(head, texts, hypotheses, multi, batch_size, bucket, split)[0]

        return scores

    def timed_result(self, dataset: DataFrame) -> Column:
        if not self.isDefined(self.candidateLabels):
            raise ConfigError("ZeroShotClassifier needs candidateLabels (the labels to "
                              "choose from)")
        self._check_columns(dataset)
        udf = zero_shot_udf(self.engine_spec(dataset), list(self.getCandidateLabels()),
                            self.getHypothesisTemplate(), self.getMultiLabel(),
                            self.getBatchSize(), self.getBucket(),
                            self.getOnLongText() == "reject")
        result = udf(text_input(dataset, self.getInputCol(), None))
        return result


def classify_zero_shot(df: DataFrame, model_dir: str, candidate_labels: list[str],
                       input_col: str = "text", output_col: str = "zero_shot",
                       **params: Any) -> DataFrame:
    """``df`` with ``output_col`` added by a :class:`ZeroShotClassifier` of ``model_dir``
    choosing among ``candidate_labels``; ``params``: the stage's other params
    (``hypothesisTemplate``, ``multiLabel``, ``batchSize``...)."""
    return ZeroShotClassifier(inputCol=input_col, outputCol=output_col, modelPath=model_dir,
                              candidateLabels=candidate_labels, **params).transform(df)
