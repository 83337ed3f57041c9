"""Maps of a coffee-shop search: a PNG (matplotlib) and a self-contained HTML/SVG page that
opens offline (no tiles, scripts or fonts from the network)."""

from __future__ import annotations

import html
import io

import numpy as np
import pandas as pd


def map_png(
    stations: pd.DataFrame, competitors: pd.DataFrame, density: pd.DataFrame,
    top: pd.DataFrame, cell_m: float, title: str,
) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 8), dpi=110)
    if not density.empty:
        sc = ax.scatter(density["cx"], density["cy"], c=np.log10(density["n"] + 1), s=4,
                        marker="s", cmap="Reds", alpha=0.6, linewidths=0)
        fig.colorbar(sc, ax=ax, label=f"log10 crimes per {cell_m:g} m cell")
    if not competitors.empty:
        ax.scatter(competitors["x"], competitors["y"], marker="x", c="#006241", s=25,
                   label="competitor")
    elig = stations[stations["eligible"]]
    inel = stations[~stations["eligible"]]
    ax.scatter(inel["x"], inel["y"], marker="o", facecolors="none", edgecolors="grey", s=60,
               label="station (competitor nearby)")
    ax.scatter(elig["x"], elig["y"], marker="o", c="#1f77b4", s=60, label="eligible station")
    if not top.empty:
        ax.scatter(top["x"], top["y"], marker="*", c="gold", edgecolors="black", s=180,
                   label="top location", zorder=5)
        for _, r in top.iterrows():
            ax.annotate(str(int(r["rank"])), (r["x"], r["y"]), xytext=(4, 4),
                        textcoords="offset points", fontsize=8)
    ax.set_aspect("equal")
    ax.set_xlabel("x (m, EPSG:26910)")
    ax.set_ylabel("y (m, EPSG:26910)")
    ax.set_title(title)
    ax.legend(loc="lower left", fontsize=8)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def map_html(
    stations: pd.DataFrame, competitors: pd.DataFrame, density: pd.DataFrame,
    top: pd.DataFrame, cell_m: float, title: str,
) -> str:
    """An inline-SVG map in metres (y up) with a table of the top locations."""
    xs = [stations["x"], competitors["x"], top["x"] if not top.empty else pd.Series(dtype=float)]
    ys = [stations["y"], competitors["y"], top["y"] if not top.empty else pd.Series(dtype=float)]
    allx = pd.concat(xs).dropna()
    ally = pd.concat(ys).dropna()
    if allx.empty:
        allx, ally = pd.Series([0.0, 1.0]), pd.Series([0.0, 1.0])
    pad = 1500.0
    x0, x1 = allx.min() - pad, allx.max() + pad
    y0, y1 = ally.min() - pad, ally.max() + pad
    w, h = x1 - x0, y1 - y0

    def px(x: float) -> float:
        return round(x - x0, 1)

    def py(y: float) -> float:
        return round(y1 - y, 1)

    parts = [
        f'<svg id="map" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w:.0f} {h:.0f}" '
        'preserveAspectRatio="xMidYMid meet" style="width:100%;height:75vh;background:#f8f8f5">'
    ]
    if not density.empty:
        nmax = float(np.log10(density["n"].max() + 1)) or 1.0
        parts.append('<g id="crime-density">')
        for cx, cy, n in density[["cx", "cy", "n"]].itertuples(index=False):
            a = 0.15 + 0.75 * float(np.log10(n + 1)) / nmax
            parts.append(
                f'<rect x="{px(cx - cell_m / 2)}" y="{py(cy + cell_m / 2)}" width="{cell_m:g}" '
                f'height="{cell_m:g}" fill="#d62728" fill-opacity="{a:.2f}"><title>{int(n)} '
                "crimes</title></rect>"
            )
        parts.append("</g>")
    parts.append('<g id="competitors">')
    for r in competitors.itertuples(index=False):
        parts.append(
            f'<circle class="competitor" cx="{px(r.x)}" cy="{py(r.y)}" r="45" fill="#006241">'
            f"<title>{html.escape(str(r.name))}</title></circle>"
        )
    parts.append('</g><g id="stations">')
    for r in stations.itertuples(index=False):
        fill = "#1f77b4" if r.eligible else "none"
        parts.append(
            f'<circle class="station" cx="{px(r.x)}" cy="{py(r.y)}" r="80" fill="{fill}" '
            f'stroke="#1f77b4" stroke-width="20"><title>{html.escape(str(r.name))}'
            f'{" (eligible)" if r.eligible else ""}</title></circle>'
        )
    parts.append('</g><g id="top-locations">')
    for r in top.itertuples(index=False):
        parts.append(
            f'<g class="top-location"><circle cx="{px(r.x)}" cy="{py(r.y)}" r="70" fill="gold" '
            f'stroke="black" stroke-width="15"><title>#{int(r.rank)} near '
            f'{html.escape(str(r.station))}: {r.distance_to_station_m:.1f} m</title></circle>'
            f'<text x="{px(r.x) + 90}" y="{py(r.y)}" font-size="180">{int(r.rank)}</text></g>'
        )
    parts.append("</g></svg>")
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
        "<p>Blue: eligible stations; hollow: a competitor nearby; green: competitors; red: crime "
        f"density per {cell_m:g} m cell; gold: top locations. Coordinates in EPSG:26910.</p>"
        + "".join(parts)
        + "<table id='top-table'><tr><th>rank</th><th>station</th><th>longitude</th>"
        "<th>latitude</th><th>distance to station (m)</th></tr>"
        + rows
        + "</table></body></html>"
    )
