"""The parameter tables of the job manuals (docs/jobs/), rendered from the job schemas between
``<!-- params:JOB -->`` markers (``make param-tables``; a test checks they are current)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sparkfield.core.param_flags import append_meaning, describe, show_value


# -- docs ----------------------------------------------------------------------------------
def markdown_table(schema: Any) -> str:
    """The job's parameter table (conf keys, flags, defaults, meaning) in Markdown."""
    rows = ["| key | flag | default | meaning |", "|---|---|---|---|"]
    for p in schema.params:
        if not p.in_conf:
            continue
        flag = f"`{p.flag}`" if p.flag else ""
        meaning = describe(p).replace("|", "\\|")
        rows.append(f"| `{p.key}` | {flag} | {show_value(p.default)} | {meaning} |")
        for a in schema.append_flags:
            if a.target == p.key:
                meaning = append_meaning(a).replace("|", "\\|")
                rows.append(f"| `{p.key}` | `{a.flag} {a.metavar}` |  | {meaning} |")
    return "\n".join(rows)


def render_tables(text: str, schemas: Iterable[Any]) -> tuple[str, set[str]]:
    """``text`` with every table between ``<!-- params:JOB -->`` and ``<!-- /params:JOB -->``
    replaced by that job's schema table, and the jobs whose tables it holds (any Markdown file
    may hold any of them, each at most once)."""
    found: set[str] = set()
    for schema in schemas:
        start, end = f"<!-- params:{schema.job} -->", f"<!-- /params:{schema.job} -->"
        pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
        block = f"{start}\n{markdown_table(schema)}\n{end}"
        text, n = pattern.subn(lambda _m, b=block: b, text)
        if n > 1:
            raise ValueError(f"{n} blocks {start} ... {end} in one file, expected at most 1")
        if n:
            found.add(schema.job)
    return text, found


def table_files(root: Path) -> list[Path]:
    """The Markdown files that may hold parameter tables: README.md and everything in docs/."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def render_docs(root: Path, schemas: Iterable[Any]) -> dict[Path, str]:
    """Every Markdown file under ``root`` that holds tables, rendered; each job's table must be
    in exactly one file."""
    schemas = list(schemas)
    out: dict[Path, str] = {}
    where: dict[str, list[Path]] = {s.job: [] for s in schemas}
    for path in table_files(root):
        if not path.exists():
            continue
        text, found = render_tables(path.read_text(encoding="utf-8"), schemas)
        for job in found:
            where[job].append(path)
        if found:
            out[path] = text
    wrong = {job: paths for job, paths in where.items() if len(paths) != 1}
    if wrong:
        raise ValueError("each job's parameter table must be in exactly one file: " + "; ".join(
            f"{job}: {len(paths)} ({', '.join(str(p) for p in paths) or 'none'})"
            for job, paths in sorted(wrong.items())))
    return out
