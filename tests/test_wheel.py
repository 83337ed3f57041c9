"""The wheel a user builds (`python -m build`) installs into a clean virtual environment, carries
the jobs, the default conf and the bundled data, and runs a job from any directory."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT

SOURCES = ["pyproject.toml", "README.md", "libs", "jobs", "conf"]


def test_the_wheel_lists_every_package_of_the_library():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "packages"])
    found = {".".join(p.parent.relative_to(ROOT / "libs").parts)
             for p in (ROOT / "libs" / "sparkfield").rglob("__init__.py")}
    # the folders of data files (no __init__.py) are listed too, each with its files
    data = {".".join(d.relative_to(ROOT / "libs").parts)
            for d in (ROOT / "libs" / "sparkfield").rglob("*") if d.is_dir()
            and d.name != "__pycache__" and not (d / "__init__.py").exists()
            and any(f.is_file() for f in d.iterdir())}
    data |= {f"sparkfield.conf.{d.name}" for d in (ROOT / "conf").iterdir() if d.is_dir()}
    assert data >= {"sparkfield.resources.nltk", "sparkfield.conf.jobs"}
    assert listed == found | data | {"sparkfield.jobs", "sparkfield.conf"}


def _data_files(folder: Path) -> list[Path]:
    """The files under ``folder`` a user's checkout holds (no caches, no hidden folders)."""
    return [f for f in folder.rglob("*") if f.is_file() and not any(
        part == "__pycache__" or part.startswith(".") for part in f.relative_to(folder).parts)]


def _run(cmd: list[str], cwd: Path, timeout: int = 900, env: dict[str, str] | None = None,
         code: int = 0) -> subprocess.CompletedProcess:
    res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    assert res.returncode == code, f"{cmd}:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return res


def _fresh_shell(tmp_path: Path) -> dict[str, str]:
    """A user's fresh shell: nothing of this test session's Python or Spark settings (no
    PYSPARK_PYTHON, PYTHONPATH, SPARK_*), and a ``python3`` on the PATH that is the system's,
    not the venv's, and lacks the library and its dependencies."""
    bin_dir = tmp_path / "path-bin"
    bin_dir.mkdir()
    system = shutil.which("python3", path="/usr/bin:/bin")
    assert system and not system.startswith(str(ROOT)), system
    (bin_dir / "python3").symlink_to(system)
    keep = ("HOME", "USER", "LANG", "LC_ALL", "TMPDIR", "JAVA_HOME")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env["PATH"] = f"{bin_dir}:/usr/bin:/bin"
    return env


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
    # every data file of the checkout is in the wheel (the package-data patterns match them)
    with zipfile.ZipFile(wheel) as z:
        packed = set(z.namelist())
    data = {f"sparkfield/{f.relative_to(ROOT / 'libs' / 'sparkfield').as_posix()}"
            for f in _data_files(ROOT / "libs" / "sparkfield" / "resources")}
    data |= {f"sparkfield/conf/{f.relative_to(ROOT / 'conf').as_posix()}"
             for f in _data_files(ROOT / "conf")}
    assert "sparkfield/conf/spark/log4j2.properties" in data
    assert data - packed == set()
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    _run([str(py), "-m", "pip", "install", "-q", f"{wheel}[geo]"], cwd=tmp_path)
    work = tmp_path / "elsewhere"  # no conf/ here: the wheel's own conf is used
    work.mkdir()
    shell = _fresh_shell(tmp_path)
    assert shutil.which("python3", path=shell["PATH"]) != str(py)
    listing = _run([str(env_dir / "bin" / "sparkfield", ), "--list"], cwd=work,
                   env=shell).stdout
    assert all(job in listing for job in ("coffee_shops", "event_log", "embed"))
    # the local executors run the entry point's own interpreter, not python3 from the PATH
    _run([str(py), "-m", "sparkfield", "coffee_shops", "--output", "out", "--top", "3",
          "--sample", "0.2"], cwd=work, env=shell)
    with (work / "out" / "top_locations.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [r["rank"] for r in rows] == ["1", "2", "3"]
    installed = _run([str(py), "-c", "import sparkfield, pathlib; print(pathlib.Path("
                      "sparkfield.__file__).parent)"], cwd=work, env=shell).stdout.strip()
    assert not installed.startswith(str(ROOT)), installed  # the wheel's copy, not the checkout
    # installed with the geo extra only: the text job names the extra it needs
    res = _run([str(env_dir / "bin" / "sparkfield"), "bag_of_words", "--help"], cwd=work,
               env=shell, code=2)
    assert res.stderr.strip().splitlines() == [
        "error: Python module 'requests' is not installed (package requests): the "
        "bag_of_words job needs the 'text' extra: pip install 'sparkfield[text]'"], \
        res.stderr[-3000:]


# an environment without an extra: its modules cannot be found (importlib.util.find_spec gives
# None, an import raises ModuleNotFoundError), in the driver and in the Python workers alike
HIDE_MODULES = """
import importlib.machinery, os, sys
HIDDEN = set(os.environ["SPARKFIELD_TEST_HIDDEN"].split(","))
class Hidden(importlib.machinery.PathFinder):
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname.split(".")[0] in HIDDEN:
            return None
        return super().find_spec(fullname, path, target)
sys.meta_path[:] = [Hidden if f is importlib.machinery.PathFinder else f for f in sys.meta_path]
"""

JOB_EXTRAS = {"bag_of_words": "text", "coffee_shops": "geo", "event_log": "process",
              "process_mining": "process", "embed": "nlp", "infer": "nlp"}


def test_every_job_has_an_extra_named_after_its_area():
    assert set(JOB_EXTRAS) == {p.stem for p in (ROOT / "jobs").glob("*.py")}
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert set(JOB_EXTRAS.values()) <= set(extras)


def _without_extra(tmp_path: Path, extra: str, *args: str) -> subprocess.CompletedProcess:
    """``python -m sparkfield JOB ...`` in a fresh shell whose environment lacks ``extra``."""
    from sparkfield.core.failures import MODULE_PACKAGES

    hidden = sorted(m for m, (_, extras) in MODULE_PACKAGES.items() if extra in extras)
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(HIDE_MODULES)
    env = {**_fresh_shell(tmp_path), "SPARKFIELD_TEST_HIDDEN": ",".join(hidden),
           "PYTHONPATH": f"{site}:{ROOT / 'libs'}", "SPARKFIELD_CONF_DIR": str(ROOT / "conf")}
    return subprocess.run([sys.executable, "-m", "sparkfield", *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=900, env=env)


def _names_the_extra(res: subprocess.CompletedProcess, job: str, extra: str) -> None:
    tail = (res.stdout + res.stderr)[-3000:]
    assert res.returncode == 2, tail
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")]
    # the run ends in this line (Spark's own log may show an executor's traceback before it)
    assert len(errors) == 1 and res.stderr.strip().splitlines()[-1] == errors[0], tail
    assert f"the {job} job needs the '{extra}' extra: pip install 'sparkfield[{extra}]'" \
        in errors[0], tail


@pytest.mark.parametrize("job", sorted(JOB_EXTRAS))
def test_help_without_the_jobs_extra_shows_the_flags_or_names_the_extra(job, tmp_path):
    extra = JOB_EXTRAS[job]
    res = _without_extra(tmp_path, extra, job, "--help")
    if res.returncode == 0:  # the job imports the extra's modules only where it uses them
        assert "--output" in res.stdout and not res.stderr.strip(), res.stderr[-3000:]
    else:
        _names_the_extra(res, job, extra)
    if job == "bag_of_words":  # the text job imports requests with the module
        assert res.returncode == 2


def test_a_run_without_the_text_extra_names_it(tmp_path):
    _names_the_extra(_without_extra(tmp_path, "text", "bag_of_words", "--output", "out"),
                     "bag_of_words", "text")
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
@pytest.mark.parametrize("job,args", [
    ("embed", ["--input", "sentences.csv", "--output", "out"]),  # torch, in the executors
    ("process_mining", ["--log", str(ROOT / "tests/fixtures/process/running-example.xes"),
                        "--output", "out"]),  # matplotlib, for the statistics' charts
])
def test_a_run_without_the_jobs_extra_names_it(job, args, tmp_path):
    (tmp_path / "sentences.csv").write_text("sentence\nThe cat sat.\nA dog ran.\n")
    _names_the_extra(_without_extra(tmp_path, JOB_EXTRAS[job], job, *args), job,
                     JOB_EXTRAS[job])
    assert not (tmp_path / "out").exists()
