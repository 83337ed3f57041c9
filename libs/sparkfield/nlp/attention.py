"""Attention maps: for a handful of sentences, every layer's and head's attention weights as
heat maps (one PNG grid per sentence, tokens on both axes)."""

from __future__ import annotations

import io

import numpy as np


def attention_grid_png(tokens: list[str], att: np.ndarray, title: str) -> bytes:
    """``att``: [layers, heads, tokens, tokens] (rows: query token, columns: key token)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layers, heads = att.shape[:2]
    fig, axes = plt.subplots(layers, heads, figsize=(1.6 * heads + 1, 1.6 * layers + 1),
                             dpi=90, squeeze=False)
    small = len(tokens) <= 16
    for li in range(layers):
        for hi in range(heads):
            ax = axes[li][hi]
            ax.imshow(att[li, hi], vmin=0.0, vmax=1.0, cmap="viridis")
            ax.set_xticks(range(len(tokens)) if small and li == layers - 1 else [])
            ax.set_yticks(range(len(tokens)) if small and hi == 0 else [])
            if small and li == layers - 1:
                ax.set_xticklabels(tokens, rotation=90, fontsize=5)
            if small and hi == 0:
                ax.set_yticklabels(tokens, fontsize=5)
            if li == 0:
                ax.set_title(f"head {hi + 1}", fontsize=7)
            if hi == 0:
                ax.set_ylabel(f"layer {li + 1}", fontsize=7)
    fig.suptitle(title[:120], fontsize=9)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()
