"""Scoring main-content extraction against annotated snippets (the rule of Trafilatura's
evaluation corpus): each ``with`` snippet found in a page's extracted text is a true positive,
each missing one a false negative; each ``without`` snippet (boilerplate) found is a false
positive, each absent one a true negative. Precision, recall and F1 over all pages."""

from __future__ import annotations

import json
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Score:
    tp: int
    fn: int
    fp: int
    tn: int

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 0.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def __str__(self) -> str:
        return f"F1 {self.f1:.4f} (P {self.precision:.4f}, R {self.recall:.4f})"


def score(annotations: Mapping[str, dict], texts: Mapping[str, str | None]) -> Score:
    """``annotations``: page file -> {"with": [...], "without": [...]}; ``texts``: page file ->
    extracted text (a page with no text scores as the empty text)."""
    tp = fn = fp = tn = 0
    for page, item in annotations.items():
        text = texts.get(page) or ""
        found = sum(s in text for s in item["with"])
        tp, fn = tp + found, fn + len(item["with"]) - found
        leaked = sum(s in text for s in item["without"])
        fp, tn = fp + leaked, tn + len(item["without"]) - leaked
    return Score(tp, fn, fp, tn)


def unpack_benchmark(archive: Path, into: Path) -> tuple[Path, dict[str, dict]]:
    """Unpack ``extraction_benchmark.tar.xz``: (its html folder, annotations by file name)."""
    with tarfile.open(archive, "r:*") as tar:
        tar.extractall(into, filter="data")
    root = into / "extraction_benchmark"
    data = json.loads((root / "evaldata.json").read_text(encoding="utf-8"))
    return root / "html", {item["file"]: item for item in data.values()}
