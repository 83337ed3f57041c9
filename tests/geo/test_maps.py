"""The coffee-shop map: rank labels of neighbouring top locations stay readable."""

from __future__ import annotations

import itertools

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text

from sparkfield.geo.maps import map_figure, map_html


def _frames(top_xy: list[tuple[float, float]]):
    stations = pd.DataFrame({"name": ["A", "B"], "x": [0.0, 5000.0], "y": [0.0, 5000.0],
                             "eligible": [True, False]})
    competitors = pd.DataFrame({"name": ["c"], "x": [5100.0], "y": [5000.0]})
    density = pd.DataFrame({"cx": [100.0, 2000.0], "cy": [100.0, 3000.0], "n": [3, 40]})
    top = pd.DataFrame({"rank": range(1, len(top_xy) + 1), "station": "A",
                        "x": [x for x, _ in top_xy], "y": [y for _, y in top_xy],
                        "longitude": -123.1, "latitude": 49.2,
                        "distance_to_station_m": 10.0})
    return stations, competitors, density, top


def _label_boxes(fig):
    renderer = FigureCanvasAgg(fig).get_renderer()
    ax = fig.axes[0]
    labels = [t for t in ax.texts if (t.get_gid() or "").startswith("rank-label-")]
    # the text alone, without its leader line
    return {t.get_text(): Text.get_window_extent(t, renderer) for t in labels}


def test_rank_labels_of_close_sites_do_not_overlap():
    # ten sites within 60 m of each other on a 5 km map: their stars touch
    xy = [(10.0 * (i % 4), 20.0 * (i // 4)) for i in range(10)]
    fig = map_figure(*_frames(xy), cell_m=100, title="close sites")
    boxes = _label_boxes(fig)
    assert sorted(boxes, key=int) == [str(i) for i in range(1, 11)]
    for (a, ba), (b, bb) in itertools.combinations(boxes.items(), 2):
        assert not ba.overlaps(bb), f"labels {a} and {b} overlap"


def test_a_lone_site_is_labelled_beside_its_star():
    fig = map_figure(*_frames([(1000.0, 1000.0)]), cell_m=100, title="one site")
    (label,) = [t for t in fig.axes[0].texts if t.get_gid() == "rank-label-1"]
    assert label.get_text() == "1" and label.arrow_patch is None
    assert 'id="rank-label-1"' in map_html(*_frames([(1000.0, 1000.0)]), cell_m=100,
                                             title="one site")
