"""The sentence encoders: tokenise with truncation, pad each batch to its longest text, run the
model, mean-pool over real tokens, L2-normalise (the all-MiniLM-L6-v2 recipe). Two backends
share the tokenising and batching: torch (transformers) and ONNX Runtime."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass
class Tokens:
    """Token ids of some texts, truncated to ``max_tokens``, unpadded."""

    ids: list[list[int]]
    type_ids: list[list[int]] | None
    truncated: np.ndarray  # bool [n]

    @property
    def lengths(self) -> np.ndarray:
        return np.fromiter((len(i) for i in self.ids), dtype=np.int64, count=len(self.ids))


class BaseEncoder:
    """Tokenising, padding and batching; a backend implements :meth:`run`."""

    folder: Path
    max_tokens: int
    tokenizer: object

    def _load_tokenizer(self) -> None:
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(str(self.folder), local_files_only=True)
        self.pad_id = self.tokenizer.pad_token_id or 0
        self.wants_type_ids = "token_type_ids" in self.tokenizer.model_input_names

    def tokenize(self, texts: list[str]) -> Tokens:
        """One pass at ``max_tokens + 1`` tells which texts are longer than ``max_tokens``;
        only those are tokenised again at ``max_tokens``."""
        tok = self.tokenizer
        kw = {"return_attention_mask": False, "return_token_type_ids": self.wants_type_ids}
        enc = tok(texts, truncation=True, max_length=self.max_tokens + 1, **kw)
        ids = enc["input_ids"]
        types = enc.get("token_type_ids") if self.wants_type_ids else None
        truncated = np.fromiter((len(i) > self.max_tokens for i in ids), dtype=bool,
                                count=len(ids))
        long = np.flatnonzero(truncated).tolist()
        if long:
            again = tok([texts[i] for i in long], truncation=True, max_length=self.max_tokens,
                        **kw)
            for j, i in enumerate(long):
                ids[i] = again["input_ids"][j]
                if types is not None:
                    types[i] = again["token_type_ids"][j]
        return Tokens(ids, types, truncated)

    def pad(self, tokens: Tokens, rows: np.ndarray | list[int]) -> dict[str, np.ndarray]:
        """int64 input_ids, attention_mask (and token_type_ids) of ``rows``, padded to the
        longest of them."""
        width = max(len(tokens.ids[i]) for i in rows)
        n = len(rows)
        ids = np.full((n, width), self.pad_id, dtype=np.int64)
        mask = np.zeros((n, width), dtype=np.int64)
        types = np.zeros((n, width), dtype=np.int64) if self.wants_type_ids else None
        for r, i in enumerate(rows):
            k = len(tokens.ids[i])
            ids[r, :k] = tokens.ids[i]
            mask[r, :k] = 1
            if types is not None and tokens.type_ids is not None:
                types[r, :k] = tokens.type_ids[i]
        batch = {"input_ids": ids, "attention_mask": mask}
        if types is not None:
            batch["token_type_ids"] = types
        return batch

    def run(self, batch: dict[str, np.ndarray]) -> np.ndarray:
        """Normalised sentence embeddings float32 [n, dim] of one padded batch."""
        raise NotImplementedError

    def encode(self, texts: list[str], batch_size: int | None = None,
               bucket: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(embeddings float32 [n, dim], truncated bool [n]) in the order of ``texts``.

        ``bucket``: batch the texts in order of token length (less padding); the result is
        put back in input order. ``batch_size`` None: one batch."""
        tokens = self.tokenize(texts)
        n = len(texts)
        if n == 0:
            return np.zeros((0, 0), dtype=np.float32), tokens.truncated
        order = np.argsort(tokens.lengths, kind="stable") if bucket else np.arange(n)
        size = batch_size or n
        parts = [self.run(self.pad(tokens, order[i:i + size])) for i in range(0, n, size)]
        emb = np.concatenate(parts).astype(np.float32, copy=False)
        out = np.empty_like(emb)
        out[order] = emb
        return out, tokens.truncated


@dataclass
class Encoder(BaseEncoder):
    """transformers + torch."""

    folder: Path
    device: str = "cpu"
    max_tokens: int = 256
    half: bool = False
    threads: int | None = None
    attention: bool = False  # eager attention, needed to read the attention weights

    def __post_init__(self) -> None:
        import torch
        from transformers import AutoModel

        if self.threads:
            torch.set_num_threads(self.threads)
        self.torch = torch
        self._load_tokenizer()
        kwargs = {"attn_implementation": "eager"} if self.attention else {}
        model = AutoModel.from_pretrained(str(self.folder), local_files_only=True, **kwargs)
        model.eval().to(self.device)
        if self.half and self.device.startswith("cuda"):
            model = model.half()
        self.model = model

    def run(self, batch: dict[str, np.ndarray]) -> np.ndarray:
        torch = self.torch
        inputs = {k: torch.from_numpy(v).to(self.device) for k, v in batch.items()}
        with torch.inference_mode():
            hidden = self.model(**inputs).last_hidden_state
            mask = inputs["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            pooled = torch.nn.functional.normalize(pooled.float(), p=2, dim=1)
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
