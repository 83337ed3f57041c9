"""One SparkSession for the whole test run, built through the library from the repo's conf."""

from __future__ import annotations

import argparse
import importlib.util
import os
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
WIKI_PAGES = ["Natural_language_processing.html", "Information_retrieval.html",
              "Text_mining.html", "Machine_translation.html", "Sentiment_analysis.html",
              "Linguistics.html"]


def job_parser(job: str) -> argparse.ArgumentParser:
    """The argument parser of ``jobs/<job>.py``, loaded from the file."""
    spec = importlib.util.spec_from_file_location(f"job_{job}", ROOT / "jobs" / f"{job}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.parser()


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Real data sets beside the project; their absence is a failure, not a skip."""
    assert SHARED.is_dir(), f"shared data not found at {SHARED}"
    return SHARED


@pytest.fixture(scope="session")
def wiki_pages(tmp_path_factory) -> Path:
    """Real Wikipedia pages from ../shared, unpacked once per test session."""
    out = tmp_path_factory.mktemp("wiki")
    with tarfile.open(SHARED / "corpus" / "wikipedia_uoi_2020_html.tar.xz", "r:*") as tar:
        for name in WIKI_PAGES:
            member = tar.getmember(f"wikipedia_uoi_2020/{name}")
            (out / name).write_bytes(tar.extractfile(member).read())
    return out


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
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
