import re

from sparkfield.core.stopwords import english_stopwords
from sparkfield.text.bag_of_words.normalise import sentences, tokens
from sparkfield.text.bag_of_words.parse import page_text


def test_token_rule_is_lowercase_then_python_word_runs():
    assert tokens("Héllo WÖRLD_x, 42-naïve café—ok ß") == [
        "héllo", "wörld_x", "42", "naïve", "café", "ok", "ß"]
    assert tokens("İ") == re.findall(r"\w+", "İ".lower())  # lower-casing first, as pinned
    assert tokens("") == [] and tokens("...") == []


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
