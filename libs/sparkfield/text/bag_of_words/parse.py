"""HTML -> title and text (one page; :func:`sparkfield.text.bag_of_words.functions.html_to_text`
runs it on a DataFrame).

Two ways to the text: ``main`` (trafilatura: the main content, boilerplate left out) and
``selector`` (BeautifulSoup4 with lxml: the text of the elements a CSS selector matches).
"""

from __future__ import annotations

from pyspark.sql import types as T

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
    check_extract(extract)
    return selector_text(html, selector)


def check_extract(extract: str) -> None:
    if extract not in EXTRACT_MODES:
        raise ValueError(f"extract must be one of {EXTRACT_MODES}, got {extract!r}")


def _empty_reason(extract: str, selector: str) -> str:
    return "no main text found" if extract == "main" else f"no text in '{selector}' elements"


NO_HTML = "no HTML"


def parse_page(html: str | None, extract: str, selector: str
               ) -> tuple[str | None, str | None, str | None]:
    """(title, text, error) of a page: the text is None when there is none, and then the error
    says why (no HTML, no text found, or the parser's own error: a page the parser cannot read
    is a reject, not a crash)."""
    if html is None:
        return None, None, NO_HTML
    try:
        title, text = page_text(html, selector, extract)
    except Exception as exc:
        return None, None, f"parse error: {type(exc).__name__}: {exc}"
    return title, text or None, None if text else _empty_reason(extract, selector)
