"""What the README and the docs tell a user to run: every `./submit.sh JOB ...` command builds a
spark-submit command (``--dry-run``) whose job flags the job's own parser accepts, and the
README's Python examples run as written."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import types as T

from tests.conftest import job_parser

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
_COMMAND = re.compile(r"(\./submit\.sh [^`|\n]+)")


def _commands() -> list[tuple[str, str]]:
    out = []
    for doc in DOCS:
        for match in _COMMAND.finditer(doc.read_text(encoding="utf-8")):
            command = match.group(1).split(" #")[0].strip()
            words = shlex.split(command)
            if words[1].startswith("-") or words[1].isupper() or "--help" in words:
                continue  # --list, --help and the JOB placeholder
            out.append((doc.relative_to(ROOT).as_posix(), command))
    return sorted(set(out))


def test_the_docs_show_a_command_for_every_job():
    jobs = {shlex.split(c)[1] for _, c in _commands()}
    assert jobs == {p.stem for p in (ROOT / "jobs").glob("*.py")}


@pytest.mark.parametrize("doc,command", _commands())
def test_every_documented_command_builds_and_parses(doc, command):
    words = shlex.split(command)
    res = subprocess.run([str(ROOT / "submit.sh"), *words[1:], "--dry-run"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "SPARKFIELD_PYTHON": sys.executable})
    assert res.returncode == 0, f"{doc}: {command}: {res.stderr}"
    spark_submit = res.stdout.strip().splitlines()  # one argument per line
    app = spark_submit.index(str(ROOT / "jobs" / f"{words[1]}.py"))
    job_parser(words[1]).parse_args(spark_submit[app + 1:])  # exits 2 on an unknown flag


def _python_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_the_readme_process_example_runs_on_a_frame_of_events(spark):
    block = next(b for b in _python_blocks() if "discover_dfg" in b)
    schema = T.StructType([T.StructField("order_id", T.StringType()),
                           T.StructField("status", T.StringType()),
                           T.StructField("ts", T.StringType())])
    events = spark.createDataFrame([
        ("o1", "created", "2026-01-01 10:00:00"), ("o1", "paid", "2026-01-01 11:00:00"),
        ("o2", "created", "2026-01-02 10:00:00"), ("o2", "paid", "2026-01-02 10:30:00"),
        ("o3", "created", "2026-01-03 09:00:00")], schema)
    scope = {"events": events}
    exec(compile(block, "README.md", "exec"), scope)  # noqa: S102 (the README's own example)
    arcs = {(r.source, r.target): r.frequency for r in scope["dfg"].collect()}
    assert arcs[("created", "paid")] == 2
    by_variant = {r.variant: r.cases for r in scope["top"].collect()}
    assert by_variant == {'["created","paid"]': 2}  # o3, a single event, is filtered out


@pytest.mark.slow
def test_the_readme_stage_example_runs_on_a_table_of_html(spark, wiki_pages):
    block = next(b for b in _python_blocks() if "PinnedCountVectorizer" in b)
    pages = spark.createDataFrame(
        [(p.name, p.read_text(encoding="utf-8")) for p in sorted(wiki_pages.iterdir())],
        "name string, html string")
    scope = {"pages": pages}
    exec(compile(block, "README.md", "exec"), scope)  # noqa: S102 (the README's own example)
    rows = scope["embedded"].select("name", "text", "tfidf", "embedding").collect()
    assert len(rows) == 6 and all(r["text"] for r in rows)
    assert len(scope["bow"].stages[2].vocabulary) == 1000
    assert all(r["tfidf"].size == 1000 and len(r["embedding"]) == 384 for r in rows)


@pytest.mark.slow
def test_the_readme_library_example_runs(spark):
    block = next(b for b in _python_blocks() if "build_session" in b)
    scope: dict = {}
    exec(compile(block, "README.md", "exec"), scope)  # noqa: S102 (the README's own example)
    top = scope["result"].top
    assert 0 < len(top) <= 10 and list(top["rank"]) == list(range(1, len(top) + 1))
