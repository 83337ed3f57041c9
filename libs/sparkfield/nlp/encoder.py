"""The sentence encoders: tokenise with truncation, pad each batch to its longest text, run the
model, mean-pool over real tokens, L2-normalise (the all-MiniLM-L6-v2 recipe). Two backends
share the tokenising and batching: torch (transformers) and ONNX Runtime.

:meth:`BaseEncoder.encode` times its parts into a :class:`Split`, so a run can tell the model's
time from everything around it."""

from __future__ import annotations

import time
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from sparkfield.core.errors import ConfigError
from sparkfield.nlp.device import native_bf16
from sparkfield.nlp.model import ModelError, check_max_tokens, model_window

PRECISIONS = ("fp32", "fp16", "bf16")


@dataclass
class Split:
    """Seconds spent on each part of embedding, summed over batches.

    ``tokenise``: the tokenizer and the padded id arrays; ``model``: the model's forward pass
    (the ONNX export pools and normalises inside its graph, so there that is model time too);
    ``pool``: mean pooling, normalisation and putting rows back in input order outside the
    model. The Spark column adds what a worker does around the encoder: ``load`` (building
    the encoder, once per Python worker), ``arrow_in`` (waiting for an Arrow batch and reading
    its texts) and ``arrow_out`` (building the result batch and handing it back)."""

    load: float = 0.0
    arrow_in: float = 0.0
    tokenise: float = 0.0
    model: float = 0.0
    pool: float = 0.0
    arrow_out: float = 0.0

    @classmethod
    def parts(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    def values(self) -> list[float]:
        return [getattr(self, name) for name in self.parts()]


def _truncating(backend, longest: int, strategy: str = "longest_first"):
    """A copy of a ``tokenizers.Tokenizer`` that truncates to ``longest`` tokens (a text pair
    by ``strategy``) and pads nothing (the batches are padded to their longest text later)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(backend.to_str())
    tok.no_padding()
    tok.enable_truncation(longest, strategy=strategy)
    return tok


# how a text pair is cut to fit: longest_first (the longer text first, the tokenizers'
# default), or only_first (the first text only: a short second text, such as a zero-shot
# hypothesis, is kept whole)
TRUNCATIONS = ("longest_first", "only_first")


@dataclass
class Tokens:
    """Token ids of some texts, truncated to ``max_tokens``, unpadded."""

    ids: list[list[int]]
    type_ids: list[list[int]] | None
    truncated: np.ndarray  # bool [n]
    encodings: list | None = None  # the tokenizer's encodings (offsets), where asked for

    @property
    def lengths(self) -> np.ndarray:
        return np.fromiter((len(i) for i in self.ids), dtype=np.int64, count=len(self.ids))


class BaseEncoder:
    """Tokenising, padding and batching; a backend implements :meth:`forward` and
    :meth:`pool`."""

    folder: Path
    max_tokens: int | None
    tokenizer: object

    def _load_tokenizer(self) -> None:
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(str(self.folder), local_files_only=True)
        if self.max_tokens is None:
            self.max_tokens = model_window(self.folder, self.tokenizer)
        check_max_tokens(self.folder, self.max_tokens)
        self.pad_id = self.tokenizer.pad_token_id or 0
        self.wants_type_ids = "token_type_ids" in self.tokenizer.model_input_names
        # the fast tokenizer's own Rust tokenizer, called on whole lists (no Python objects
        # per token beyond the ids): one truncating at max_tokens + 1, one at max_tokens
        backend = getattr(self.tokenizer, "backend_tokenizer", None)
        self._cutters = None
        self._pair_cutters: dict[str, tuple] = {}  # other truncations, built on first use
        if backend is not None:
            self._cutters = tuple(_truncating(backend, n)
                                  for n in (self.max_tokens + 1, self.max_tokens))

    offsets = False  # whether :meth:`tokenize` keeps the encodings (character offsets)

    def _cutter(self, longest: int, truncation: str):
        """The Rust tokenizer cutting at ``longest`` (``max_tokens`` or one more) by
        ``truncation`` (:data:`TRUNCATIONS`)."""
        at = 0 if longest > self.max_tokens else 1
        if truncation == "longest_first":
            return self._cutters[at]
        if truncation not in TRUNCATIONS:
            raise ConfigError(f"truncation must be one of {', '.join(TRUNCATIONS)}, "
                              f"got {truncation!r}")
        if truncation not in self._pair_cutters:
            backend = self.tokenizer.backend_tokenizer
            self._pair_cutters[truncation] = tuple(
                _truncating(backend, n, truncation) for n in (self.max_tokens + 1, self.max_tokens))
        return self._pair_cutters[truncation][at]

    def _token_ids(self, texts: list[str], longest: int, pairs: list[str] | None = None,
                   truncation: str = "longest_first"
                   ) -> tuple[list, list | None, list | None]:
        """Token ids (and token type ids, where the model takes them) of ``texts`` (with their
        ``pairs``: second texts, cut by ``truncation``), truncated to ``longest``
        (``max_tokens`` or one more), and the encodings when :attr:`offsets` asks for them."""
        inputs = texts if pairs is None else list(zip(texts, pairs, strict=True))
        if self._cutters is not None:
            cutter = self._cutter(longest, truncation)
            encode = cutter.encode_batch if self.offsets else getattr(
                cutter, "encode_batch_fast", cutter.encode_batch)  # fast: no offsets
            encodings = encode(inputs)
            types = [e.type_ids for e in encodings] if self.wants_type_ids else None
            return [e.ids for e in encodings], types, encodings if self.offsets else None
        if self.offsets:
            raise ModelError(f"{self.folder}: character offsets need a fast tokenizer "
                             "(a tokenizer.json)")
        enc = self.tokenizer(texts, pairs, truncation=truncation, max_length=longest,
                             return_attention_mask=False,
                             return_token_type_ids=self.wants_type_ids)
        types = enc.get("token_type_ids") if self.wants_type_ids else None
        return enc["input_ids"], types, None

    def tokenize(self, texts: list[str], pairs: list[str] | None = None,
                 truncation: str = "longest_first") -> Tokens:
        """One pass at ``max_tokens + 1`` tells which texts are longer than ``max_tokens``;
        only those are tokenised again at ``max_tokens`` (a pair cut by ``truncation``)."""
        ids, types, encodings = self._token_ids(texts, self.max_tokens + 1, pairs, truncation)
        truncated = np.fromiter((len(i) > self.max_tokens for i in ids), dtype=bool,
                                count=len(ids))
        long = np.flatnonzero(truncated).tolist()
        if long:
            again, again_types, again_enc = self._token_ids(
                [texts[i] for i in long], self.max_tokens,
                None if pairs is None else [pairs[i] for i in long], truncation)
            for j, i in enumerate(long):
                ids[i] = again[j]
                if types is not None and again_types is not None:
                    types[i] = again_types[j]
                if encodings is not None and again_enc is not None:
                    encodings[i] = again_enc[j]
        return Tokens(ids, types, truncated, encodings)

    def pad(self, tokens: Tokens, rows: np.ndarray | list[int]) -> dict[str, np.ndarray]:
        """int64 input_ids, attention_mask (and token_type_ids) of ``rows``, padded to the
        longest of them."""
        lengths = np.fromiter((len(tokens.ids[i]) for i in rows), dtype=np.int64,
                              count=len(rows))
        mask = np.arange(lengths.max(initial=0)) < lengths[:, None]
        ids = np.full(mask.shape, self.pad_id, dtype=np.int64)
        ids[mask] = np.concatenate([tokens.ids[i] for i in rows])  # row-major: row by row
        batch = {"input_ids": ids, "attention_mask": mask.astype(np.int64)}
        if self.wants_type_ids:
            types = np.zeros(mask.shape, dtype=np.int64)
            if tokens.type_ids is not None:
                types[mask] = np.concatenate([tokens.type_ids[i] for i in rows])
            batch["token_type_ids"] = types
        return batch

    def forward(self, batch: dict[str, np.ndarray]):
        """The model's output for one padded batch (what :meth:`pool` takes)."""
        raise NotImplementedError

    def pool(self, output, batch: dict[str, np.ndarray]) -> np.ndarray:
        """Normalised sentence embeddings float32 [n, dim] from :meth:`forward`'s output."""
        raise NotImplementedError

    def run(self, batch: dict[str, np.ndarray]) -> np.ndarray:
        """Normalised sentence embeddings float32 [n, dim] of one padded batch."""
        return self.pool(self.forward(batch), batch)

    def encode(self, texts: list[str], batch_size: int | None = None, bucket: bool = False,
               split: Split | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(embeddings float32 [n, dim], truncated bool [n]) in the order of ``texts``.

        ``bucket``: batch the texts in order of token length (less padding); the result is
        put back in input order. ``batch_size`` None: one batch. ``split``: where the time
        went is added to it."""
        tokens, out = self.infer(texts, None, batch_size, bucket, split)
        return out.astype(np.float32, copy=False), tokens.truncated

    def infer(self, texts: list[str], pairs: list[str] | None = None,
              batch_size: int | None = None, bucket: bool = False,
              split: Split | None = None,
              truncation: str = "longest_first") -> tuple[Tokens, np.ndarray]:
        """(the tokens, :meth:`pool`'s rows in the order of ``texts``): what :meth:`encode`
        returns, for any head. ``pairs``: a second text per text, a pair cut to fit by
        ``truncation`` (:data:`TRUNCATIONS`)."""
        split = split if split is not None else Split()
        clock = time.perf_counter
        t0 = clock()
        tokens = self.tokenize(texts, pairs, truncation)
        n = len(texts)
        split.tokenise += clock() - t0
        if n == 0:
            return tokens, np.zeros((0, 0), dtype=np.float32)
        order = np.argsort(tokens.lengths, kind="stable") if bucket else np.arange(n)
        size = batch_size or n
        parts = []
        for i in range(0, n, size):
            t0 = clock()
            batch = self.pad(tokens, order[i:i + size])
            t1 = clock()
            output = self.forward(batch)
            t2 = clock()
            parts.append(self.pool(output, batch))
            t3 = clock()
            split.tokenise += t1 - t0
            split.model += t2 - t1
            split.pool += t3 - t2
        t0 = clock()
        out = self.reorder(parts, order)
        split.pool += clock() - t0
        return tokens, out

    def reorder(self, parts: list, order: np.ndarray) -> np.ndarray:
        """:meth:`pool`'s batches as one array in input order (``order[k]``: the input row of
        the k-th pooled row)."""
        rows = np.concatenate(parts)
        out = np.empty_like(rows)
        out[order] = rows
        return out


def run_precision(precision: str, device: str) -> str:
    """The precision a model asked to run in ``precision`` runs in on ``device``: as asked on a
    GPU; on a CPU bf16 where the CPU multiplies bfloat16 natively
    (:func:`sparkfield.nlp.device.native_bf16`), float32 otherwise (emulated bfloat16 and
    float16 run slower than float32 there)."""
    if precision == "fp32" or device.startswith("cuda"):
        return precision
    return "bf16" if precision == "bf16" and native_bf16() else "fp32"


@dataclass
class Encoder(BaseEncoder):
    """transformers + torch."""

    folder: Path
    device: str = "cpu"
    max_tokens: int | None = 256  # None: the model's window
    half: bool = False  # float16 on a GPU (precision fp16)
    threads: int | None = None
    attention: bool = False  # eager attention, needed to read the attention weights
    precision: str = "fp32"  # fp32, fp16 or bf16 (bf16 on a CPU: where it is native)

    auto_model = "AutoModel"  # the transformers class that loads the model

    def __post_init__(self) -> None:
        import torch
        import transformers

        if self.precision not in PRECISIONS:
            raise ConfigError(f"precision must be one of {', '.join(PRECISIONS)}, "
                              f"got {self.precision!r}")
        if self.threads:
            torch.set_num_threads(self.threads)
        self.torch = torch
        self._load_tokenizer()
        kwargs = {"attn_implementation": "eager"} if self.attention else {}
        model = getattr(transformers, self.auto_model).from_pretrained(
            str(self.folder), local_files_only=True, **kwargs)
        model.eval().to(self.device)
        self.runs = run_precision("fp16" if self.half else self.precision, self.device)
        if self.runs != "fp32":
            model = model.to(torch.float16 if self.runs == "fp16" else torch.bfloat16)
        self.model = model

    def forward(self, batch: dict[str, np.ndarray]):
        """(last hidden state, attention mask) as tensors on the model's device."""
        torch = self.torch
        inputs = {k: torch.from_numpy(v).to(self.device) for k, v in batch.items()}
        with torch.inference_mode():
            hidden = self.model(**inputs).last_hidden_state
        if self.device.startswith("cuda"):  # the model's time, not the pooling's
            torch.cuda.synchronize(self.device)
        return hidden, inputs["attention_mask"]

    def pool(self, output, batch: dict[str, np.ndarray]) -> np.ndarray:
        torch = self.torch
        hidden, attention = output
        with torch.inference_mode():  # pooled in float32 after a half-precision model too
            hidden = hidden.float()
            mask = attention.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
        return pooled.cpu().numpy()

    def attentions(self, text: str) -> tuple[list[str], np.ndarray]:
        """Tokens and attention weights [layers, heads, tokens, tokens] for one text."""
        torch = self.torch
        batch = self.tokenizer([text], truncation=True, max_length=self.max_tokens,
                               return_tensors="pt").to(self.device)
        with torch.inference_mode():
            out = self.model(**batch, output_attentions=True)
        att = torch.stack([a[0] for a in out.attentions]).float().cpu().numpy()
        tokens = self.tokenizer.convert_ids_to_tokens(batch["input_ids"][0].tolist())
        return tokens, att
