"""A Disco-style process map: activities sized by frequency, arcs labelled with frequency and
mean time, thinned to the top-k arcs; DOT text, rendered to SVG by Graphviz ``dot``."""

from __future__ import annotations

import shutil
import subprocess

import pandas as pd

from sparkfield.core.report import RenderUnavailable


class RenderError(RenderUnavailable):
    """Graphviz is missing or failed."""


def duration_label(seconds: float) -> str:
    if pd.isna(seconds):
        return ""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.1f} s"


def dot_string(text: str) -> str:
    """A DOT string: backslashes and quotes escaped, a line break becomes DOT's ``\\n``."""
    text = str(text).replace("\\", "\\\\").replace('"', '\\"')
    return '"' + text.replace("\r\n", "\n").replace("\n", "\\n") + '"'


def to_dot(dfg: pd.DataFrame, acts: pd.DataFrame, starts: pd.DataFrame, ends: pd.DataFrame,
           top_k: int | None = None) -> str:
    """``dfg``: source, target, frequency, mean_s; ``acts``: activity, events; ``starts`` /
    ``ends``: activity, cases."""
    arcs = dfg.sort_values(["frequency", "source", "target"], ascending=[False, True, True])
    if top_k is not None:
        arcs = arcs.head(top_k)
    shown = set(arcs["source"]) | set(arcs["target"])
    if top_k is None or not shown:
        shown |= set(acts["activity"])
    fmax = max(int(acts["events"].max()) if len(acts) else 1, 1)
    amax = max(int(arcs["frequency"].max()) if len(arcs) else 1, 1)
    lines = ["digraph process_map {", '  rankdir=TB; bgcolor="white";',
             '  node [shape=box, style="rounded,filled", fontname="Helvetica"];',
             '  edge [fontname="Helvetica", fontsize=10];',
             '  "__start__" [shape=circle, label="", fillcolor="#2ca02c", width=0.3];',
             '  "__end__" [shape=doublecircle, label="", fillcolor="#d62728", width=0.3];']
    for a in acts.itertuples(index=False):
        if a.activity not in shown:
            continue
        shade = int(235 - 150 * a.events / fmax)
        fill = f"#{shade:02x}{shade:02x}ff"
        label = f"{a.activity}\n{a.events:,}"
        lines.append(f"  {dot_string(a.activity)} [label={dot_string(label)}, "
                     f"fillcolor={dot_string(fill)}];")
    for s in starts.itertuples(index=False):
        if s.activity in shown:
            lines.append(f'  "__start__" -> {dot_string(s.activity)} '
                         f'[label={dot_string(f"{s.cases:,}")}, style=dashed];')
    for e in ends.itertuples(index=False):
        if e.activity in shown:
            lines.append(f'  {dot_string(e.activity)} -> "__end__" '
                         f'[label={dot_string(f"{e.cases:,}")}, style=dashed];')
    for r in arcs.itertuples(index=False):
        width = 0.5 + 4.5 * r.frequency / amax
        label = f"{r.frequency:,}\n{duration_label(r.mean_s)}"
        lines.append(f"  {dot_string(r.source)} -> {dot_string(r.target)} "
                     f"[label={dot_string(label)}, penwidth={width:.2f}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def render_svg(dot_text: str, timeout: int = 120) -> str:
    exe = shutil.which("dot")
    if exe is None:
        raise RenderError("Graphviz 'dot' is not installed (Debian: apt-get install graphviz); "
                          "the .dot file was written, render it with: dot -Tsvg")
    try:
        proc = subprocess.run([exe, "-Tsvg"], input=dot_text.encode("utf-8"),
                              capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RenderError(f"dot did not finish in {timeout} s") from None
    if proc.returncode != 0:
        raise RenderError(f"dot failed: {proc.stderr.decode(errors='replace')[:500]}")
    return proc.stdout.decode("utf-8")



