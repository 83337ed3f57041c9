"""Bytes of a page to text: a byte-order mark, then the HTTP charset, then the page's own
``<meta charset>`` / ``http-equiv`` declaration, then detection (bs4's ``UnicodeDammit``, which
tries strict UTF-8 before guessing). Bytes that do not decode become U+FFFD; the job counts
such pages in its report, and the pages whose charset was guessed.

Labels follow the HTML standard where it differs from Python's codecs: ``iso-8859-1``,
``latin1`` and ``us-ascii`` mean windows-1252.

A guess among the Latin-script code pages is a coin toss for a detector on a short page
(charset_normalizer takes French ``crème brûlée`` in windows-1252 for windows-1250, ``crčme
brűlée``): every such code page decodes those bytes to letters. There the HTML standard's
fallback, windows-1252, is kept unless it reads worse (see :func:`_oddities`).
"""

from __future__ import annotations

import codecs
import re
from typing import NamedTuple

REPLACEMENT = "\ufffd"
_META = re.compile(rb"""<meta\b[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)
_HEADER = re.compile(r"""charset\s*=\s*["']?\s*([^\s;"']+)""", re.I)
_WINDOWS_1252 = {"latin_1", "iso8859-1", "ascii", "cp1252"}
_BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"),
         (codecs.BOM_UTF16_BE, "utf-16"))
# single-byte code pages of Latin-script languages (Python's codec names)
_LATIN = frozenset({
    "cp1250", "cp1252", "cp1254", "cp1257", "cp1258", "iso8859-1", "iso8859-2", "iso8859-3",
    "iso8859-4", "iso8859-9", "iso8859-10", "iso8859-13", "iso8859-14", "iso8859-15",
    "iso8859-16", "mac-roman", "mac-latin2", "mac-iceland", "mac-turkish", "hp-roman8", "cp437",
    "cp775", "cp850", "cp852", "cp857", "cp858", "cp860", "cp861", "cp863", "cp865"})
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
_UTF_16 = ("utf-16", "utf-16-le", "utf-16-be")  # a declared UTF-16 is ignored, as the standard
SOURCES = ("bom", "http", "meta", "utf-8", "guess")  # where a page's charset came from


class Decoded(NamedTuple):
    text: str
    charset: str  # Python's codec name
    source: str  # one of SOURCES; "guess": neither declared nor valid UTF-8


def codec_name(label: str | None) -> str | None:
    """Python's codec for a charset label, or None when the label names no known codec."""
    if not label:
        return None
    try:
        name = codecs.lookup(label.strip().strip("\"'")).name
    except (LookupError, ValueError):
        return None
    return "cp1252" if name in _WINDOWS_1252 else name


def header_charset(value: str | None) -> str | None:
    """The charset label of a Content-Type header (``text/html; charset=ISO-8859-1``) or a
    bare label (``latin1``); None for a media type without one (``text/html``)."""
    if not value or not value.strip():
        return None
    m = _HEADER.search(value)
    if m:
        return m.group(1)
    return None if ("/" in value or ";" in value) else value.strip()


def meta_charset(raw: bytes, scan: int = 32768) -> str | None:
    """The charset a page declares in its first ``scan`` bytes (``<meta charset=...>`` or
    ``<meta http-equiv="Content-Type" content="...; charset=...">``), if any."""
    m = _META.search(raw[:scan])
    return m.group(1).decode("ascii") if m else None


def decode_html(raw: bytes, header_charset: str | None = None) -> str:
    """The text of a page (see :func:`decode_page`)."""
    return decode_page(raw, header_charset).text


def declared_codec(raw: bytes, header_charset: str | None = None) -> tuple[str, str] | None:
    """The codec :func:`decode_page` decodes a page with when it is not guessed (a byte-order
    mark, the HTTP charset, the page's own declaration) and where it came from, or None."""
    for bom, name in _BOMS:
        if raw.startswith(bom):
            return name, "bom"
    codec = codec_name(header_charset)
    if codec and codec not in _UTF_16:
        return codec, "http"
    codec = codec_name(meta_charset(raw))
    if codec and codec not in _UTF_16:
        return codec, "meta"
    return None


def decode_page(raw: bytes, header_charset: str | None = None) -> Decoded:
    """The text of a page, the codec and where it came from."""
    declared = declared_codec(raw, header_charset)
    if declared:
        codec, source = declared
        return Decoded(raw.decode(codec, errors="replace"), codec, source)
    from bs4 import UnicodeDammit

    dammit = UnicodeDammit(raw, user_encodings=["utf-8"], is_html=True)
    if dammit.unicode_markup is None:
        return Decoded(raw.decode("utf-8", errors="replace"), "utf-8", "guess")
    found = _lookup(dammit.original_encoding) or "utf-8"
    if found in ("utf-8", "ascii"):
        return Decoded(dammit.unicode_markup, "utf-8", "utf-8")
    if found == _lookup(dammit.declared_html_encoding):  # an <?xml encoding=...?>
        return Decoded(dammit.unicode_markup, found, "meta")
    if found in _LATIN and found != "cp1252":
        western = _strict(raw, "cp1252")
        if western is not None and _oddities(western) <= _oddities(dammit.unicode_markup):
            return Decoded(western, "cp1252", "guess")
    return Decoded(dammit.unicode_markup, found, "guess")


def _lookup(label: str | None) -> str | None:
    try:
        return codecs.lookup(label).name if label else None
    except LookupError:
        return None


def _strict(raw: bytes, codec: str) -> str | None:
    try:
        return raw.decode(codec)
    except UnicodeDecodeError:
        return None


def _oddities(text: str) -> int:
    """Characters a wrong Latin code page makes: C1 controls, and non-letters inside a word
    (windows-1252 reads Polish ``Zażółć`` in windows-1250 as ``Za¿ó³æ``)."""
    n, last = 0, len(text) - 1
    for m in _NON_ASCII.finditer(text):
        i, ch = m.start(), m.group()
        c1 = "\x80" <= ch <= "\x9f"
        inside = 0 < i < last and text[i - 1].isalpha() and text[i + 1].isalpha()
        n += int(c1 or (inside and not ch.isalpha()))
    return n
