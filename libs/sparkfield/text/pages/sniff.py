"""What a body is when it is not HTML: an image, a PDF, an archive, binary data.

Signatures follow the WHATWG MIME Sniffing standard (the ones no text page starts with); the
binary check is its "binary data byte" rule over the resource header (the first 1445 bytes),
skipped when a byte-order mark says the body is UTF-16 or UTF-8 text. A body sent as HTML is
binary only where over 1 % of that header are such bytes: a stray control byte in a page is no
reason to drop it, a compressed or binary body has one in about ten.
"""

from __future__ import annotations

import mimetypes
import re

HEADER_BYTES = 1445
_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"\x00\x00\x01\x00", "image/x-icon"),
    (b"%PDF-", "application/pdf"),
    (b"%!PS-Adobe-", "application/postscript"),
    (b"PK\x03\x04", "application/zip"),
    (b"\x1f\x8b\x08", "application/gzip"),
    (b"Rar!\x1a\x07", "application/x-rar-compressed"),
    (b"7z\xbc\xaf\x27\x1c", "application/x-7z-compressed"),
    (b"OggS\x00", "application/ogg"),
    (b"ID3", "audio/mpeg"),
    (b"wOFF", "font/woff"),
    (b"wOF2", "font/woff2"),
    (b"\x28\xb5\x2f\xfd", "application/zstd"),
)
_RIFF = {b"WEBP": "image/webp", b"WAVE": "audio/wave", b"AVI ": "video/avi"}
_BINARY = re.compile(rb"[\x00-\x08\x0b\x0e-\x1a\x1c-\x1f]")
_TEXT_BOMS = (b"\xfe\xff", b"\xff\xfe", b"\xef\xbb\xbf")
# by a file's name: media and archives, never a page
_NOT_PAGES = ("image/", "audio/", "video/", "font/", "application/pdf", "application/zip",
              "application/gzip", "application/x-tar", "application/x-7z-compressed",
              "application/x-rar-compressed", "application/octet-stream")


def signature_type(raw: bytes) -> str | None:
    """The type a body's first bytes name (``image/png``, ...), or None."""
    for magic, kind in _SIGNATURES:
        if raw.startswith(magic):
            return kind
    if raw.startswith(b"RIFF") and raw[8:12] in _RIFF:
        return _RIFF[raw[8:12]]
    if raw[4:8] == b"ftyp":
        return "video/mp4"
    return None


def binary_share(raw: bytes) -> float:
    """The share of binary data bytes in the resource header (0 where a byte-order mark says
    the body is text)."""
    head = raw[:HEADER_BYTES]
    if not head or raw.startswith(_TEXT_BOMS):
        return 0.0
    return len(_BINARY.findall(head)) / len(head)


def sent_as_html_type(raw: bytes) -> str | None:
    """Why a body sent as HTML is not a page: its signature's type, or binary data (more than a
    stray control byte: see the module's docstring); None: it may be a page."""
    kind = signature_type(raw)
    if kind:
        return kind
    return "application/octet-stream (binary data)" if binary_share(raw) > 0.01 else None


def non_html_type(raw: bytes, name: str | None = None) -> str | None:
    """Why an untyped body (a saved file, a response without Content-Type) is not a page: its
    signature's type, ``application/octet-stream`` for binary data bytes, or (``name``
    given) the type of a media or archive file name, marked ``(by its name)``. None: it may
    be a page."""
    kind = signature_type(raw)
    if kind:
        return kind
    if not raw.startswith(_TEXT_BOMS) and _BINARY.search(raw[:HEADER_BYTES]):
        return "application/octet-stream"
    if name:
        guessed = mimetypes.guess_type(name, strict=False)[0] or ""
        if guessed.startswith(_NOT_PAGES):
            return f"{guessed} (by its name)"
    return None
