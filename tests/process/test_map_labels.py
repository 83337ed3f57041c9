"""The process maps draw each label as the lines it is made of: the activity name over its
count, the arc's frequency over its mean time; never a literal ``\\n``."""

import re
import xml.etree.ElementTree as ET

import pandas as pd

from sparkfield.process.analysis import process_map
from sparkfield.process.ocel import process_map as ocel_map

SVG = "{http://www.w3.org/2000/svg}"


def _texts(svg: str) -> list[str]:
    return [(t.text or "").strip() for t in ET.fromstring(svg).iter(f"{SVG}text")]


def _frames():
    acts = pd.DataFrame({"activity": ["Confirmation of receipt", 'Say "hi" \\ wave'],
                         "events": [1434, 7]})
    dfg = pd.DataFrame({"source": ["Confirmation of receipt"],
                        "target": ['Say "hi" \\ wave'], "frequency": [1079],
                        "mean_s": [72000.0]})
    ends = pd.DataFrame({"activity": ['Say "hi" \\ wave'], "cases": [7]})
    starts = pd.DataFrame({"activity": ["Confirmation of receipt"], "cases": [1434]})
    return acts, dfg, starts, ends


def test_process_map_labels_are_drawn_on_separate_lines():
    acts, dfg, starts, ends = _frames()
    dot = process_map.to_dot(dfg, acts, starts, ends)
    assert "\\\\n" not in dot  # DOT's line break is written once: \n, not \\n
    texts = _texts(process_map.render_svg(dot))
    assert not [t for t in texts if "\\n" in t or "\n" in t]
    for line in ("Confirmation of receipt", "1,434", 'Say "hi" \\ wave', "7", "1,079",
                 "20.0 h"):
        assert line in texts, (line, texts)


def test_object_centric_map_labels_are_drawn_on_separate_lines():
    acts, dfg, _, _ = _frames()
    dot = ocel_map.to_dot({"order": dfg, "item": dfg.assign(frequency=[3])}, acts)
    texts = _texts(process_map.render_svg(dot))
    assert not [t for t in texts if re.search(r"\\n|\n", t)]
    for line in ("Confirmation of receipt", "1,434", "order: 1,079", "item: 3", "20.0 h"):
        assert line in texts, (line, texts)
