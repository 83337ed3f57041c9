"""Extractive question answering on the sentence encoders' engine: a fine-tuned
``*ForQuestionAnswering`` model folder run with the same padding, length bucketing and batching
as the embeddings (:class:`~sparkfield.nlp.encoder.Encoder`).

Each (question, context) pair is tokenised question first, the context cut into windows of
``max_tokens`` tokens that overlap by ``stride`` tokens, so a context longer than the window is
read whole; the windows of all pairs are what gets bucketed and batched. The answer is chosen
as the Hugging Face question-answering pipeline of transformers 4.x chooses it: per window,
tokens outside the context (the question, special tokens other than CLS) get the logit -10000,
start and end logits go through a softmax each, a span scores p_start * p_end (end >= start,
at most ``max_answer_length`` tokens), and the best spans of all windows compete. A span read
in two overlapping windows counts once, with its better score. The answer is the context's
characters between the span's token offsets.

No pyspark here: :mod:`sparkfield.nlp.question_answering` runs it in Spark."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sparkfield.core.errors import ConfigError
from sparkfield.nlp.encoder import Split, Tokens
from sparkfield.nlp.heads import _Logits, apply
from sparkfield.nlp.model import ModelError, model_config

QA = "ForQuestionAnswering"
WINDOW = 384  # the pipeline's max_seq_len: the window when none is given (or the model's, less)
MASKED = -10000.0  # the logit of a token that cannot be part of an answer


@dataclass(frozen=True)
class Span:
    """One answer: the context's characters ``start``..``end`` and their score."""

    answer: str
    score: float
    start: int
    end: int


@dataclass
class Answered:
    """The answers of some (question, context) pairs, in their order."""

    answers: list[list[Span]]  # best first, at most top_k; empty: not run, or no context token
    windows: np.ndarray  # int [n]: windows each context was read in (0: not run)
    truncated: np.ndarray  # bool [n]: the question was cut to max_question_length tokens


def check_qa_model(folder: Path) -> None:
    """A :class:`ModelError` unless the folder's ``architectures`` name a
    ``*ForQuestionAnswering`` model (a folder without ``architectures`` is taken as one)."""
    archs = model_config(folder).get("architectures") or []
    if archs and not any(str(a).endswith(QA) for a in archs):
        raise ModelError(f"{folder}: not a *{QA} model (architectures: {', '.join(archs)})")


def check_window(max_tokens: int, stride: int, max_question_length: int,
                 special_tokens: int = 3) -> None:
    """A :class:`ConfigError` unless a window holds the longest question, the special tokens
    and more than ``stride`` context tokens (windows overlap by ``stride`` tokens)."""
    if stride >= max_tokens:
        raise ConfigError(f"stride {stride} must be less than maxTokens {max_tokens}")
    room = max_tokens - max_question_length - special_tokens
    if stride >= room:
        specials = f" and {special_tokens} special tokens" if special_tokens else ""
        raise ConfigError(
            f"stride {stride} leaves no context in a window: maxTokens {max_tokens} less "
            f"maxQuestionLength {max_question_length}{specials} leaves {room} context "
            "tokens, which must be more than the stride")


@dataclass
class SpanExtractor(_Logits):
    """A ``*ForQuestionAnswering`` model: (question, context) pairs -> answer spans.

    ``max_tokens`` None: the model's window, at most :data:`WINDOW` (the pipeline's
    ``max_seq_len``)."""

    auto_model = "AutoModelForQuestionAnswering"
    offsets = True

    def __post_init__(self) -> None:
        check_qa_model(self.folder)
        super().__post_init__()
        self.question_first = getattr(self.tokenizer, "padding_side", "right") == "right"
        self.specials = self.tokenizer.num_special_tokens_to_add(pair=True)

    def _load_tokenizer(self) -> None:
        default = self.max_tokens is None
        super()._load_tokenizer()
        if default:
            self.max_tokens = min(self.max_tokens, WINDOW)

    def forward(self, batch: dict[str, np.ndarray]) -> np.ndarray:
        """Start and end logits float32 [n, tokens, 2]."""
        torch = self.torch
        inputs = {k: torch.from_numpy(v).to(self.device) for k, v in batch.items()}
        with torch.inference_mode():
            out = self.model(**inputs)
            logits = torch.stack([out.start_logits, out.end_logits], dim=-1)
        return logits.float().cpu().numpy()

    def pool(self, output: np.ndarray, batch: dict[str, np.ndarray]) -> list[np.ndarray]:
        """Each window's logits, cut to its own tokens."""
        lengths = batch["attention_mask"].sum(axis=1)
        return [output[i, :n] for i, n in enumerate(lengths.tolist())]

    # --- tokenising ----------------------------------------------------------------------

    def cut_questions(self, questions: list[str],
                      longest: int) -> tuple[list[str], np.ndarray]:
        """(the questions, each over ``longest`` tokens cut after its ``longest``-th token;
        which were cut)."""
        enc = self.tokenizer(questions, add_special_tokens=False, return_offsets_mapping=True,
                             return_attention_mask=False, return_token_type_ids=False)
        cut = np.zeros(len(questions), dtype=bool)
        out = list(questions)
        for i, offsets in enumerate(enc["offset_mapping"]):
            if len(offsets) > longest:
                cut[i] = True
                out[i] = questions[i][:offsets[longest - 1][1]]
        return out, cut

    def windows(self, questions: list[str], contexts: list[str],
                stride: int) -> tuple[Tokens, np.ndarray]:
        """(the windows of every pair, in pair order, with their encodings; the pair of each
        window)."""
        if not questions:
            return Tokens([], None, np.zeros(0, dtype=bool), []), np.zeros(0, dtype=np.int64)
        first, second = (questions, contexts) if self.question_first else (contexts, questions)
        enc = self.tokenizer(first, second, max_length=self.max_tokens, stride=stride,
                             truncation="only_second" if self.question_first else "only_first",
                             return_overflowing_tokens=True, return_offsets_mapping=True,
                             return_attention_mask=False,
                             return_token_type_ids=self.wants_type_ids)
        encodings = enc.encodings
        types = [e.type_ids for e in encodings] if self.wants_type_ids else None
        owner = np.asarray(enc["overflow_to_sample_mapping"], dtype=np.int64)
        return (Tokens([e.ids for e in encodings], types,
                       np.zeros(len(encodings), dtype=bool), encodings), owner)

    # --- answering -----------------------------------------------------------------------

    def answer(self, questions: list[str], contexts: list[str], batch_size: int | None = None,
               bucket: bool = False, split: Split | None = None, *, stride: int = 128,
               max_answer_length: int = 15, max_question_length: int = 64, top_k: int = 1,
               handle_impossible: bool = False, skip_long: bool = False) -> Answered:
        """The ``top_k`` best answers of each question in its context.

        ``skip_long``: a question over ``max_question_length`` tokens is not run (no answers,
        0 windows) instead of cut. ``handle_impossible``: the null answer ("" at 0..0, scored
        by CLS as start and end, its lowest over the windows) competes too."""
        split = split if split is not None else Split()
        if max_answer_length < 1 or top_k < 1 or stride < 0:
            raise ConfigError("max_answer_length and top_k must be >= 1 and stride >= 0")
        check_window(self.max_tokens, stride, max_question_length, self.specials)
        clock = time.perf_counter
        t0 = clock()
        n = len(questions)
        if n == 0:
            return Answered([], np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool))
        cut_questions, truncated = self.cut_questions(questions, max_question_length)
        run = np.flatnonzero(~truncated) if skip_long else np.arange(n)
        tokens, owner = self.windows([cut_questions[i] for i in run.tolist()],
                                     [contexts[i] for i in run.tolist()], stride)
        owner = run[owner]
        split.tokenise += clock() - t0
        logits = self._logits(tokens, batch_size, bucket, split)
        t0 = clock()
        cls = self.tokenizer.cls_token_id
        context_seq = 1 if self.question_first else 0
        found: list[dict[tuple[int, int], Span]] = [{} for _ in range(n)]
        null = np.full(n, 1_000_000.0)
        for w, (encoding, scores) in enumerate(zip(tokens.encodings, logits, strict=True)):
            i = int(owner[w])
            spans, null_score = window_spans(encoding, scores, context_seq, cls,
                                             max_answer_length, top_k)
            null[i] = min(null[i], null_score)
            for s, e, score in spans:
                start, end = encoding.offsets[s][0], encoding.offsets[e][1]
                best = found[i].get((start, end))
                if best is None or score > best.score:
                    found[i][(start, end)] = Span(contexts[i][start:end], score, start, end)
        answers = []
        for i in range(n):
            ranked = sorted(found[i].values(), key=lambda a: -a.score)
            if handle_impossible and ranked:
                ranked = sorted([*ranked, Span("", float(null[i]), 0, 0)], key=lambda a: -a.score)
            answers.append(ranked[:top_k])
        windows = np.bincount(owner, minlength=n).astype(np.int64)
        split.pool += clock() - t0
        return Answered(answers, windows, truncated)

    def _logits(self, tokens: Tokens, batch_size: int | None, bucket: bool,
                split: Split) -> list[np.ndarray]:
        """Every window's logits [tokens, 2], in window order."""
        n = len(tokens.ids)
        if n == 0:
            return []
        clock = time.perf_counter
        order = np.argsort(tokens.lengths, kind="stable") if bucket else np.arange(n)
        size = batch_size or n
        out: list[np.ndarray] = [np.zeros((0, 2), np.float32)] * n
        for i in range(0, n, size):
            t0 = clock()
            rows = order[i:i + size]
            batch = self.pad(tokens, rows)
            t1 = clock()
            output = self.forward(batch)
            t2 = clock()
            for k, row in zip(rows.tolist(), self.pool(output, batch), strict=True):
                out[k] = row
            split.tokenise += t1 - t0
            split.model += t2 - t1
            split.pool += clock() - t2
        return out


def window_spans(encoding, logits: np.ndarray, context_seq: int, cls: int | None,
                 max_answer_length: int, top_k: int) -> tuple[list[tuple[int, int, float]],
                                                               float]:
    """(the ``top_k`` best (start token, end token, score) of one window, best first; the
    null answer's score there) from its logits [tokens, 2]."""
    seq = np.array([-1 if s is None else s for s in encoding.sequence_ids])
    allowed = seq == context_seq
    if cls is not None:  # the pipeline keeps CLS in the softmax (the null answer)
        allowed |= np.asarray(encoding.ids) == cls
    x = np.where(allowed[:, None], logits.astype(np.float64), MASKED)
    p = apply("softmax", x.T)  # [2, tokens]
    null = float(p[0, 0] * p[1, 0])
    context = np.flatnonzero(seq == context_seq)
    if not len(context):
        return [], null
    start, end = p[0, context], p[1, context]
    start = np.where(context == 0, 0.0, start)  # the pipeline zeroes position 0 (CLS)
    end = np.where(context == 0, 0.0, end)
    outer = np.triu(np.tril(np.outer(start, end), max_answer_length - 1))
    width = len(context)
    valid = np.triu(np.tril(np.ones((width, width), dtype=bool), max_answer_length - 1))
    flat = np.flatnonzero(valid.ravel())
    scores = outer.ravel()[flat]
    best = flat[np.argsort(-scores, kind="stable")[:top_k]]
    s, e = np.unravel_index(best, outer.shape)
    return ([(int(context[a]), int(context[b]), float(outer[a, b]))
             for a, b in zip(s.tolist(), e.tolist(), strict=True)], null)
