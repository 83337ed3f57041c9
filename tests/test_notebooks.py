"""Every notebook runs top to bottom in a real Jupyter kernel, on the small data it samples."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_every_job_has_a_notebook_with_outputs_stripped():
    names = {p.stem for p in NOTEBOOKS}
    jobs = {p.stem for p in (ROOT / "jobs").glob("*.py")} - {"process_mining"}
    assert jobs <= names, jobs - names
    for nb in NOTEBOOKS:
        doc = json.loads(nb.read_text())
        for cell in doc["cells"]:
            if cell["cell_type"] == "code":
                assert cell["outputs"] == [] and cell["execution_count"] is None, nb.name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path, tmp_path):
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT / "notebooks")}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
