"""Transformer stages on Spark: sentence embeddings (torch or ONNX Runtime, or Spark NLP where
its jar is on the classpath), as a Spark ML stage (:class:`SentenceEmbeddings`) and as the embed
job (:func:`run`) with nearest neighbours, topics and attention maps; inference stages on the
same engine: classifiers (:class:`TextClassifier`, :class:`TokenClassifier`,
:class:`ZeroShotClassifier`), extractive question answering (:class:`QuestionAnswerer`) and
sequence-to-sequence generation (:class:`TextGenerator`), run over a table by the infer job
(:func:`run_infer`). Models load from local folders only.

The public names are imported on first use: the engine modules (``encoder``, ``heads``,
``aggregation``) import without pyspark, so a machine with only torch can run them."""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "EmbedResult": "sparkfield.nlp.job",
    "run": "sparkfield.nlp.job",
    "InferResult": "sparkfield.nlp.infer_job",
    "run_infer": "sparkfield.nlp.infer_job:run",
    "SentenceEmbeddings": "sparkfield.nlp.embedding_stage",
    "TextClassifier": "sparkfield.nlp.classify",
    "TokenClassifier": "sparkfield.nlp.classify",
    "classify_texts": "sparkfield.nlp.classify",
    "classify_tokens": "sparkfield.nlp.classify",
    "count_outcomes": "sparkfield.nlp.head_rows",
    "ZeroShotClassifier": "sparkfield.nlp.zero_shot",
    "classify_zero_shot": "sparkfield.nlp.zero_shot",
    "QuestionAnswerer": "sparkfield.nlp.question_answering",
    "answer_questions": "sparkfield.nlp.question_answering",
    "TextGenerator": "sparkfield.nlp.generation",
    "generate_texts": "sparkfield.nlp.generation",
    "int8_agreement": "sparkfield.nlp.int8_check",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, _, attribute = _EXPORTS[name].partition(":")
    value = getattr(importlib.import_module(module), attribute or name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
