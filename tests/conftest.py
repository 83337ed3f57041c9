"""One SparkSession for the whole test run, built through the library from the repo's conf,
and the one fixture that finds the large data sets (``SPARKFIELD_DATA``).

Nothing here touches the file system at import time. Without the data sets the tests that need
them are skipped with one reason (``SPARKFIELD_DATA`` not found); ``SPARKFIELD_REQUIRE_DATA=1``
(set by ``.ci/run``) turns those skips into failures."""

from __future__ import annotations

import argparse
import importlib.util
import os
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# what a make that runs the tests (`make test`) passes to a make they start
MAKE_VARIABLES = frozenset({"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES"})


def user_shell_env(*drop: str) -> dict[str, str]:
    """This environment as a user's shell has it, for a command the docs give: without the
    variables of a make running the tests (a sub-make prints the folders it enters) or
    ``drop``."""
    return {k: v for k, v in os.environ.items() if k not in MAKE_VARIABLES and k not in drop}
FIXTURES = ROOT / "tests" / "fixtures"
REQUIRE_DATA = "SPARKFIELD_REQUIRE_DATA"
WIKI_PAGES = ["Natural_language_processing.html", "Information_retrieval.html",
              "Text_mining.html", "Machine_translation.html", "Sentiment_analysis.html",
              "Linguistics.html"]


def data_root() -> Path:
    """Where the large data sets live: ``$SPARKFIELD_DATA``, else ``../shared/data``."""
    return Path(os.environ.get("SPARKFIELD_DATA") or ROOT.parent / "shared" / "data")


def _data_required() -> bool:
    return os.environ.get(REQUIRE_DATA, "").strip().lower() not in ("", "0", "false", "no")


def pytest_report_header(config) -> str:
    root = data_root()
    if root.is_dir():
        return f"data sets: {root}"
    mode = "failures" if _data_required() else "skipped"
    return (f"data sets: SPARKFIELD_DATA not found ({root}); tests that need them are {mode}")


def job_module(job: str):
    """``jobs/<job>.py``, loaded from the file."""
    spec = importlib.util.spec_from_file_location(f"job_{job}", ROOT / "jobs" / f"{job}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def job_parser(job: str) -> argparse.ArgumentParser:
    """The argument parser of ``jobs/<job>.py``."""
    return job_module(job).parser()


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


DATA_SKIP = "SPARKFIELD_DATA not found"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Every skip for missing data sets reported at one place, so ``-ra`` prints the reason
    once (with the number of tests) instead of once per test module."""
    outcome = yield
    rep = outcome.get_result()
    if rep.skipped and isinstance(rep.longrepr, tuple) and DATA_SKIP in str(rep.longrepr[2]):
        rep.longrepr = (__file__, None, rep.longrepr[2])


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The large real data sets. Missing: skipped with one reason, or a failure under
    ``SPARKFIELD_REQUIRE_DATA=1``."""
    root = data_root()
    if not root.is_dir():
        reason = (f"{DATA_SKIP} ({root}): set SPARKFIELD_DATA to the data sets "
                  "folder to run the tests that need them")
        if _data_required():
            pytest.fail(f"{REQUIRE_DATA} is set and {reason}", pytrace=False)
        pytest.skip(reason)
    return root


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """The repo's own small, attributed samples (see tests/fixtures/ATTRIBUTION.md)."""
    return FIXTURES


@pytest.fixture(scope="session")
def wiki_pages(tmp_path_factory) -> Path:
    """Six real Wikipedia pages (tests/fixtures/wikipedia), unpacked once per test session."""
    out = tmp_path_factory.mktemp("wiki")
    with tarfile.open(FIXTURES / "wikipedia" / "six_pages.tar.xz", "r:*") as tar:
        for name in WIKI_PAGES:
            member = tar.getmember(f"wikipedia_uoi_2020/{name}")
            (out / name).write_bytes(tar.extractfile(member).read())
    return out


REMOTE = "SPARKFIELD_TEST_REMOTE"  # sc://host:port: the tests' session is a Spark Connect one


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    if os.environ.get(REMOTE):
        from pyspark.sql import SparkSession

        session = SparkSession.builder.remote(os.environ[REMOTE]).getOrCreate()
        assert type(session).__module__.startswith("pyspark.sql.connect"), type(session)
        yield session
        session.stop()
        return
    from sparkfield.core.conf import load_config
    from sparkfield.core.session import build_session

    os.environ.setdefault("PYSPARK_PYTHON", os.sys.executable)
    ckpt = tmp_path_factory.mktemp("checkpoints")
    cfg = load_config(
        "tests",
        "local",
        ROOT / "conf",
        {
            "spark": {
                "master": "local[2]",
                "conf": {
                    "spark.sql.shuffle.partitions": "4",
                    "spark.driver.memory": "2g",
                    "spark.sql.warehouse.dir": str(tmp_path_factory.mktemp("warehouse")),
                },
            },
            "practices": {"checkpoint_dir": str(ckpt)},
        },
    )
    session = build_session(cfg, app_name="sparkfield-tests")
    session.sparkContext.setLogLevel("WARN")
    yield session
    session.stop()
