"""The wheel a user builds (`python -m build`) installs into a clean virtual environment, carries
the jobs, the default conf and the bundled data, and runs a job from any directory."""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import pytest

from tests.conftest import ROOT

SOURCES = ["pyproject.toml", "README.md", "libs", "jobs", "conf"]


def test_the_wheel_lists_every_package_of_the_library():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "packages"])
    found = {".".join(p.parent.relative_to(ROOT / "libs").parts)
             for p in (ROOT / "libs" / "sparkfield").rglob("__init__.py")}
    assert listed == found | {"sparkfield.jobs", "sparkfield.conf"}


def _run(cmd: list[str], cwd: Path, timeout: int = 900) -> subprocess.CompletedProcess:
    res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, f"{cmd}:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return res


@pytest.mark.slow
def test_a_built_wheel_runs_a_job_from_a_clean_venv(tmp_path):
    src = tmp_path / "src"
    for name in SOURCES:  # a copy: the build writes build/ and *.egg-info beside its sources
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns(
                "__pycache__", "*.egg-info"))
        else:
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    _run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir",
          str(tmp_path / "dist"), str(src)], cwd=src)
    (wheel,) = (tmp_path / "dist").glob("sparkfield-*.whl")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    _run([str(py), "-m", "pip", "install", "-q", f"{wheel}[geo]"], cwd=tmp_path)
    work = tmp_path / "elsewhere"  # no conf/ here: the wheel's own conf is used
    work.mkdir()
    listing = _run([str(env_dir / "bin" / "sparkfield", ), "--list"], cwd=work).stdout
    assert all(job in listing for job in ("coffee_shops", "event_log", "embed"))
    _run([str(py), "-m", "sparkfield", "coffee_shops", "--output", "out", "--top", "3",
          "--sample", "0.2"], cwd=work)
    with (work / "out" / "top_locations.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [r["rank"] for r in rows] == ["1", "2", "3"]
    installed = _run([str(py), "-c", "import sparkfield, pathlib; print(pathlib.Path("
                      "sparkfield.__file__).parent)"], cwd=work).stdout.strip()
    assert not installed.startswith(str(ROOT)), installed  # the wheel's copy, not the checkout
