"""Cross-attention maps of generated texts: for one source text and what a
sequence-to-sequence model generated from it, every decoder layer's and head's attention to the
source as a heat map (one PNG grid, layers x heads; target tokens as rows, source tokens as
columns).

Drawn as :mod:`sparkfield.nlp.attention` draws self-attention: matplotlib's object API on an
Agg canvas of its own, no pyplot state."""

from __future__ import annotations

import io

import numpy as np

from sparkfield.nlp.attention import MAX_TICKED_TOKENS, draw_head


def cross_attention_png(source_tokens: list[str], target_tokens: list[str],
                        weights: np.ndarray, title: str) -> bytes:
    """``weights``: [layers, heads, target tokens, source tokens] (a generated row's
    ``cross_attention``, as nested lists or an array). Token labels are drawn while there are
    at most 16 of them on an axis."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    att = np.asarray(weights, dtype=np.float32)
    if att.ndim != 4 or att.shape[2:] != (len(target_tokens), len(source_tokens)):
        raise ValueError(f"weights of shape {att.shape} do not fit {len(target_tokens)} "
                         f"target and {len(source_tokens)} source tokens")
    layers, heads = att.shape[:2]
    wide = max(len(source_tokens), 1) / max(len(target_tokens), 1)
    fig = Figure(figsize=(1.6 * heads * min(max(wide, 0.5), 3.0) + 1, 1.6 * layers + 1), dpi=90)
    FigureCanvasAgg(fig)
    axes = fig.subplots(layers, heads, squeeze=False)
    src = source_tokens if len(source_tokens) <= MAX_TICKED_TOKENS else None
    tgt = target_tokens if len(target_tokens) <= MAX_TICKED_TOKENS else None
    for li in range(layers):
        for hi in range(heads):
            draw_head(axes[li][hi], att[li, hi], src, tgt, li, hi, layers, aspect="auto")
    fig.suptitle(title[:120], fontsize=9)
    fig.supxlabel("source tokens", fontsize=7)
    fig.supylabel("generated tokens", fontsize=7)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return buf.getvalue()
