"""HTML -> title and text, then sentences and tokens.

Two ways to the text: ``main`` (trafilatura: the main content, boilerplate left out) and
``selector`` (BeautifulSoup4 with lxml: the text of the elements a CSS selector matches).
"""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from sparkfield.core.workers import in_worker
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


EXTRACT_MODES = ("main", "selector")

# elements that start a new line of text; the others (a, b, span, sup, ...) are inline and run
# together with their neighbours, so ``<span>M</span>uch`` is one word
BLOCK = frozenset({
    "address", "article", "aside", "blockquote", "body", "br", "caption", "dd", "details",
    "dialog", "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2",
    "h3", "h4", "h5", "h6", "header", "hgroup", "hr", "html", "li", "main", "nav", "ol", "option",
    "p", "pre", "section", "summary", "table", "tbody", "td", "tfoot", "th", "thead", "title",
    "tr", "ul"})
_SKIP = frozenset({"script", "style", "noscript", "template"})
_END = object()


def element_text(el) -> str:
    """The text of a bs4 element: inline elements joined without a space, block elements (and
    ``<br>``) on lines of their own, whitespace collapsed, empty lines dropped."""
    from bs4.element import NavigableString, PreformattedString, Tag

    out: list[str] = []
    stack: list = list(reversed(el.contents)) if isinstance(el, Tag) else [el]
    while stack:
        node = stack.pop()
        if node is _END:
            out.append("\n")
        elif isinstance(node, Tag):
            if node.name in _SKIP:
                continue
            if node.name in BLOCK:
                out.append("\n")
                stack.append(_END)
            stack.extend(reversed(node.contents))
        elif isinstance(node, NavigableString) and not isinstance(node, PreformattedString) \
                and type(node).__name__ not in ("Script", "Stylesheet", "TemplateString"):
            out.append(str(node).replace("\n", " "))  # a newline in the source is a space
    lines = (" ".join(line.split()) for line in "".join(out).split("\n"))
    return "\n".join(line for line in lines if line)


def selector_text(html: str, selector: str = "p") -> tuple[str | None, str]:
    """(title, text): the text of every element matching ``selector``, one per line (blocks
    inside one on lines of their own), scripts and styles left out."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "lxml")
    title = " ".join(soup.title.get_text(" ").split()) if soup.title else None
    parts = [element_text(el) for el in soup.select(selector)]
    return title or None, "\n".join(p for p in parts if p)


# trafilatura's options for the main text, also used by the quality test and the benchmark
MAIN_OPTIONS = {"include_comments": False}


def main_text(html: str) -> tuple[str | None, str]:
    """(title, text): the page's main content as trafilatura extracts it, one paragraph a
    line; menus, footers, comments and other boilerplate left out."""
    import trafilatura
    from trafilatura.utils import load_html

    tree = load_html(html)
    if tree is None:
        return None, ""
    title = tree.findtext(".//title")
    title = " ".join(title.split()) if title else None
    return title or None, trafilatura.extract(tree, **MAIN_OPTIONS) or ""


def page_text(html: str, selector: str = "p", extract: str = "selector"
              ) -> tuple[str | None, str]:
    """(title, text) of a page: ``extract="main"`` for the main content, ``"selector"`` (the
    default here; the job's default is main) for the text of the ``selector`` elements."""
    if extract == "main":
        return main_text(html)
    if extract == "selector":
        return selector_text(html, selector)
    raise ValueError(f"extract must be one of {EXTRACT_MODES}, got {extract!r}")


def _empty_reason(extract: str, selector: str) -> str:
    return "no main text found" if extract == "main" else f"no text in '{selector}' elements"


def parse_batches(extract: str = "main", selector: str = "p"):
    """``mapInPandas``: pages (doc_id, url, html) -> documents (title, text or error)."""
    if extract not in EXTRACT_MODES:
        raise ValueError(f"extract must be one of {EXTRACT_MODES}, got {extract!r}")

    def run(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for b in batches:
            rows = []
            for doc_id, url, html in zip(b["doc_id"], b["url"], b["html"], strict=True):
                try:
                    title, text = page_text(html, selector, extract)
                    err = None if text else _empty_reason(extract, selector)
                except Exception as exc:  # a page the parser cannot read is a reject, not a crash
                    title, text, err = None, None, f"parse error: {type(exc).__name__}: {exc}"
                rows.append((doc_id, url, title, text or None, err))
            yield pd.DataFrame(rows, columns=DOC_SCHEMA.names)

    return run


def parse_documents(pages: DataFrame, extract: str = "main", selector: str = "p") -> DataFrame:
    """Pages (doc_id, url, html) -> documents (DOC_SCHEMA), parsed in the Python workers."""
    return pages.select("doc_id", "url", "html").mapInPandas(
        in_worker(parse_batches(extract, selector)), DOC_SCHEMA)


def sentence_batches(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """``mapInPandas``: documents -> one row per sentence with its tokens."""
    for b in batches:
        rows = []
        for doc_id, url, text in zip(b["doc_id"], b["url"], b["text"], strict=True):
            for i, s in enumerate(sentences(text or "")):
                rows.append((doc_id, url, i, s, tokens(s)))
        yield pd.DataFrame(rows, columns=SENT_SCHEMA.names)
