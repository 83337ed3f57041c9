"""The real Wikipedia pages the text tests use (the fixture lives in tests/conftest.py)."""

from tests.conftest import WIKI_PAGES as PAGES

__all__ = ["PAGES"]
