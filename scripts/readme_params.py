"""Rewrite the README's parameter tables from the job schemas (``make readme-params``)."""

from __future__ import annotations

import sys
from pathlib import Path

from sparkfield.core.params import render_readme
from sparkfield.schemas import SCHEMAS


def main() -> int:
    readme = Path(__file__).resolve().parents[1] / "README.md"
    readme.write_text(render_readme(readme.read_text(), SCHEMAS.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
