"""Sequence-to-sequence generation (translation, summarisation) on the sentence encoders'
engine: a local ``*ForConditionalGeneration`` / ``MarianMTModel`` folder loaded with
``AutoModelForSeq2SeqLM``, the source texts tokenised with truncation, length-bucketed and
batched as the embeddings are (:class:`~sparkfield.nlp.encoder.Encoder`), then
``model.generate`` per batch and the outputs decoded as ``tokenizer.batch_decode`` gives them.

:meth:`Seq2SeqGenerator.cross_attention` reads, for texts and what was generated from them,
the attention each decoder head paid to the source while producing each target token (one
teacher-forced forward pass). No pyspark here: the Spark stage
(:mod:`sparkfield.nlp.generation`) runs this same code."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sparkfield.core.errors import ConfigError
from sparkfield.nlp.encoder import Encoder, Split, Tokens
from sparkfield.nlp.model import ModelError, model_config

# why a generated text stopped: the model ended it, or it reached max_new_tokens (also where
# the model's generation config forces an eos at that limit)
EOS, MAX_NEW_TOKENS = "eos", "max_new_tokens"


def check_seq2seq(folder: Path) -> None:
    """A :class:`ModelError` unless the folder's config is an encoder-decoder model's."""
    cfg = model_config(folder)
    if not cfg.get("is_encoder_decoder"):
        archs = ", ".join(cfg.get("architectures") or []) or cfg.get("model_type", "?")
        raise ModelError(f"{folder}: not a sequence-to-sequence model ({archs}): give a "
                         "*ForConditionalGeneration or MarianMTModel folder")


@dataclass(frozen=True)
class Options:
    """What ``model.generate`` is given besides the source tokens."""

    num_beams: int = 1
    max_new_tokens: int = 128
    length_penalty: float = 1.0
    no_repeat_ngram_size: int = 0

    def __post_init__(self) -> None:
        for name, low in (("num_beams", 1), ("max_new_tokens", 1), ("no_repeat_ngram_size", 0)):
            value = getattr(self, name)
            if not isinstance(value, int) or value < low:
                raise ConfigError(f"{name} must be an integer >= {low}, got {value!r}")

    def kwargs(self) -> dict[str, object]:
        return {"num_beams": self.num_beams, "max_new_tokens": self.max_new_tokens,
                "length_penalty": self.length_penalty, "do_sample": False,
                "no_repeat_ngram_size": self.no_repeat_ngram_size}


@dataclass
class Generated:
    """Generated texts, in the order of their sources."""

    texts: list[str]
    ids: list[list[int]]  # the generated token ids: after the decoder start, up to the eos
    stopped: list[str]  # eos or max_new_tokens (:data:`EOS`, :data:`MAX_NEW_TOKENS`)
    tokens: Tokens = field(repr=False)  # the sources' tokens (truncated: tokens.truncated)

    @property
    def counts(self) -> np.ndarray:
        """Generated tokens per text (the eos included)."""
        return np.fromiter((len(i) for i in self.ids), dtype=np.int64, count=len(self.ids))


@dataclass
class CrossAttention:
    """Where one generated text looked in its source."""

    source_tokens: list[str]
    target_tokens: list[str]  # the generated tokens; row k: the step that produced token k
    weights: np.ndarray  # float32 [layers, heads, target tokens, source tokens]


@dataclass
class Seq2SeqGenerator(Encoder):
    """An encoder-decoder model: source texts -> generated texts. Generation options are
    arguments of :meth:`generate`, not of the model a worker keeps."""

    auto_model = "AutoModelForSeq2SeqLM"

    def __post_init__(self) -> None:
        check_seq2seq(Path(self.folder))
        super().__post_init__()
        eos = self.model.generation_config.eos_token_id
        if eos is None:
            eos = self.tokenizer.eos_token_id
        self.eos_ids = frozenset([eos] if isinstance(eos, int) else list(eos or []))
        # the token generate starts the decoder with: its generation config's first
        start = self.model.generation_config.decoder_start_token_id
        if start is None:
            start = getattr(self.model.config, "decoder_start_token_id", None)
        self.start_id = int(self.pad_id if start is None else start)
        self._options = Options()

    # --- generation ------------------------------------------------------------------------

    def forward(self, batch: dict[str, np.ndarray]) -> np.ndarray:
        """``model.generate``'s sequences int64 [n, steps] (the decoder start first)."""
        torch = self.torch
        inputs = {k: torch.from_numpy(v).to(self.device) for k, v in batch.items()
                  if k in ("input_ids", "attention_mask")}
        with torch.inference_mode():
            out = self.model.generate(**inputs, **self._options.kwargs())
        return out.cpu().numpy()

    def pool(self, output: np.ndarray, batch: dict[str, np.ndarray]) -> list[tuple]:
        """(text, generated ids, stopped) per row: decoded with the special tokens skipped;
        the ids end at the first eos (the padding after it is not generated)."""
        texts = self.tokenizer.batch_decode(output, skip_special_tokens=True)
        limit = self._options.max_new_tokens
        rows = []
        for text, seq in zip(texts, output[:, 1:].tolist(), strict=True):
            end = next((k for k, t in enumerate(seq) if t in self.eos_ids), None)
            ids = seq if end is None else seq[:end + 1]
            rows.append((text, ids, MAX_NEW_TOKENS if len(ids) >= limit else EOS))
        return rows

    def reorder(self, parts: list, order: np.ndarray) -> list:
        rows = [row for part in parts for row in part]
        out: list = [None] * len(rows)
        for k, i in enumerate(order.tolist()):
            out[i] = rows[k]
        return out

    def generate(self, texts: list[str], batch_size: int | None = None, bucket: bool = False,
                 split: Split | None = None, num_beams: int = 1, max_new_tokens: int = 128,
                 prefix: str = "", length_penalty: float = 1.0,
                 no_repeat_ngram_size: int = 0) -> Generated:
        """Generated texts and token ids of ``prefix + text`` for each text, in input order.

        Each source is truncated to ``max_tokens`` (``prefix`` included); batches are padded
        to their longest source, ordered by length where ``bucket``. ``split`` gets the time:
        tokenise, model (``generate``), pool (decoding)."""
        self._options = Options(num_beams, max_new_tokens, float(length_penalty),
                                no_repeat_ngram_size)
        tokens, rows = self.infer([prefix + t for t in texts], None, batch_size, bucket, split)
        rows = list(rows) if len(texts) else []
        return Generated([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows],
                         tokens)

    # --- cross-attention -------------------------------------------------------------------

    def decoder_inputs(self, target: list[int]) -> list[int]:
        """What the decoder reads while producing ``target``: the start token, then each
        target token but the last (teacher forcing)."""
        return [self.start_id, *target[:-1]]

    def cross_attention(self, texts: list[str], targets: list[list[int]],
                        batch_size: int | None = None, prefix: str = "",
                        split: Split | None = None) -> list[CrossAttention]:
        """Per text, the attention every decoder layer's heads paid to the source tokens of
        ``prefix + text`` while producing each token of ``targets`` (generated ids, as
        :meth:`generate` returns them): one forward pass per batch, with the decoder reading
        the targets (eager attention; the source truncated as :meth:`generate` truncates)."""
        split = split if split is not None else Split()
        clock = time.perf_counter
        t0 = clock()
        tokens = self.tokenize([prefix + t for t in texts])
        split.tokenise += clock() - t0
        size = batch_size or max(len(texts), 1)
        out: list[CrossAttention] = []
        for i in range(0, len(texts), size):
            rows = list(range(i, min(i + size, len(texts))))
            t0 = clock()
            batch = self.pad(tokens, rows)
            decoder = Tokens([self.decoder_inputs(targets[r]) for r in rows], None,
                             np.zeros(len(rows), dtype=bool))
            dec = self.pad(decoder, list(range(len(rows))))
            t1 = clock()
            weights = self._cross_weights(batch, dec)
            t2 = clock()
            for k, r in enumerate(rows):
                src, tgt = len(tokens.ids[r]), len(targets[r])
                out.append(CrossAttention(
                    self.tokenizer.convert_ids_to_tokens(tokens.ids[r]),
                    self.tokenizer.convert_ids_to_tokens(targets[r]),
                    np.ascontiguousarray(weights[:, k, :, :tgt, :src])))
            split.tokenise += t1 - t0
            split.model += t2 - t1
            split.pool += clock() - t2
        return out

    def _cross_weights(self, batch: dict[str, np.ndarray],
                       decoder: dict[str, np.ndarray]) -> np.ndarray:
        """float32 [layers, n, heads, target, source] of one padded batch."""
        torch = self.torch
        inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"],
                  "decoder_input_ids": decoder["input_ids"],
                  "decoder_attention_mask": decoder["attention_mask"]}
        inputs = {k: torch.from_numpy(v).to(self.device) for k, v in inputs.items()}
        found = _attending(self.model, inputs)
        if not found:  # a transformers release that cannot switch this model's kernels
            found = _attending(self._eager_copy(), inputs)
        return torch.stack(found).float().cpu().numpy()

    def _eager_copy(self):
        """The model loaded again with eager attention (once)."""
        if getattr(self, "_eager", None) is None:
            model = type(self.model).from_pretrained(str(self.folder), local_files_only=True,
                                                     attn_implementation="eager")
            self._eager = model.eval().to(device=self.device, dtype=self.model.dtype)
        return self._eager


def _attending(model, inputs: dict) -> tuple:
    """The cross-attention weights of one forward pass (a tensor per layer), the model
    switched to eager attention for it (the kernels that return the weights) and back."""
    import torch

    before = model.config._attn_implementation
    if before != "eager":
        model.set_attn_implementation("eager")
    try:
        with torch.inference_mode():
            return tuple(model(**inputs, output_attentions=True).cross_attentions or ())
    finally:
        if before != "eager":
            model.set_attn_implementation(before)
