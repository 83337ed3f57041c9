"""Token labels grouped into entities as the Hugging Face token-classification pipeline groups
them (``aggregation_strategy`` none, simple, first, average, max), from the per-token label
probabilities of :class:`~sparkfield.nlp.heads.TokenTagger`.

Every entity carries its label, its score, and ``start``/``end``: character offsets into the
original text; its ``word`` is the text between them (the pipeline's own ``word`` rebuilds it
from the tokens, lower-cased by an uncased tokenizer). Special tokens are left out; subword
tokens are told by the tokenizer's continuing-subword prefix, or else by the text around their
start (no space), as in the pipeline."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

STRATEGIES = ("none", "simple", "first", "average", "max")
WORD_STRATEGIES = ("first", "average", "max")


@dataclass(frozen=True)
class Entity:
    """One labelled token (strategy none) or group of tokens."""

    label: str
    score: float
    word: str
    start: int
    end: int
    index: int | None = None  # the token's position (strategy none only)


@dataclass
class _Token:
    scores: np.ndarray  # float64 [labels]
    start: int
    end: int
    index: int
    is_subword: bool


def tokens_of(text: str, encoding, scores: np.ndarray, unk_id: int | None,
              subword_prefix: str | None) -> list[_Token]:
    """The tokens of one text that are not special tokens, with their scores, offsets and
    whether each continues the word before it."""
    out = []
    for idx, (tid, token, special, (start, end)) in enumerate(zip(
            encoding.ids, encoding.tokens, encoding.special_tokens_mask, encoding.offsets,
            strict=True)):
        if special:
            continue
        if subword_prefix:
            is_subword = len(token) != len(text[start:end])
        else:
            is_subword = start > 0 and " " not in text[start - 1:start + 1]
        if tid == unk_id:
            is_subword = False
        out.append(_Token(scores[idx], start, end, idx, is_subword))
    return out


def _best(scores: np.ndarray) -> tuple[int, float]:
    i = int(scores.argmax())
    return i, float(scores[i])


def _word(group: list[_Token], strategy: str) -> tuple[int, float]:
    """(label id, score) of one word's tokens."""
    if strategy == "first":
        return _best(group[0].scores)
    if strategy == "max":
        return _best(max(group, key=lambda t: t.scores.max()).scores)
    return _best(np.nanmean(np.stack([t.scores for t in group]), axis=0))


def _tag(label: str) -> tuple[str, str]:
    """(B or I, tag) of a label; a label without a B-/I- prefix continues (I)."""
    if label.startswith(("B-", "I-")):
        return label[0], label[2:]
    return "I", label


def entities(text: str, tokens: list[_Token], labels: tuple[str, ...], strategy: str,
             ignore: tuple[str, ...] = ("O",)) -> list[Entity]:
    """The entities of one text under ``strategy``, those labelled one of ``ignore`` left
    out."""
    if strategy in ("none", "simple"):
        items = [(*_best(t.scores), t.start, t.end, t.index) for t in tokens]
    else:
        words: list[list[_Token]] = []
        for t in tokens:
            if words and t.is_subword:
                words[-1].append(t)
            else:
                words.append([t])
        items = [(*_word(w, strategy), w[0].start, w[-1].end, None) for w in words]
    if strategy == "none":
        found = [Entity(labels[i], s, text[a:b], a, b, idx) for i, s, a, b, idx in items]
    else:
        found = _grouped(text, [(labels[i], s, a, b) for i, s, a, b, _ in items])
    return [e for e in found if e.label not in ignore]


def _grouped(text: str, items: list[tuple[str, float, int, int]]) -> list[Entity]:
    """Adjacent items of one tag, each but the first not a B- label, as one entity; its
    score the mean of theirs."""
    groups: list[list[tuple[str, float, int, int]]] = []
    for item in items:
        bi, tag = _tag(item[0])
        if groups and bi != "B" and _tag(groups[-1][-1][0])[1] == tag:
            groups[-1].append(item)
        else:
            groups.append([item])
    out = []
    for g in groups:
        start, end = g[0][2], g[-1][3]
        score = float(np.nanmean([s for _, s, _, _ in g]))
        out.append(Entity(g[0][0].split("-", 1)[-1], score, text[start:end], start, end))
    return out
