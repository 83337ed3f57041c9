"""NLTK's English stopword list, bundled (see resources/nltk/ATTRIBUTION.md): shared by the
bag-of-words vocabulary and the topic words of the embedding job."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources


@lru_cache(maxsize=1)
def english_stopwords() -> tuple[str, ...]:
    text = (resources.files("sparkfield") / "resources" / "nltk" /
            "english_stopwords.txt").read_text(encoding="utf-8")
    return tuple(w.strip() for w in text.splitlines() if w.strip())
