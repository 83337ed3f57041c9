"""Maps of a coffee-shop search: one matplotlib figure, saved as a PNG and as the inline SVG
of a self-contained HTML page that opens offline (no tiles, scripts or fonts from the network:
glyphs are drawn as paths)."""

from __future__ import annotations

import html
import io
import re
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def map_figure(
    stations: pd.DataFrame, competitors: pd.DataFrame, density: pd.DataFrame,
    top: pd.DataFrame, cell_m: float, title: str,
) -> Figure:
    """The map. Artists carry SVG ids (``gid``): ``crime-density``, ``competitors``,
    ``station-<i>``, ``top-location-<rank>``; :func:`map_html` turns the last two into classes
    with a tooltip."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 8), dpi=110)
    ax = fig.subplots()
    if not density.empty:
        sc = ax.scatter(density["cx"], density["cy"], c=np.log10(density["n"] + 1), s=4,
                        marker="s", cmap="Reds", alpha=0.6, linewidths=0)
        sc.set_gid("crime-density")
        fig.colorbar(sc, ax=ax, label=f"log10 crimes per {cell_m:g} m cell")
    if not competitors.empty:
        ax.scatter(competitors["x"], competitors["y"], marker="x", c="#006241", s=25,
                   label="competitor").set_gid("competitors")
    labels = {True: "eligible station", False: "station (competitor nearby)"}
    for i, r in enumerate(stations.itertuples(index=False)):
        style = ({"c": "#1f77b4"} if r.eligible
                 else {"facecolors": "none", "edgecolors": "grey"})
        ax.scatter([r.x], [r.y], marker="o", s=60, label=labels.pop(bool(r.eligible), None),
                   **style).set_gid(f"station-{i}")
    for n, r in enumerate(top.itertuples(index=False)):
        ax.scatter([r.x], [r.y], marker="*", c="gold", edgecolors="black", s=180, zorder=5,
                   label="top location" if n == 0 else None).set_gid(f"top-location-{int(r.rank)}")
    ax.set_aspect("equal")
    ax.set_xlabel("x (m, EPSG:26910)")
    ax.set_ylabel("y (m, EPSG:26910)")
    ax.set_title(title)
    ax.legend(loc="lower left", fontsize=8)
    _rank_labels(fig, ax, top)
    return fig


# where a rank label may go, in points from its star: beside it first, then further out
_OFFSETS = [(dx * r, dy * r) for r in (9, 20, 32, 46)
            for dx, dy in ((1, 1), (1, -1), (-1, 1), (-1, -1), (1.4, 0), (-1.4, 0), (0, 1.4),
                           (0, -1.4))]


def _rank_labels(fig: Figure, ax: Axes, top: pd.DataFrame) -> None:
    """Each top location's rank beside its star, placed where it overlaps no other label or
    star (stars of close sites otherwise print their numbers over each other); a label moved
    away from its star gets a leader line."""
    if top.empty:
        return
    import matplotlib.patheffects as pe

    fig.draw_without_rendering()  # the final layout: where each star lands on the page
    to_points = 72.0 / fig.dpi
    stars = ax.transData.transform(top[["x", "y"]].to_numpy(dtype=float)) * to_points
    taken = [(x - 7, y - 7, x + 7, y + 7) for x, y in stars]  # the stars themselves
    for (x, y), r in zip(stars, top.itertuples(index=False), strict=True):
        rank = int(r.rank)
        text = str(rank)
        w, h = 5.0 * len(text) + 2, 10.0
        for dx, dy in _OFFSETS:  # the first free place, else the furthest one
            box = (x + dx - w / 2, y + dy - h / 2, x + dx + w / 2, y + dy + h / 2)
            if not any(_overlap(box, other) for other in taken):
                break
        taken.append(box)
        leader = ({"arrowprops": {"arrowstyle": "-", "color": "black", "lw": 0.6,
                                  "shrinkA": 0, "shrinkB": 4}}
                  if abs(dx) + abs(dy) > 20 else {})
        ax.annotate(text, (r.x, r.y), xytext=(dx, dy), textcoords="offset points",
                    ha="center", va="center", fontsize=8, fontweight="bold", zorder=6,
                    path_effects=[pe.withStroke(linewidth=2.5, foreground="white")],
                    **leader).set_gid(f"rank-label-{rank}")


def _overlap(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def map_png(
    stations: pd.DataFrame, competitors: pd.DataFrame, density: pd.DataFrame,
    top: pd.DataFrame, cell_m: float, title: str,
) -> bytes:
    fig = map_figure(stations, competitors, density, top, cell_m, title)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return buf.getvalue()


def _inline_svg(fig: Figure, tips: dict[str, tuple[str, str]]) -> str:
    """The figure as SVG for inlining in HTML: no XML prolog, DOCTYPE or metadata (the only
    URLs left are namespaces), and the elements named in ``tips`` given a class and a title."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "path", "svg.hashsalt": "sparkfield"}):
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.S)
    svg = svg.replace(' xmlns:xlink="http://www.w3.org/1999/xlink"', "")
    svg = re.sub(r'<svg ([^>]*?)width="[^"]*" height="[^"]*"',
                 r'<svg id="map" style="max-width:100%;height:auto" \1', svg, count=1)

    def tag(m: re.Match[str]) -> str:
        gid = m.group(1)
        if gid not in tips:
            return m.group(0)
        cls, tip = tips[gid]
        return f'<g id="{gid}" class="{cls}"><title>{html.escape(tip)}</title>'

    return re.sub(r'<g id="([^"]+)">', tag, svg)


def map_html(
    stations: pd.DataFrame, competitors: pd.DataFrame, density: pd.DataFrame,
    top: pd.DataFrame, cell_m: float, title: str,
) -> str:
    """The PNG's figure as inline SVG, with tooltips and a table of the top locations."""
    fig = map_figure(stations, competitors, density, top, cell_m, title)
    tips = {f"station-{i}": ("station", f"{r.name}{' (eligible)' if r.eligible else ''}")
            for i, r in enumerate(stations.itertuples(index=False))}
    tips.update({f"top-location-{int(r.rank)}": (
        "top-location", f"#{int(r.rank)} near {r.station}: {r.distance_to_station_m:.1f} m")
        for r in top.itertuples(index=False)})
    svg = _inline_svg(fig, tips)
    rows = "".join(
        f"<tr><td>{int(r.rank)}</td><td>{html.escape(str(r.station))}</td>"
        f"<td>{r.longitude:.6f}</td><td>{r.latitude:.6f}</td>"
        f"<td>{r.distance_to_station_m:.1f}</td></tr>"
        for r in top.itertuples(index=False)
    )
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title>"
        "<style>body{font-family:sans-serif;margin:1em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:2px 8px}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>"
        "<p>The figure of map.png; hover a station or a top location for its name. "
        "Coordinates in EPSG:26910.</p>"
        + svg
        + "<table id='top-table'><tr><th>rank</th><th>station</th><th>longitude</th>"
        "<th>latitude</th><th>distance to station (m)</th></tr>"
        + rows
        + "</table></body></html>"
    )
