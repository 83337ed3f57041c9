"""Every notebook runs top to bottom in a real Jupyter kernel, on the small data it samples."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
# the notebooks in notebooks/ (checked below); those in NEED_DATA read the large data sets
NOTEBOOKS = ["bag_of_words", "coffee_shops", "embed", "event_log"]
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


@pytest.mark.slow
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_executes(name, request, monkeypatch):
    if name in NEED_DATA:  # the kernel inherits the environment
        monkeypatch.setenv("SPARKFIELD_DATA", str(request.getfixturevalue("shared_data")))
    nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT / "notebooks")}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
