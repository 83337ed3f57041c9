"""Bytes of a page to text: a byte-order mark, then the HTTP charset, then the page's own
``<meta charset>`` / ``http-equiv`` declaration, then detection (bs4's ``UnicodeDammit``, which
tries strict UTF-8 before guessing). Bytes that do not decode become U+FFFD; the job counts
such pages in its report.

Labels follow the HTML standard where it differs from Python's codecs: ``iso-8859-1``,
``latin1`` and ``us-ascii`` mean windows-1252.
"""

from __future__ import annotations

import codecs
import re

REPLACEMENT = "\ufffd"
_META = re.compile(rb"""<meta\b[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)
_WINDOWS_1252 = {"latin_1", "iso8859-1", "ascii", "cp1252"}
_BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"),
         (codecs.BOM_UTF16_BE, "utf-16"))


def codec_name(label: str | None) -> str | None:
    """Python's codec for a charset label, or None when the label names no known codec."""
    if not label:
        return None
    try:
        name = codecs.lookup(label.strip().strip("\"'")).name
    except (LookupError, ValueError):
        return None
    return "cp1252" if name in _WINDOWS_1252 else name


def meta_charset(raw: bytes, scan: int = 32768) -> str | None:
    """The charset a page declares in its first ``scan`` bytes (``<meta charset=...>`` or
    ``<meta http-equiv="Content-Type" content="...; charset=...">``), if any."""
    m = _META.search(raw[:scan])
    return m.group(1).decode("ascii") if m else None


def decode_html(raw: bytes, header_charset: str | None = None) -> str:
    for bom, name in _BOMS:
        if raw.startswith(bom):
            return raw.decode(name, errors="replace")
    for label in (header_charset, meta_charset(raw)):
        codec = codec_name(label)
        if codec and codec not in ("utf-16", "utf-16-le", "utf-16-be"):  # as the standard
            return raw.decode(codec, errors="replace")
    from bs4 import UnicodeDammit

    dammit = UnicodeDammit(raw, user_encodings=["utf-8"], is_html=True)
    if dammit.unicode_markup is None:
        return raw.decode("utf-8", errors="replace")
    return dammit.unicode_markup
