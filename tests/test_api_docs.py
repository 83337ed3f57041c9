"""docs/api.md lists exactly the public names of each area and links only to manual sections
that exist.

The page is read in a simple, fixed way: under the heading ``## sparkfield.<area>`` (up to the
next ``## `` heading), every table row whose first cell is one backticked name lists that name.
A link target ``file.md#anchor`` must name an existing file (relative to docs/) holding a
heading whose GitHub anchor is ``anchor``: lower case, every character other than a letter,
digit, ``_``, ``-`` or space dropped, spaces turned into ``-``, a repeated anchor suffixed
``-1``, ``-2``... Headings inside fenced code blocks are not headings. No Spark is started."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
API = DOCS / "api.md"
AREAS = ["geo", "nlp", "process", "text"]
_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|")
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^\s*(```|~~~)")


def listed_names(page: str, area: str) -> list[str]:
    """The names the rows under ``## sparkfield.<area>`` list, in page order."""
    names: list[str] = []
    inside = False
    for line in page.splitlines():
        if line.startswith("## "):
            inside = line[3:].strip() == f"sparkfield.{area}"
            continue
        match = _ROW.match(line) if inside else None
        if match:
            names.append(match.group(1))
    return names


def anchors(page: str) -> set[str]:
    """The GitHub anchors of the headings of a Markdown page."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    fenced = False
    for line in page.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if fenced or not heading:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        out.add(slug if count == 0 else f"{slug}-{count}")
    return out


def broken_links(page: str, base: Path) -> list[str]:
    """The relative links of ``page`` (a file under ``base``) whose file or anchor is missing."""
    broken = []
    for target in _LINK.findall(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue  # http:, mailto:
        path, _, anchor = target.partition("#")
        file = (base / path).resolve() if path else None
        if file is not None and not file.exists():
            broken.append(f"{target}: no file {path}")
        elif anchor and (file is None or file.is_file()):
            text = file.read_text(encoding="utf-8") if file else page
            if anchor not in anchors(text):
                broken.append(f"{target}: no heading #{anchor}")
    return broken


@pytest.mark.parametrize("area", AREAS)
def test_the_page_lists_exactly_each_areas_public_names(area):
    listed = listed_names(API.read_text(encoding="utf-8"), area)
    public = set(importlib.import_module(f"sparkfield.{area}").__all__)
    assert listed, f"docs/api.md has no rows under '## sparkfield.{area}'"
    assert len(listed) == len(set(listed)), f"listed twice: {sorted(listed)}"
    assert sorted(set(listed) - public) == [], "listed in docs/api.md but not in __all__"
    assert sorted(public - set(listed)) == [], "in __all__ but not listed in docs/api.md"


def test_every_link_of_the_page_reaches_a_file_and_a_heading():
    assert broken_links(API.read_text(encoding="utf-8"), DOCS) == []


def test_the_reading_rules_see_a_missing_name_an_extra_one_and_a_bad_anchor(tmp_path):
    page = ("## sparkfield.geo\n\n| name | what |\n|---|---|\n| `run` | job entry |\n"
            "| `extra` | function |\n\n## sparkfield.text\n\n| `run` | job entry |\n")
    assert listed_names(page, "geo") == ["run", "extra"]
    assert listed_names(page, "text") == ["run"]
    (tmp_path / "manual.md").write_text("# A `job`: its title\n\n```\n# not a heading\n```\n"
                                        "## Filters\n## Filters\n", encoding="utf-8")
    assert anchors((tmp_path / "manual.md").read_text(encoding="utf-8")) == {
        "a-job-its-title", "filters", "filters-1"}
    links = ("[a](manual.md#filters-1) [b](manual.md#not-a-heading) [c](gone.md) "
             "[d](https://example.org/x#y)")
    assert broken_links(links, tmp_path) == [
        "manual.md#not-a-heading: no heading #not-a-heading", "gone.md: no file gone.md"]
