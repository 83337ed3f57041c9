"""The cron example: every entry is one valid line whose submit.sh calls name real jobs with
flags their parsers accept, and whose shell syntax bash accepts."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

from tests.conftest import job_parser

ROOT = Path(__file__).resolve().parents[1]
CRON = ROOT / "deploy" / "cron" / "sparkfield.cron"
FIELD = re.compile(r"^(\*|\d+(-\d+)?)(/\d+)?(,(\d+(-\d+)?))*$")


def _entries() -> list[tuple[list[str], str]]:
    out = []
    for line in CRON.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#") or re.match(r"^\w+=", line):
            continue
        parts = line.split(None, 5)
        out.append((parts[:5], parts[5]))
    return out


def test_cron_entries_are_valid_and_call_real_jobs_with_known_flags():
    entries = _entries()
    assert len(entries) == 3
    jobs = set()
    for fields, command in entries:
        assert all(FIELD.match(f) for f in fields), fields
        assert not re.search(r"(?<!\\)%", command), "an unescaped % ends a cron command"
        shell = command.replace("\\%", "%")
        check = subprocess.run(["bash", "-n", "-c", shell], capture_output=True, text=True)
        assert check.returncode == 0, check.stderr
        concrete = shell.replace("$(date -u -d yesterday +%F)", "2026-11-21").replace(
            "$SPARKFIELD_DATA", "/data").replace("$SPARKFIELD_HOME", "/opt/sparkfield")
        for segment in re.split(r"&&|\|\|", concrete):
            words = shlex.split(segment.split(">>")[0])
            if words[:1] != ["./submit.sh"]:
                continue
            job, args = words[1], words[2:]
            parsed = job_parser(job).parse_args(args)
            assert parsed.run_date == "2026-11-21" and parsed.profile == "cluster"
            jobs.add(job)
    assert jobs == {"coffee_shops", "event_log", "process_mining", "bag_of_words"}
