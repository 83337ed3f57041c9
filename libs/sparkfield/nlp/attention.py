"""Attention maps: for a handful of sentences, every layer's and head's attention weights as
heat maps (one PNG grid per sentence, tokens on both axes).

Drawn through matplotlib's object API on an Agg canvas of its own: no global backend switch
and no pyplot state, so rendering in a driver thread leaves the caller's matplotlib alone."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from matplotlib.axes import Axes

MAX_TICKED_TOKENS = 16  # longer sentences get no token labels (they would overlap)


def attention_grid_png(tokens: list[str], att: np.ndarray, title: str) -> bytes:
    """``att``: [layers, heads, tokens, tokens] (rows: query token, columns: key token)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    layers, heads = att.shape[:2]
    fig = Figure(figsize=(1.6 * heads + 1, 1.6 * layers + 1), dpi=90)
    FigureCanvasAgg(fig)
    axes = fig.subplots(layers, heads, squeeze=False)
    labelled = tokens if len(tokens) <= MAX_TICKED_TOKENS else None
    for li in range(layers):
        for hi in range(heads):
            draw_head(axes[li][hi], att[li, hi], labelled, labelled, li, hi, layers)
    fig.suptitle(title[:120], fontsize=9)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return buf.getvalue()


def draw_head(ax: Axes, weights: np.ndarray, columns: list[str] | None,
              rows: list[str] | None, layer: int, head: int, layers: int,
              aspect: str = "equal") -> None:
    """One head's map (rows: the attending tokens, columns: the tokens attended to); token
    labels (where given) on the bottom row and the left column only, head titles on the top
    row, layer labels on the left column."""
    ax.imshow(weights, vmin=0.0, vmax=1.0, cmap="viridis", aspect=aspect)
    bottom, left = layer == layers - 1, head == 0
    ax.set_xticks(range(len(columns)) if columns and bottom else [])
    ax.set_yticks(range(len(rows)) if rows and left else [])
    if columns and bottom:
        ax.set_xticklabels(columns, rotation=90, fontsize=5)
    if rows and left:
        ax.set_yticklabels(rows, fontsize=5)
    if layer == 0:
        ax.set_title(f"head {head + 1}", fontsize=7)
    if left:
        ax.set_ylabel(f"layer {layer + 1}", fontsize=7)
