"""How large a job's input is, told from its command line before Spark starts, so that
``submit.sh`` can start the driver JVM for a small input with the JIT that suits it.

The input is every local file or folder that a job argument names (an argument's value that is
an existing path), and every file that a YAML argument (an event-log mapping) names in its
values, relative to the YAML's folder or to the working directory. Compressed and columnar
files count at :data:`EXPANSION` times their size. The size is unknown (None) when an
argument or a mapping names a URI or a database (``hdfs://``, ``s3a://``, ``jdbc:``...) or a
list of URLs to fetch: nothing on this machine tells how much that is; and when a file cannot
be read here. The output's flags are not inputs.

``python -m sparkfield.deploy.input_size [JOB ARGS...]`` prints the size in bytes, or
``unknown``.
"""

from __future__ import annotations

import glob
import os
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

# Columnar files count at 3x: their rows cost the JVM more than their bytes say. The 372
# Gutenberg books as 66 MB of Parquet pages ran bag_of_words in 213 s with C1 and 121 s with
# C2; 120 of them (22 MB) took the same time either way, 37 (7 MB) were faster with C1
EXPANSION = {".gz": 10, ".bz2": 10, ".xz": 10, ".zst": 10, ".zip": 5, ".parquet": 3, ".orc": 3}
MAPPING_SUFFIXES = (".yaml", ".yml")
# flags whose value is not read as input: where the run writes, and state it keeps
NOT_INPUT = ("--output", "--warc-output", "--onnx-dir", "--cache-dir", "--conf-dir")
# flags whose file lists what to fetch: its size says nothing of the input's
FETCHED = ("--urls",)
# ${VAR} and ${VAR:-default}, as the mapping reader (process.extraction.mapping_common) expands
# them; not imported from there, since importing the process package costs every submit a second
_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class Unknown(Exception):
    """The input's size cannot be told here."""


def _is_remote(text: str) -> bool:
    head = text.strip().lower()
    return head.startswith("jdbc:") or ("://" in head and not head.startswith("file://"))


def path_bytes(path: Path) -> int:
    """A file's size (times its compression's expansion), or a folder's files' in all."""
    if path.is_dir():
        return sum(path_bytes(p) for p in path.rglob("*") if p.is_file())
    return path.stat().st_size * EXPANSION.get(path.suffix.lower(), 1)


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _mapping_bytes(path: Path, cwd: Path) -> int:
    """The files a mapping's values name (read as YAML; a file that is not YAML counts as a
    file)."""
    import yaml

    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError):
        return path_bytes(path)
    total, seen = path_bytes(path), {path.resolve()}
    for text in _strings(doc):
        if _is_remote(text):
            raise Unknown(text)
        if "\n" in text or len(text) > 4096 or text.strip() in ("", ".", ".."):
            continue
        text = _ENV.sub(lambda m: os.environ.get(m.group(1)) or m.group(2) or "", text)
        for base in (path.parent, cwd):
            found = [Path(f).resolve() for f in glob.glob(str(base / text.removeprefix("file://")))]
            if found:
                for f in found:
                    if f not in seen:
                        seen.add(f)
                        total += path_bytes(f)
                break
    return total


def input_bytes(args: Sequence[str], cwd: Path | None = None) -> int | None:
    """The bytes of input that the job arguments ``args`` name; None when unknown."""
    cwd = cwd or Path.cwd()
    total, skip_next = 0, False
    try:
        for arg in args:
            if skip_next:
                skip_next = False
                continue
            value = arg
            if arg.startswith("--"):
                name, eq, rest = arg.partition("=")
                if name in NOT_INPUT:
                    skip_next = not eq
                    continue
                if name in FETCHED:
                    raise Unknown(name)
                if not eq:
                    continue
                value = rest
            if _is_remote(value):
                raise Unknown(value)
            path = cwd / value.removeprefix("file://")
            if not value or not path.exists():
                continue
            if path.is_file() and path.suffix.lower() in MAPPING_SUFFIXES:
                total += _mapping_bytes(path, cwd)
            else:
                total += path_bytes(path)
    except (Unknown, OSError):  # an unreadable input is the job's to report, with its name
        return None
    return total


def main(argv: list[str] | None = None) -> int:
    size = input_bytes(sys.argv[1:] if argv is None else argv)
    print("unknown" if size is None else size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
