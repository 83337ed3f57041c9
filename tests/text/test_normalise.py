import random
import re

import pyarrow as pa

from sparkfield.core.stopwords import english_stopwords
from sparkfield.text.bag_of_words import functions
from sparkfield.text.bag_of_words.normalise import (
    document_tokens,
    sentences,
    text_chunks,
    token_arrays,
    tokens,
)
from sparkfield.text.bag_of_words.parse import page_text


def test_token_rule_is_lowercase_then_python_word_runs():
    assert tokens("Héllo WÖRLD_x, 42-naïve café—ok ß") == [
        "héllo", "wörld_x", "42", "naïve", "café", "ok", "ß"]
    assert tokens("İ") == re.findall(r"\w+", "İ".lower())  # lower-casing first, as pinned
    assert tokens("") == [] and tokens("...") == []


def _texts(seed: int, n: int) -> list[str]:
    """Short strings over every ASCII character, and over word and non-word characters
    whose Unicode lower-casing or class differs from ASCII's."""
    rnd = random.Random(seed)
    mixed = "aZ09_ .,-'!?\tİıßéÉ日\u0301ΣΩω½²\u2019\u201c\u2014\x0b\x1c"
    every_ascii = "".join(chr(i) for i in range(128))
    return [
        "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 30)))
        for alphabet in (mixed, every_ascii) for _ in range(n)
    ]


def test_token_arrays_are_the_token_rule_on_every_string():
    texts = ["Hello, World!", "", "   ", "__init__ x_1 2.5", "İstanbul ΟΔΟΣ’Α", "\x00a\x7fb",
             "The naïve CAFÉ's 42 cafés", *_texts(7, 3000)]
    assert token_arrays(pa.array(texts)).to_pylist() == [tokens(t) for t in texts]
    # a slice (an offset into shared buffers), an ASCII-only array, empty ones
    assert token_arrays(pa.array(texts).slice(5, 2000)).to_pylist() == [
        tokens(t) for t in texts[5:2005]]
    plain = [t for t in texts if t.isascii()]
    assert token_arrays(pa.array(plain)).to_pylist() == [tokens(t) for t in plain]
    assert token_arrays(pa.array(["", ""])).to_pylist() == [[], []]
    assert token_arrays(pa.array([], pa.string())).to_pylist() == []


def test_document_tokens_are_the_token_rule_on_whole_texts():
    """Each text is tokenised line by line (only lines with non-ASCII characters by the
    Unicode rule); the tokens are those of the whole text at once."""
    lines = _texts(11, 400)
    texts = ["\n".join(lines[i:i + 9]) for i in range(0, 800, 9)]
    texts += ["\r\n".join(lines[i:i + 4]) for i in range(0, 40, 4)]
    texts += [None, "", "\n", "\n\nword\n\n", "ΟΔΟΣ\nΣΑ ΑΣ\nΣ", "İ\ni\nİstanbul x_1",
              "end of line\nstart", "a" * 70_000 + "\nb"]
    want = [tokens(t) if t else [] for t in texts]
    assert document_tokens(pa.array(texts, pa.string())).to_pylist() == want
    assert document_tokens(pa.array(texts, pa.string()).slice(3, 50)).to_pylist() == want[3:53]
    assert document_tokens(pa.array([], pa.string())).to_pylist() == []
    assert any(not t.isascii() for t in texts if t) and any(t.isascii() for t in texts if t)


def test_text_chunks_cover_every_row_once_within_the_size():
    texts = pa.array(["ab", None, "cdef", "", "x" * 10, "gh", "ij", "k"], pa.string())
    chunks = list(text_chunks(texts, 6))
    assert chunks == [(0, 4), (4, 5), (5, 8)]  # a longer text alone; an empty one is free
    assert list(text_chunks(texts, 1 << 20)) == [(0, 8)]
    assert list(text_chunks(texts.slice(2, 3), 4)) == [(0, 2), (2, 3)]
    assert list(text_chunks(pa.array([], pa.string()), 6)) == []


def test_sentence_batches_are_split_then_tokens_in_order(monkeypatch):
    """The job's one Arrow pass (``sentence_token_rows``) gives the rows of split_sentences
    then tokenize, however its output is cut into batches."""
    docs = [("d1", "u1", "One sentence. Two: ‘quoted’ — İstanbul!\nThird line\n\n  "),
            ("d2", None, None), ("d3", "u3", ""), ("d4", "u4", "Dr. Smith left. He ran.")]
    docs += [(f"r{i}", f"u{i}", " ".join(_texts(i, 20))) for i in range(12)]
    want = [(d, u, i, s, tokens(s)) for d, u, t in docs if t
            for i, s in enumerate(sentences(t))]
    batch = pa.RecordBatch.from_arrays(
        [pa.array([r[k] for r in docs], pa.string()) for k in range(3)],
        names=["doc_id", "url", "text"])
    for limit in (1, 100, 1 << 20):
        monkeypatch.setattr(functions, "SENTENCE_BATCH_CHARS", limit)
        out = list(functions._sentence_batches(iter([batch, batch.slice(0, 0)])))
        rows = [tuple(r.values()) for b in out for r in b.to_pylist()]
        assert rows == want
        assert len(out) == 1 if limit == 1 << 20 else len(out) > 1


def test_punkt_splits_real_text_without_downloads(wiki_pages):
    _, text = page_text((wiki_pages / "Natural_language_processing.html").read_text())
    sents = sentences(text)
    assert len(sents) > 40
    # abbreviations and decimals stay inside a sentence
    joined = " ".join(sents)
    assert all(not s.endswith((" e.g.", " i.e.", " Dr.")) for s in sents)
    assert "natural language processing" in joined.lower()
    assert sentences("Dr. Smith arrived at 3 p.m. on Jan. 5. He left.") == [
        "Dr. Smith arrived at 3 p.m. on Jan. 5.", "He left."]


def test_page_text_drops_scripts_and_keeps_the_title():
    html = ("<html><head><title>T</title><style>p{}</style></head><body><p>One <b>two</b>."
            "<script>var x = 'p';</script></p><div>skip</div><p>Three.</p></body></html>")
    assert page_text(html) == ("T", "One two.\nThree.")  # inline markup adds no space
    assert page_text(html, "div") == ("T", "skip")


def test_english_stopwords_are_nltks_list():
    words = english_stopwords()
    assert len(words) == 179 and "the" in words and "wouldn't" in words
