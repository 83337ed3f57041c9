"""An object-centric process map: the activities once, the directly-follows arcs of every
object type's flattened log drawn in the type's colour (DOT text; rendered by
``process_map.render_svg``)."""

from __future__ import annotations

import pandas as pd

from sparkfield.process.analysis.process_map import dot_string, duration_label

PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf"]


def to_dot(dfgs: dict[str, pd.DataFrame], activities: pd.DataFrame,
           top_k: int | None = None) -> str:
    """``dfgs``: object type -> its DFG (source, target, frequency, mean_s); ``activities``:
    activity, events (over the whole log). ``top_k`` arcs are kept per object type."""
    colours = {t: PALETTE[i % len(PALETTE)] for i, t in enumerate(dfgs)}
    kept = {}
    for t, dfg in dfgs.items():
        arcs = dfg.sort_values(["frequency", "source", "target"], ascending=[False, True, True])
        kept[t] = arcs.head(top_k) if top_k is not None else arcs
    shown = {a for arcs in kept.values() for a in (*arcs["source"], *arcs["target"])}
    if top_k is None or not shown:
        shown |= set(activities["activity"])
    fmax = max(int(activities["events"].max()) if len(activities) else 1, 1)
    amax = max([int(a["frequency"].max()) for a in kept.values() if len(a)] or [1])
    lines = ["digraph object_centric_map {", '  rankdir=TB; bgcolor="white";',
             '  node [shape=box, style="rounded,filled", fontname="Helvetica"];',
             '  edge [fontname="Helvetica", fontsize=10];',
             '  subgraph cluster_legend { label="object types"; fontname="Helvetica";']
    for t, c in colours.items():
        lines.append(f"    {dot_string('__type_' + t)} [label={dot_string(t)}, shape=plaintext, "
                     f"fillcolor=white, fontcolor={dot_string(c)}];")
    lines.append("  }")
    for a in activities.itertuples(index=False):
        if a.activity not in shown:
            continue
        shade = int(235 - 150 * a.events / fmax)
        label = f"{a.activity}\n{a.events:,}"
        lines.append(f"  {dot_string(a.activity)} [label={dot_string(label)}, "
                     f"fillcolor={dot_string(f'#{shade:02x}{shade:02x}ff')}];")
    for t, arcs in kept.items():
        for r in arcs.itertuples(index=False):
            width = 0.5 + 4.5 * r.frequency / amax
            label = f"{t}: {r.frequency:,}\n{duration_label(r.mean_s)}"
            lines.append(f"  {dot_string(r.source)} -> {dot_string(r.target)} "
                         f"[label={dot_string(label)}, "
                         f"color={dot_string(colours[t])}, fontcolor={dot_string(colours[t])}, "
                         f"penwidth={width:.2f}];")
    lines.append("}")
    return "\n".join(lines) + "\n"
