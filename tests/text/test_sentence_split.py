"""The Punkt splitter of ``sentence_split`` gives exactly NLTK's sentences.

Every check compares :func:`sentences` with :func:`nltk_sentences` (the same paragraphs through
NLTK's own ``PunktSentenceTokenizer`` and the same English parameters): on the repo's text
fixtures, on generated lines full of the cases Punkt decides on, and on real books and pages
when the data sets are there (all 372 books in the ``heavy`` run)."""

from __future__ import annotations

import csv
import gzip
import json
import random
import tarfile
from pathlib import Path

import pytest
from punkt.data import english

from sparkfield.text.bag_of_words.normalise import nltk_sentences, sentences
from sparkfield.text.bag_of_words.parse import page_text
from sparkfield.text.bag_of_words.sentence_split import (
    OTHER_SPACES,
    PunktSplitter,
    english_splitter,
)

GUTENBERG = Path("corpus/gutenberg_rcdm_uga")
WIKIPEDIA = Path("corpus/wikipedia_uoi_2020_html.tar.xz")


def differing_lines(text: str) -> list[tuple[str, list[str], list[str]]]:
    """The lines of ``text`` whose sentences differ, with NLTK's and ours."""
    out = []
    if sentences(text) != nltk_sentences(text):
        for line in text.split("\n"):
            ours, theirs = sentences(line), nltk_sentences(line)
            if ours != theirs:
                out.append((line, theirs, ours))
    return out


def assert_same(texts, what: str) -> None:
    diffs = [d for text in texts for d in differing_lines(text)]
    shown = "\n".join(f"{line!r}\n  nltk: {theirs}\n  ours: {ours}"
                      for line, theirs, ours in diffs[:10])
    assert not diffs, f"{len(diffs)} lines of {what} split differently:\n{shown}"


def test_known_sentences():
    assert sentences("Dr. Smith arrived at 3 p.m. on Jan. 5. He left.") == [
        "Dr. Smith arrived at 3 p.m. on Jan. 5.", "He left."]
    assert sentences('He said "Stop." Then (he went.) Away?! No...  \tOK.\n\n  \n.') == [
        'He said "Stop."', "Then (he went.)", "Away?!", "No... OK.", "."]
    # NLTK's engine (``regex``) knows newer Unicode: a superscript is no initial, a Garay
    # digit (Unicode 16) is a number, as the standard library's ``re`` would not say
    assert sentences("x ². Smith went.") == ["x ².", "Smith went."]
    assert sentences("the \U00010d40. time came.") == ["the \U00010d40. time came."]
    assert sentences("the zz. time came.") == ["the zz.", "time came."]
    assert sentences("") == [] and sentences(" \n\t\r\n") == []
    assert english_splitter().split("") == [] and english_splitter().split("a") == ["a"]


def test_parameters_steer_the_decisions():
    plain = PunktSplitter([], [], [], {})
    assert plain.split("See Dr. Who.") == ["See Dr.", "Who."]
    assert PunktSplitter(["dr"], [], [], {}).split("See Dr. Who.") == ["See Dr. Who."]
    assert PunktSplitter(["dr"], [], ["who"], {}).split("See Dr. Who.") == ["See Dr.", "Who."]
    assert PunktSplitter([], [("dr", "who")], [], {}).split("See Dr. Who.") == ["See Dr. Who."]


def test_the_repos_text_fixtures(wiki_pages, fixtures_dir, repo_root):
    pages = [page_text(p.read_text())[1] for p in sorted(wiki_pages.glob("*.html"))]
    assert sum(len(sentences(p)) for p in pages) > 500
    with open(fixtures_dir / "olist" / "olist_order_reviews_dataset.csv", newline="") as f:
        reviews = [" ".join(r[k] or "" for k in r if k.startswith("review_comment"))
                   for r in csv.DictReader(f)]
    docs = [p.read_text() for p in sorted((repo_root / "docs").rglob("*.md"))]
    docs.append((fixtures_dir / "ATTRIBUTION.md").read_text())
    assert_same(pages + reviews + docs, "the fixtures")


WORDS = ["the", "house", "was", "red", "Smith", "London", "said", "and", "of", "it", "They",
         "new", "i", "I", "über", "Émile", "naïve", "ß", "İstanbul", "x", "a", "U.S.", "e.g.",
         "i.e.", "etc.", "vs.", "St.", "Mr.", "Mrs.", "No.", "no.", "Fig.", "pp.", "U.S.A.",
         "1st", "2nd", "3.", "12.", "3.14", "1,000.", "-5.", ".5", "1.2.3.", "1990s.", "4-5.",
         "J.", "R.", "é.", "Ö.", "_.", "²", "².", "𐵀.", "３.", "٣.", "..", "...", "....",
         ". . .", "…", "?", "!", "?!", "!!!", "?.", ".?", "--", "—", "-", ",", ";", ":", "(",
         ")", "[", "]", "{", "}", '"', "'", "‘", "’", "“", "”", "«", "»", "*", "@", "&", "#",
         "%", "/", "`", "semi-col.", "co-op.", "a-b.", "mid-dec.", "ALL", "CAPS."]
ENDINGS = [".", "?", "!", '."', ".)", ".'\"", '?"', '!)', ".]", ".}", ".’", ".”", ".»", ".'",
           '".', ").", ".--", "...", ".)\"", ".',", "?)'", ".:", ".;", ".*", ".@", "!?"]
SEPARATORS = [" "] * 12 + ["  ", "\t", "", " \u00a0", "\u2003", "\x1c", "\r"]


def tricky_lines(n: int, seed: int) -> list[str]:
    """Lines built from Punkt's hard cases: the parameters' abbreviations, collocations and
    sentence starters, initials, ordinals, ellipses, quotes and brackets after a mark."""
    rng = random.Random(seed)
    abbrevs = sorted(english.ABBREV_TYPES)
    collocations = sorted(english.COLLOCATIONS)
    starters = sorted(english.SENT_STARTERS)
    ortho = sorted(english.ORTHO_CONTEXT)

    def word() -> str:
        kind = rng.random()
        if kind < 0.35:
            return rng.choice(WORDS)
        if kind < 0.5:
            w = rng.choice(abbrevs) + "."
            return w.capitalize() if rng.random() < 0.4 else w
        if kind < 0.6:
            first, second = rng.choice(collocations)
            first = str(rng.randint(1, 99)) if first == "##number##" else first
            return f"{first}. {second.capitalize() if rng.random() < 0.5 else second}"
        if kind < 0.72:
            return rng.choice(starters).capitalize()
        if kind < 0.85:
            w = rng.choice(ortho)
            return w.capitalize() if rng.random() < 0.5 else w
        return rng.choice(WORDS).rstrip(".") + rng.choice(ENDINGS)

    lines = ["", " ", "\t", ".", "..", "?", "!", "...", ". .", '."', "( . )", "A.", "a. b"]
    while len(lines) < n:
        parts = [word() for _ in range(rng.randint(1, 25))]
        lines.append("".join(p + rng.choice(SEPARATORS) for p in parts))
    return lines


def test_generated_tricky_lines():
    lines = tricky_lines(600, seed=7)
    assert_same(lines, "the generated lines")
    assert_same(["\n".join(lines[i:i + 5]) for i in range(0, 600, 5)], "the generated texts")
    assert sum(len(sentences(line)) > 1 for line in lines) > 200  # many lines do split


def test_texts_of_many_lines():
    """Whole texts: lines with and without candidates, blank and whitespace-only lines,
    every line break NLTK's per-line loop sees (``\\r\\n``, runs of them)."""
    rng = random.Random(3)
    lines = tricky_lines(900, seed=5) + ["No mark here", "  x  ", "\u3000", "a\x1cb. C"]
    breaks = ["\n"] * 6 + ["\r\n", "\n\n", "\n \t\n", "\n\u2028\n", "\n\r\n\n"]
    texts = []
    for _ in range(150):
        chosen = rng.sample(lines, rng.randint(1, 12))
        text = "".join(line + rng.choice(breaks) for line in chosen)
        texts.append(text if rng.random() < 0.5 else text.rstrip())
    assert_same(texts, "the generated texts of many lines")


def test_the_other_whitespace_is_every_whitespace_of_str_split():
    spaces = {chr(c) for c in range(0x110000) if chr(c).isspace()}
    assert set(OTHER_SPACES) == spaces - {" ", "\n"} and len(OTHER_SPACES) == len(spaces) - 2


@pytest.mark.parametrize("params", ["english", "none", "collocation"])
def test_words_that_break_whatever_follows_do_break_before_anything(params):
    """The splitter remembers per word that a context starting with it holds a break; the
    full decision on the context must agree, whatever follows the mark."""
    splitter = {
        "english": PunktSplitter(english.ABBREV_TYPES, english.COLLOCATIONS,
                                 english.SENT_STARTERS, english.ORTHO_CONTEXT),
        "none": PunktSplitter([], [], [], {}),
        "collocation": PunktSplitter([], [("smith", "went"), ("##number##", "über")], [], {}),
    }[params]
    words = {w for line in tricky_lines(600, seed=11) for w in line.split() if w[-1] in ".?!"}
    words |= {"Smith.", "smith.", "12.", "3.", "J."}
    seconds = [second for _, second in english.COLLOCATIONS] + ["went", "über"]
    # what follows a mark in a context: a space and one token, or one non-word character
    after = [*(" " + w for w in WORDS + ["the", "The", "I", "7", "Who"] if " " not in w),
             *(" " + w for second in seconds for w in (second, second.capitalize())),
             *")\";}]*:@'({[\u2018\u2019\u201c\u201d\xab\xbb?!"]  # NLTK's non-word characters
    sure = [w for w in sorted(words) if splitter._breaks_whatever_follows(w)]
    assert 50 < len(sure) < len(words)
    wrong = [(w, a) for w in sure for a in after if not splitter.contains_break(w + a)]
    assert not wrong, f"{len(wrong)} contexts do not break, first: {wrong[:5]}"


def gutenberg_books(root: Path, limit: int | None = None):
    n = 0
    for part in sorted((root / GUTENBERG).glob("part-*.jsonl.gz")):
        with gzip.open(part, "rt", encoding="utf-8") as f:
            for line in f:
                if limit is not None and n >= limit:
                    return
                n += 1
                yield json.loads(line)["text"]


def test_30_gutenberg_books(shared_data):
    books = list(gutenberg_books(shared_data, 30))
    assert len(books) == 30
    assert_same(books, "30 Gutenberg books")


def test_50_wikipedia_pages(shared_data):
    pages = []
    with tarfile.open(shared_data / WIKIPEDIA, "r:*") as tar:
        for member in tar:
            if member.isfile() and member.name.endswith(".html"):
                pages.append(page_text(tar.extractfile(member).read().decode("utf-8"))[1])
                if len(pages) == 50:
                    break
    assert len(pages) == 50
    assert_same(pages, "50 Wikipedia pages")


@pytest.mark.heavy
def test_all_gutenberg_books_line_by_line(shared_data):
    n = 0
    diffs = []
    for book in gutenberg_books(shared_data):
        n += 1
        diffs.extend(differing_lines(book))
    assert n == 372
    assert not diffs, f"{len(diffs)} lines split differently, first: {diffs[:5]}"
