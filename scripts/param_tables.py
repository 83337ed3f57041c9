"""Rewrite the parameter tables in README.md and docs/ from the job schemas
(``make param-tables``)."""

from __future__ import annotations

import sys
from pathlib import Path

from sparkfield.core.param_docs import render_docs
from sparkfield.schemas import SCHEMAS


def main() -> int:
    root = Path(__file__).resolve().parents[1]
    for path, text in render_docs(root, SCHEMAS.values()).items():
        if path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            print(f"updated {path.relative_to(root)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
