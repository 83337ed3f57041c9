"""Real Wikipedia pages from ../shared, unpacked once per test session."""

import tarfile
from pathlib import Path

import pytest

CORPUS = Path(__file__).resolve().parents[3] / "shared/data/corpus"
PAGES = ["Natural_language_processing.html", "Information_retrieval.html", "Text_mining.html",
         "Machine_translation.html", "Sentiment_analysis.html", "Linguistics.html"]


@pytest.fixture(scope="session")
def wiki_pages(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wiki")
    with tarfile.open(CORPUS / "wikipedia_uoi_2020_html.tar.xz", "r:*") as tar:
        for name in PAGES:
            member = tar.getmember(f"wikipedia_uoi_2020/{name}")
            (out / name).write_bytes(tar.extractfile(member).read())
    return out
