"""Every notebook runs top to bottom in a real Jupyter kernel, on the small data it samples."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
# the notebooks in notebooks/ (checked below); those in NEED_DATA read the large data sets
NOTEBOOKS = ["bag_of_words", "building_blocks", "coffee_shops", "embed", "event_log",
             "infer"]
NEED_DATA = {"bag_of_words", "embed", "event_log"}


def test_every_job_has_a_notebook_with_outputs_stripped():
    paths = sorted((ROOT / "notebooks").glob("*.ipynb"))
    names = {p.stem for p in paths}
    assert names == set(NOTEBOOKS)
    jobs = {p.stem for p in (ROOT / "jobs").glob("*.py")} - {"process_mining"}
    assert jobs <= names, jobs - names
    for nb in paths:
        assert ("SPARKFIELD_DATA" in nb.read_text()) == (nb.stem in NEED_DATA), nb.name
        doc = json.loads(nb.read_text())
        for cell in doc["cells"]:
            if cell["cell_type"] == "code":
                assert cell["outputs"] == [] and cell["execution_count"] is None, nb.name


# Run in the notebook's kernel before its last cell (spark.stop()): what the notebook showed,
# as JSON, so the test checks values and shapes rather than only that no cell failed.
PROBES = {
    "coffee_shops": """print(json.dumps({
    "first_top": list(first.top.head().shape), "first_top_cols": list(first.top.columns),
    "ranks": full.top["rank"].tolist(), "candidates": full.candidate_count,
    "in_reach": full.in_search_count, "stations": len(full.stations),
    "eligible": int(full.stations["eligible"].sum()),
    "report_keys": sorted(rep)}))""",
    "event_log": """print(json.dumps({
    "dfg": list(res.views["dfg"].head(10).shape), "dfg_cols": list(res.views["dfg"].columns),
    "dfg_sorted": res.views["dfg"]["frequency"].is_monotonic_decreasing,
    "variants": res.extras["views"].variants.limit(5).count(),
    "cases": len(cases), "longest_days": float(cases["duration_s"].max() / 86400),
    "slow_cases": slow_cases, "tree_activities": sorted(tree.activities()),
    "log_fitness": fitness["log_fitness"], "fit_share": fitness["perc_fit_traces"]}))""",
    "bag_of_words": """print(json.dumps({
    "sentences": list(res.sentences.select("doc_id", "sentence_idx", "sentence", "tokens",
                                           "vector").limit(5).toPandas().shape),
    "documents": res.documents.count(), "vocabulary": len(res.vocabulary),
    "top_words": top["word"].tolist(), "counts_sorted": top["count"].is_monotonic_decreasing}))""",
    "building_blocks": """print(json.dumps({
    "connect": bool(remote), "vocabulary": vocabulary,
    "texts": {r["page"]: r["text"] is not None for r in vectors.collect()},
    "sentences": len(rows), "dims": sorted(set(rows["embedding"].map(len))),
    "best_cosine": float(cosine[i, j]),
    "top": top[["rank", "x", "y", "distance_to_station_m"]].values.tolist(),
    "dfg": dfg[["source", "target", "frequency"]].values.tolist(),
    "rejected": sorted(map(list, rejected[["source", "reason", "count"]].values.tolist()))}))""",
    "embed": """print(json.dumps({
    "neighbors": list(res.extras["neighbors"].shape),
    "queries": int(res.extras["neighbors"]["query_id"].nunique()),
    "cosine_max": float(res.extras["neighbors"]["cosine"].max()),
    "topics": int(res.extras["topics"]["topic"].nunique()),
    "attention": list(att.shape), "tokens": len(tokens)}))""",
    "infer": """print(json.dumps({
    "rows": len(mine), "labels_equal": labels_equal, "max_diff": float(max_diff),
    "results": res.results.count(), "rejects": res.rejects.toPandas()["reason"].tolist()}))""",
}


def _check(name: str, shown: dict) -> None:
    if name == "coffee_shops":
        assert shown["first_top"][0] == 5 and {"rank", "station", "x", "y"} <= set(
            shown["first_top_cols"])
        assert shown["ranks"] == list(range(1, 11))
        assert 0 < shown["candidates"] < shown["in_reach"]
        assert shown["stations"] == 22 and 0 < shown["eligible"] < 22  # the bundled stations
        assert {"inputs", "rejects", "counts", "skew"} <= set(shown["report_keys"])
    elif name == "event_log":
        assert shown["dfg"][0] == 10 and {"source", "target", "frequency"} <= set(
            shown["dfg_cols"])
        assert shown["dfg_sorted"] and shown["variants"] == 5
        assert 700 < shown["cases"] < 1300  # a quarter of the 4,000-order sample
        assert 0 < shown["longest_days"] < 400
        assert 0 < shown["slow_cases"] < shown["cases"]
        assert "Order placed" in shown["tree_activities"]
        # a model discovered by IMd fits its own log, and so every part of it
        assert shown["log_fitness"] == 1.0 and shown["fit_share"] == 100.0
    elif name == "bag_of_words":
        assert shown["sentences"] == [5, 5] and shown["documents"] == 6
        assert shown["vocabulary"] == 100 and len(shown["top_words"]) == 25
        assert shown["counts_sorted"] and "the" not in shown["top_words"]  # no stopwords
    elif name == "building_blocks":
        check_building_blocks(shown)
    elif name == "embed":
        assert shown["neighbors"][0] == 9 and shown["queries"] == 3  # 3 queries x k=3
        assert 0 < shown["cosine_max"] <= 1.0001 and shown["topics"] == 3
        layers_heads_square = shown["attention"]
        assert layers_heads_square[-1] == layers_heads_square[-2] == shown["tokens"]
    elif name == "infer":
        assert shown["rows"] == 60 and shown["labels_equal"] and shown["max_diff"] < 1e-4
        assert shown["results"] == 60 and shown["rejects"] == ["empty text"]


def check_building_blocks(shown: dict) -> None:
    """What building_blocks.ipynb shows, on a classic session or over Spark Connect alike."""
    vocab = shown["vocabulary"]
    assert len(vocab) == 12 and vocab[:2] == ["coffee", "brewed"], vocab
    assert shown["texts"] == {"espresso": True, "filter": True, "tea": True, "missing": False}
    assert shown["sentences"] == 7 and shown["dims"] == [384]
    assert 0.3 < shown["best_cosine"] <= 1.0001
    top = shown["top"]
    assert [r[0] for r in top] == [1, 2, 3, 4, 5]
    assert all(r[1] % 25 == 0 and r[2] % 25 == 0 for r in top)  # on the 25 m lattice
    assert all(((a[1] - b[1]) ** 2 + (a[2] - b[2]) ** 2) ** 0.5 >= 100
               for k, a in enumerate(top) for b in top[k + 1:])  # distinct sites
    assert [r[3] for r in top] == sorted(r[3] for r in top)
    assert shown["dfg"] == [["Place order", "Pay", 3], ["Pay", "Ship", 2]]
    assert shown["rejected"] == [["Pay", "null timestamp", 1], ["Ship", "null timestamp", 1],
                                 ["Ship", "unparseable timestamp", 1]]


def execute_notebook(name: str) -> dict:
    """Runs ``notebooks/<name>.ipynb`` in a Jupyter kernel (which inherits this process's
    environment) and returns what its probe printed; fails on an error or a missing chart."""
    # the kernel's Spark workers run this interpreter, as they do for a notebook started from
    # the project's activated venv
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    probe = nbformat.v4.new_code_cell("import json\n" + PROBES[name])
    nb.cells.insert(len(nb.cells) - 1, probe)  # before spark.stop()
    client = NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT / "notebooks")}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    images = [c for c in nb.cells if c.cell_type == "code"
              and any("image/png" in o.get("data", {}) for o in c.get("outputs", []))]
    assert images, f"{name}: the notebook draws no chart"
    return json.loads("".join(o["text"] for o in probe.outputs if o.get("name") == "stdout"))


@pytest.mark.slow
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_executes(name, request, monkeypatch):
    if name in NEED_DATA:  # the kernel inherits the environment
        monkeypatch.setenv("SPARKFIELD_DATA", str(request.getfixturevalue("shared_data")))
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    shown = execute_notebook(name)
    assert not shown.get("connect")
    _check(name, shown)
