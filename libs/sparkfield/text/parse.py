"""HTML -> title and text (BeautifulSoup4 with lxml), then sentences and tokens."""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd
from pyspark.sql import types as T

from sparkfield.text.normalise import sentences, tokens

DOC_SCHEMA = T.StructType([
    T.StructField("doc_id", T.StringType(), False),
    T.StructField("url", T.StringType(), True),
    T.StructField("title", T.StringType(), True),
    T.StructField("text", T.StringType(), True),
    T.StructField("error", T.StringType(), True),
])
SENT_SCHEMA = T.StructType([
    T.StructField("doc_id", T.StringType(), False),
    T.StructField("url", T.StringType(), True),
    T.StructField("sentence_idx", T.IntegerType(), False),
    T.StructField("sentence", T.StringType(), False),
    T.StructField("tokens", T.ArrayType(T.StringType(), False), False),
])


def page_text(html: str, selector: str = "p") -> tuple[str | None, str]:
    """(title, text): the text of every element matching ``selector``, one per line, with
    scripts and styles removed."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "lxml")
    for tag in soup(["script", "style", "noscript", "template"]):
        tag.decompose()
    title = soup.title.get_text(" ", strip=True) if soup.title else None
    parts = [el.get_text(" ", strip=True) for el in soup.select(selector)]
    return title, "\n".join(p for p in parts if p)


def parse_batches(selector: str):
    """``mapInPandas``: pages (doc_id, url, html) -> documents (title, text or error)."""

    def run(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for b in batches:
            rows = []
            for doc_id, url, html in zip(b["doc_id"], b["url"], b["html"], strict=True):
                try:
                    title, text = page_text(html, selector)
                    err = None if text else f"no text in '{selector}' elements"
                except Exception as exc:  # a page bs4/lxml cannot read is a reject, not a crash
                    title, text, err = None, None, f"parse error: {type(exc).__name__}: {exc}"
                rows.append((doc_id, url, title, text or None, err))
            yield pd.DataFrame(rows, columns=DOC_SCHEMA.names)

    return run


def sentence_batches(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """``mapInPandas``: documents -> one row per sentence with its tokens."""
    for b in batches:
        rows = []
        for doc_id, url, text in zip(b["doc_id"], b["url"], b["text"], strict=True):
            for i, s in enumerate(sentences(text or "")):
                rows.append((doc_id, url, i, s, tokens(s)))
        yield pd.DataFrame(rows, columns=SENT_SCHEMA.names)
