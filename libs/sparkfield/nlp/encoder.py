"""The sentence encoder itself (transformers + torch): tokenise with padding/truncation, run,
mean-pool over real tokens, L2-normalise (the all-MiniLM-L6-v2 recipe)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass
class Encoder:
    folder: Path
    device: str = "cpu"
    max_tokens: int = 256
    half: bool = False
    threads: int | None = None
    attention: bool = False  # eager attention, needed to read the attention weights

    def __post_init__(self) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        if self.threads:
            torch.set_num_threads(self.threads)
        self.torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.folder), local_files_only=True)
        kwargs = {"attn_implementation": "eager"} if self.attention else {}
        model = AutoModel.from_pretrained(str(self.folder), local_files_only=True, **kwargs)
        model.eval().to(self.device)
        if self.half and self.device.startswith("cuda"):
            model = model.half()
        self.model = model

    def encode(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(embeddings float32 [n, dim], truncated bool [n])."""
        torch = self.torch
        lengths = [len(ids) for ids in self.tokenizer(texts, truncation=False)["input_ids"]]
        batch = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_tokens,
                               return_tensors="pt").to(self.device)
        with torch.inference_mode():
            hidden = self.model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            pooled = torch.nn.functional.normalize(pooled.float(), p=2, dim=1)
        return pooled.cpu().numpy().astype(np.float32), np.array(
            [n > self.max_tokens for n in lengths], dtype=bool)

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
