"""An HTTP message body as stored in a web archive, back to the bytes its sender encoded.

* Chunked transfer coding (RFC 9112 §7.1) is undone with chunk extensions and a trailer
  section read and dropped, and the last CRLF optional (archives are often cut there). A body
  whose first line is no chunk size was stored de-chunked with its label kept, as crawlers do:
  it is taken as it is. A chunk that breaks after that is an error.
* Content codings (and transfer codings other than chunked) are undone in the reverse of the
  order they were applied (``Content-Encoding: deflate, gzip`` is gzip over deflate): gzip and
  its alias x-gzip (several members too), deflate (zlib-wrapped or raw, as servers send both),
  br (the ``brotli`` package of the ``text`` extra, or ``brotlicffi``) and zstd (where
  ``zstandard`` is installed). A body that does not start like its coding was stored decoded
  already, as warcio reads it; one that breaks after its start is an error.

Each step stops past ``max_bytes`` of output, so a small compressed body cannot fill memory.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable
from typing import Any

__all__ = ["BodyError", "coding_list", "decode_body", "dechunk"]

_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,16}[ \t]*(;[^\r\n]*)?\r?\n")
FEED = 1 << 16  # compressed bytes given to a decoder whose output is bounded
SMALL_FEED = 1024  # to one whose output is not: at most a few MB past the bound


class BodyError(Exception):
    """A body that cannot be decoded: ``reason`` (bad_payload, unsupported_encoding,
    too_large) and what exactly is wrong."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason, self.detail = reason, detail


def coding_list(*headers: str | None) -> list[str]:
    """The codings the header values name, in the order applied, lower case, without
    ``identity`` (``"gzip, GZIP"`` -> ``["gzip", "gzip"]``)."""
    names = [c.strip().lower() for h in headers if h for c in h.split(",")]
    return [c for c in names if c and c != "identity"]


def dechunk(raw: bytes) -> bytes:
    """The data of a chunked body (see the module's docstring)."""
    if _CHUNK_SIZE.match(raw) is None:  # de-chunked already
        return raw
    out, pos = [], 0
    while True:
        m = _CHUNK_SIZE.match(raw, pos)
        if m is None:
            where = "ends before its last chunk" if pos >= len(raw) else (
                f"has no chunk size at byte {pos}: {raw[pos:pos + 20]!r}")
            raise BodyError("bad_payload", f"broken chunked body: it {where}")
        size, start = int(m.group().split(b";")[0].strip(), 16), m.end()
        if size == 0:  # the last chunk: what follows is the trailer section
            return b"".join(out)
        end = start + size
        if len(raw) < end:
            raise BodyError("bad_payload", f"broken chunked body: a chunk of {size} bytes at "
                            f"byte {start} has {len(raw) - start}")
        tail = 2 if raw.startswith(b"\r\n", end) else 1 if raw.startswith(b"\n", end) else 0
        if not tail:
            raise BodyError("bad_payload", f"broken chunked body: the chunk at byte {start} "
                            f"does not end after its {size} bytes")
        out.append(raw[start:end])
        pos = end + tail


def decode_body(body: bytes, codings: list[str], max_bytes: int) -> bytes:
    """``body`` with ``codings`` (in the order applied) undone. An empty body is empty
    whatever its coding."""
    for coding in reversed(codings):
        if not body:
            break
        decoder = _DECODERS.get(coding)
        if decoder is None:
            raise BodyError("unsupported_encoding", f"no decoder for the coding {coding!r}")
        body = decoder(body, max_bytes, coding)
    return body


def _too_large(size: int, max_bytes: int, coding: str) -> None:
    if size > max_bytes:
        raise BodyError("too_large", f"payload over {max_bytes} bytes once {coding} is undone")


def _inflate(body: bytes, max_bytes: int, coding: str, wbits: int) -> tuple[bytes, Any]:
    """``body`` inflated (one zlib stream, or gzip member) and its inflater."""
    inflate, out, size = zlib.decompressobj(wbits), [], 0
    data = body
    while data and not inflate.eof:
        out.append(inflate.decompress(data, max_bytes + 1 - size))
        size += len(out[-1])
        _too_large(size, max_bytes, coding)
        data = inflate.unconsumed_tail
    return b"".join(out), inflate


def _gzip(body: bytes, max_bytes: int, coding: str) -> bytes:
    if not body.startswith(b"\x1f\x8b"):
        return body  # stored decoded already
    out, rest = [], body
    while rest.startswith(b"\x1f\x8b"):  # a member after another continues the body
        try:
            data, inflate = _inflate(rest, max_bytes - sum(map(len, out)), coding, 31)
        except zlib.error as exc:
            raise BodyError("bad_payload", f"broken {coding} body: {exc}") from None
        if not inflate.eof:
            raise BodyError("bad_payload", f"the {coding} body ends before its end")
        out.append(data)
        rest = inflate.unused_data
    return b"".join(out)


def _deflate(body: bytes, max_bytes: int, coding: str) -> bytes:
    for wbits in (15, -15):  # zlib-wrapped as HTTP says, else raw as many servers send it
        try:
            data, inflate = _inflate(body, max_bytes, coding, wbits)
        except zlib.error:
            continue
        if not inflate.eof:
            raise BodyError("bad_payload", f"the {coding} body ends before its end")
        return data
    return body  # neither: stored decoded already


def _brotli(body: bytes, max_bytes: int, coding: str) -> bytes:
    try:
        import brotli
    except ImportError:
        try:
            import brotlicffi as brotli
        except ImportError:
            raise BodyError("unsupported_encoding", "a br body, and neither brotli nor "
                            "brotlicffi is installed (the text extra installs brotli)") from None
    decoder, out, size = brotli.Decompressor(), [], 0
    limited = hasattr(decoder, "can_accept_more_data")  # brotli >= 1.2 bounds each output
    step = FEED if limited else SMALL_FEED
    try:
        for i in range(0, len(body), step):
            piece = body[i:i + step]
            while True:
                got = decoder.process(piece, output_buffer_limit=max_bytes + 1 - size) \
                    if limited else decoder.process(piece)
                out.append(got)
                size += len(got)
                _too_large(size, max_bytes, coding)
                piece = b""
                if not limited or decoder.can_accept_more_data():
                    break
    except brotli.error as exc:
        if not size:
            return body  # not brotli from its first byte: stored decoded already
        raise BodyError("bad_payload", f"broken {coding} body: {exc}") from None
    if not decoder.is_finished():
        raise BodyError("bad_payload", f"the {coding} body ends before its end")
    return b"".join(out)


def _zstd(body: bytes, max_bytes: int, coding: str) -> bytes:
    if not body.startswith(b"\x28\xb5\x2f\xfd"):
        return body  # stored decoded already
    try:
        import zstandard
    except ImportError:
        raise BodyError("unsupported_encoding", "a zstd body, and zstandard is not "
                        "installed") from None
    out, size, rest = [], 0, body
    try:
        while rest.startswith(b"\x28\xb5\x2f\xfd"):  # frame after frame
            decoder = zstandard.ZstdDecompressor().decompressobj()
            data = rest
            while data and not decoder.eof:
                got = decoder.decompress(data[:SMALL_FEED])
                data = data[SMALL_FEED:]
                out.append(got)
                size += len(got)
                _too_large(size, max_bytes, coding)
            if not decoder.eof:
                raise BodyError("bad_payload", f"the {coding} body ends before its end")
            rest = decoder.unused_data + data
    except zstandard.ZstdError as exc:
        raise BodyError("bad_payload", f"broken {coding} body: {exc}") from None
    return b"".join(out)


_DECODERS: dict[str, Callable[[bytes, int, str], bytes]] = {
    "gzip": _gzip, "x-gzip": _gzip, "deflate": _deflate, "br": _brotli, "zstd": _zstd}
