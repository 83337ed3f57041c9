"""Transformer stages on Spark: sentence embeddings (torch or ONNX Runtime, or Spark NLP where
its jar is on the classpath), as a Spark ML stage (:class:`SentenceEmbeddings`) and as the embed
job (:func:`run`) with nearest neighbours, topics and attention maps; fine-tuned classifiers
(:class:`TextClassifier`, :class:`TokenClassifier`) on the same engine. Models load from local
folders only.

The public names are imported on first use: the engine modules (``encoder``, ``heads``,
``aggregation``) import without pyspark, so a machine with only torch can run them."""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "EmbedResult": "sparkfield.nlp.job",
    "run": "sparkfield.nlp.job",
    "SentenceEmbeddings": "sparkfield.nlp.embedding_stage",
    "TextClassifier": "sparkfield.nlp.classify",
    "TokenClassifier": "sparkfield.nlp.classify",
    "classify_texts": "sparkfield.nlp.classify",
    "classify_tokens": "sparkfield.nlp.classify",
    "count_outcomes": "sparkfield.nlp.classify",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
