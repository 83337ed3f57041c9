"""Page text in both extraction modes: inline markup never splits a word, block elements
separate text, and the main mode leaves boilerplate out."""

from __future__ import annotations

import pytest

from sparkfield.text.bag_of_words.normalise import tokens
from sparkfield.text.bag_of_words.parse import check_extract, element_text, page_text, parse_page

BODY = ("<p><span class=\"dropcap\">M</span>uch of the early work on the goddess "
        "Arte<a href=\"/wiki/Artemis\">mis</a> was done by <b>phil</b><i>ologists</i> who read "
        "the ancient sources closely, line by line, over many long years of study.</p>")
PAGE = ("<html><head><title> The  goddess </title><script>var x = 'nope';</script></head><body>"
        "<nav><ul><li>Home</li><li>About us</li></ul></nav><article><h1>Artemis</h1>"
        + BODY * 2 + "<p>Her temple at Ephesus<br>was one of the wonders of the world, visited "
        "by pilgrims from every city of Greece for centuries.</p></article>"
        "<footer><p>Cookie notice: we use cookies</p></footer></body></html>")


@pytest.mark.parametrize("extract", ["main", "selector"])
def test_inline_markup_never_splits_words(extract):
    title, text = page_text(PAGE, "article p", extract)
    assert title == "The goddess"
    toks = tokens(text)
    assert {"much", "artemis", "philologists"} <= set(toks)
    assert not {"m", "uch", "arte", "mis", "phil", "ologists"} & set(toks)
    # <br> separates: the two words stay apart
    assert "ephesuswas" not in toks and {"ephesus", "was"} <= set(toks)
    assert "nope" not in toks


def test_blocks_separate_and_whitespace_collapses():
    from bs4 import BeautifulSoup

    soup = BeautifulSoup("<div>one<div>two</div>three <b>fo</b>ur<p>five  \n six</p>"
                         "<!-- a comment --><style>p{}</style></div>", "lxml")
    assert element_text(soup.div) == "one\ntwo\nthree four\nfive six"


def test_main_mode_leaves_boilerplate_out_and_selector_mode_keeps_its_elements():
    _, main = page_text(PAGE, extract="main")
    assert "Cookie notice" not in main and "About us" not in main
    _, sel = page_text(PAGE, "p")
    assert "Cookie notice" in sel  # today's mode: every <p>, wherever it is


def test_pages_without_text_are_rejects_with_the_reason():
    empty = "<html><body><script>go()</script><img src=a.png></body></html>"
    assert parse_page(empty, "main", "p") == (None, None, "no main text found")
    _, text, error = parse_page(PAGE, "main", "p")
    assert error is None and "Artemis" in text
    assert [parse_page(h, "selector", "div.none")[2] for h in (empty, PAGE)] == [
        "no text in 'div.none' elements"] * 2
    assert parse_page(None, "main", "p") == (None, None, "no HTML")
    with pytest.raises(ValueError, match="extract must be one of"):
        check_extract("everything")
