"""Classification heads on the sentence encoders' engine: a fine-tuned Hugging Face model
folder (``save_pretrained``) read by its config (``architectures``, ``id2label``,
``problem_type``) and run with the same tokenising, length bucketing and batching as the
embeddings (:class:`~sparkfield.nlp.encoder.Encoder`).

:class:`SequenceClassifier`: one label per text (or text pair), softmax or sigmoid as the
Hugging Face text-classification pipeline picks it. :class:`TokenTagger`: per-token label
probabilities with each token's character offsets, grouped into entities by
:mod:`sparkfield.nlp.aggregation`. Neither imports pyspark: the Spark stages
(:mod:`sparkfield.nlp.classify`) and the GPU benchmark run this same code."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sparkfield.core.errors import ConfigError
from sparkfield.nlp.encoder import Encoder, Split, Tokens
from sparkfield.nlp.model import ModelError, model_config

FUNCTIONS = ("auto", "softmax", "sigmoid", "none")
SEQUENCE = "ForSequenceClassification"
TOKEN = "ForTokenClassification"


@dataclass(frozen=True)
class Head:
    """What a classification model's config says about its outputs."""

    labels: tuple[str, ...]  # id2label, in label-id order
    problem_type: str | None

    def function(self, requested: str = "auto") -> str:
        """The function from logits to scores: ``requested``, or for ``auto`` the text-
        classification pipeline's choice (none for regression, sigmoid for multi-label or a
        single output, softmax for single-label or several outputs)."""
        if requested not in FUNCTIONS:
            raise ConfigError(f"function must be one of {', '.join(FUNCTIONS)}, "
                              f"got {requested!r}")
        if requested != "auto":
            return requested
        if self.problem_type == "regression":
            return "none"
        if self.problem_type == "multi_label_classification" or len(self.labels) == 1:
            return "sigmoid"
        return "softmax"


def read_head(folder: Path, kind: str) -> Head:
    """The labels and problem type of a model folder whose ``architectures`` name a
    ``kind`` model (:data:`SEQUENCE` or :data:`TOKEN`); a :class:`ModelError` otherwise."""
    cfg = model_config(folder)
    archs = cfg.get("architectures") or []
    if archs and not any(str(a).endswith(kind) for a in archs):
        raise ModelError(f"{folder}: not a *{kind} model (architectures: {', '.join(archs)})")
    raw = cfg.get("id2label") or {}
    try:
        id2label = {int(k): str(v) for k, v in raw.items()}
    except (TypeError, ValueError) as exc:
        raise ModelError(f"{folder}/config.json: id2label keys must be label ids") from exc
    if not id2label or sorted(id2label) != list(range(len(id2label))):
        raise ModelError(f"{folder}/config.json: id2label must name labels 0..n-1")
    return Head(tuple(id2label[i] for i in range(len(id2label))), cfg.get("problem_type"))


def apply(function: str, logits: np.ndarray) -> np.ndarray:
    """Scores float64 from logits over the last axis (softmax, sigmoid or as they are)."""
    x = logits.astype(np.float64)
    if function == "softmax":
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
    if function == "sigmoid":
        return 1.0 / (1.0 + np.exp(-x))
    return x


@dataclass
class Classified:
    """Sequence classification of some texts, in their order."""

    labels: tuple[str, ...]  # the model's labels, by id
    scores: np.ndarray  # float64 [n, labels]
    truncated: np.ndarray  # bool [n]

    @property
    def best(self) -> np.ndarray:
        """Label id of the highest score per text (the lowest id on a tie)."""
        return self.scores.argmax(axis=1) if len(self.scores) else np.zeros(0, np.int64)


class _Logits(Encoder):
    """A model whose output is its logits (the classifiers' heads)."""

    def forward(self, batch: dict[str, np.ndarray]) -> np.ndarray:
        """Logits float32: [n, labels] of a sequence head, [n, tokens, labels] of a token
        head."""
        torch = self.torch
        inputs = {k: torch.from_numpy(v).to(self.device) for k, v in batch.items()}
        with torch.inference_mode():
            logits = self.model(**inputs).logits
        return logits.float().cpu().numpy()


@dataclass
class SequenceClassifier(_Logits):
    """A ``*ForSequenceClassification`` model: texts (or text pairs) -> label scores."""

    function: str = "auto"  # auto, softmax, sigmoid or none

    auto_model = "AutoModelForSequenceClassification"

    def __post_init__(self) -> None:
        self.head = read_head(self.folder, SEQUENCE)
        self.apply = self.head.function(self.function)
        super().__post_init__()

    def pool(self, output: np.ndarray, batch: dict[str, np.ndarray]) -> np.ndarray:
        return apply(self.apply, output)

    def classify(self, texts: list[str], pairs: list[str] | None = None,
                 batch_size: int | None = None, bucket: bool = False,
                 split: Split | None = None) -> Classified:
        """Scores of every label for each text (and its pair), in input order."""
        tokens, scores = self.infer(texts, pairs, batch_size, bucket, split)
        if not len(texts):
            scores = np.zeros((0, len(self.head.labels)))
        return Classified(self.head.labels, scores, tokens.truncated)


@dataclass
class Tagged:
    """Token classification of some texts, in their order: per text, each token's label
    probabilities and the tokenizer's encoding (ids, offsets, special tokens)."""

    labels: tuple[str, ...]
    scores: list[np.ndarray]  # float64 [tokens, labels] per text
    tokens: Tokens = field(repr=False)


@dataclass
class TokenTagger(_Logits):
    """A ``*ForTokenClassification`` model: texts -> per-token label probabilities."""

    auto_model = "AutoModelForTokenClassification"
    offsets = True

    def __post_init__(self) -> None:
        self.head = read_head(self.folder, TOKEN)
        super().__post_init__()

    def pool(self, output: np.ndarray, batch: dict[str, np.ndarray]) -> list[np.ndarray]:
        """Softmax per token, each row cut to its own tokens."""
        lengths = batch["attention_mask"].sum(axis=1)
        return [apply("softmax", output[i, :n]) for i, n in enumerate(lengths)]

    def reorder(self, parts: list, order: np.ndarray) -> list[np.ndarray]:
        rows = [row for part in parts for row in part]
        out: list[np.ndarray] = [rows[0]] * len(rows)
        for k, i in enumerate(order.tolist()):
            out[i] = rows[k]
        return out

    def tag(self, texts: list[str], batch_size: int | None = None, bucket: bool = False,
            split: Split | None = None) -> Tagged:
        tokens, scores = self.infer(texts, None, batch_size, bucket, split)
        return Tagged(self.head.labels, list(scores) if len(texts) else [], tokens)
