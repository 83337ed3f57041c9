"""The records of a WARC file cut out exactly, for the fast path of
:mod:`sparkfield.text.warc.read`.

A record is framed here only when it has the shape every well-formed archive has:

* it starts with a ``WARC/1.0`` or ``WARC/1.1`` line, its headers end at the first empty line
  (CRLF CRLF) and warcio's header parser reads exactly those lines;
* its Content-Length is plain digits, at most ``max_block``, and its block is followed by exactly
  CRLF CRLF;
* uncompressed, the next record starts right there (or the file ends); per-record gzip, the
  record is the whole content of its gzip member and the next member starts right after it.

A record is handed over (:class:`Frame`) only once the start of the next one is checked too. At
the first record outside that shape the framing stops and returns the offset of the first record
not handed over, which starts with a ``WARC/1.x`` line (or is the start of the file): warcio's
reader goes on from there and meets what is wrong as if it had read the whole file.

Gzip members are inflated whole, each by a fresh inflater that says where its member ends
(``unused_data``): ISA-L's (the ``isal`` package, about two and a half times zlib's speed) when
it is installed, else zlib's. Both check each member's CRC and length.
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from warcio.recordloader import ArcWarcRecordLoader
from warcio.statusandheaders import StatusAndHeaders, StatusAndHeadersParser

__all__ = ["Frame", "frames", "inflater", "plain_headers"]

WARC_LINES = (b"WARC/1.0\r\n", b"WARC/1.1\r\n")
GZIP_MAGIC = b"\x1f\x8b\x08"
END = b"\r\n\r\n"
MAX_HEADER = 1 << 16  # a WARC header longer than this is left to warcio
RAW_CHUNK = 1 << 20  # bytes read from the file at a time
FEED = 1 << 16  # compressed bytes given to an inflater at a time
_PARSER = StatusAndHeadersParser(ArcWarcRecordLoader.WARC_TYPES)
# the bytes of a header block whose lines warcio's parser reads as plain ASCII lines ending in
# CRLF: anything else (other bytes, a bare CR or LF, a continuation line) is left to that parser
_PLAIN_BYTES = bytes(range(0x20, 0x7F)) + b"\t\r\n"


@functools.cache
def inflater() -> Any:
    """The module whose ``decompressobj`` inflates gzip members: ``isal.isal_zlib`` where it
    is installed, else ``zlib``."""
    try:
        from isal import isal_zlib
    except ImportError:
        return zlib
    return isal_zlib


@dataclass(slots=True)
class Frame:
    """One record: where it starts in the file, its WARC headers, and its block:
    ``data[start:start + length]``."""

    offset: int
    headers: StatusAndHeaders
    data: bytes
    start: int
    length: int


class _Stop(Exception):  # noqa: N818 (control flow: the framing ends here)
    pass


class _Lines:
    """``readline`` over a byte range, for warcio's header parser."""

    __slots__ = ("data", "end", "pos")

    def __init__(self, data: bytes, pos: int, end: int):
        self.data, self.pos, self.end = data, pos, end

    def readline(self, size: int | None = None) -> bytes:
        stop = self.end if size is None or size < 0 else min(self.end, self.pos + size)
        nl = self.data.find(b"\n", self.pos, stop)
        j = stop if nl < 0 else nl + 1
        out, self.pos = self.data[self.pos:j], j
        return out


def plain_headers(data: bytes, start: int, end: int, warc: bool) -> StatusAndHeaders | None:
    """The status line and headers in ``data[start:end]`` (which ends with CRLF CRLF) as
    warcio's parser reads them (WARC headers, or HTTP ones: ``warc`` False), where they are
    plain ASCII lines; None for any other block (warcio's parser reads it)."""
    block = data[start:end - 2]
    crlf = block.count(b"\r\n")
    if block.translate(None, _PLAIN_BYTES) or block.count(b"\r") != crlf \
            or block.count(b"\n") != crlf or b"\n " in block or b"\n\t" in block:
        return None
    lines = data[start:end - 4].decode("ascii").split("\r\n")
    statusline = lines[0].rstrip()
    if not statusline:
        return None
    if warc:
        protocol_status = StatusAndHeadersParser.split_prefix(statusline, _PARSER.statuslist)
        if not protocol_status:
            return None
    else:
        protocol_status = statusline.split(" ", 1)
    headers = []
    for line in lines[1:]:  # as StatusAndHeadersParser.parse, continuation lines aside
        result = line.rstrip().split(":", 1)
        if len(result) == 2:
            headers.append((result[0].rstrip(" \t"), result[1].lstrip()))
    parsed = StatusAndHeaders(statusline=protocol_status[1].strip() if len(protocol_status) > 1
                              else "", headers=[], protocol=protocol_status[0],
                              total_len=end - start)
    parsed.headers = headers  # str pairs already: what the constructor's conversion would give
    return parsed


def _headers(data: bytes, start: int, end: int) -> tuple[StatusAndHeaders, int]:
    """The WARC headers in ``data[start:end]`` (which ends with CRLF CRLF) and the
    Content-Length; _Stop unless warcio's parser reads exactly these lines and the length is
    plain digits."""
    headers = plain_headers(data, start, end, warc=True)
    if headers is None:
        lines = _Lines(data, start, end)
        try:
            headers = _PARSER.parse(lines)
        except Exception:
            raise _Stop from None
        if lines.pos != end:  # a blank-looking line ends warcio's headers earlier
            raise _Stop
    length = headers.get_header("Content-Length")
    if not length or not (length.isascii() and length.isdigit()):
        raise _Stop
    return headers, int(length)


def frames(stream: Any, max_block: int) -> Generator[Frame, None, int | None]:
    """The records of a file (``stream`` read from its start), then None when all of it was
    framed, or the offset warcio's reader goes on from."""
    src = _Buffer(stream)
    if src.have(2) and src.buf[:2] == GZIP_MAGIC[:2]:
        return (yield from _gzip_frames(src, max_block, inflater()))
    return (yield from _plain_frames(src, max_block))


class _Buffer:
    """The file read forward in large chunks: ``buf[i]`` is at file offset ``base + i`` (the
    bytes before ``i`` are dropped when more are read)."""

    __slots__ = ("base", "buf", "eof", "i", "stream")

    def __init__(self, stream: Any):
        self.stream, self.buf, self.base, self.i, self.eof = stream, b"", 0, 0, False

    def have(self, n: int) -> bool:
        """Whether ``n`` bytes from ``i`` on are at hand, reading more when needed."""
        while len(self.buf) - self.i < n and not self.eof:
            chunk = self.stream.read(max(RAW_CHUNK, n - (len(self.buf) - self.i)))
            if not chunk:
                self.eof = True
                break
            self.base, self.buf, self.i = self.base + self.i, self.buf[self.i:] + chunk, 0
        return len(self.buf) - self.i >= n


def _plain_frames(src: _Buffer, max_block: int) -> Generator[Frame, None, int | None]:
    pending: Frame | None = None
    resume = 0
    try:
        while True:
            if not src.have(len(WARC_LINES[0])):
                if len(src.buf) > src.i:  # a few bytes that are no record
                    return resume
                if pending is not None:
                    yield pending
                return None
            if src.buf[src.i:src.i + 10] not in WARC_LINES:
                return resume
            start = src.base + src.i
            if pending is not None:
                yield pending
            pending, resume = None, start
            cut, size = -1, 1024
            while cut < 0:
                more = src.have(size)
                cut = src.buf.find(END, src.i, src.i + size)
                if cut < 0 and (not more or size >= MAX_HEADER):
                    return resume
                size *= 4
            head = cut + 4 - src.i
            headers, length = _headers(src.buf, src.i, cut + 4)
            total = head + length + 4
            if length > max_block or not src.have(total) \
                    or src.buf[src.i + total - 4:src.i + total] != END:
                return resume
            pending = Frame(start, headers, src.buf, src.i + head, length)
            src.i += total
    except Exception:  # _Stop; anything else: warcio's to say
        return resume


def _gzip_frames(src: _Buffer, max_block: int, module: Any) -> Generator[
        Frame, None, int | None]:
    limit = MAX_HEADER + max_block + 4  # the most a member worth framing inflates to
    pending: Frame | None = None
    resume = 0
    try:
        while True:
            if not src.have(1):
                if pending is not None:
                    yield pending
                    return None
                return resume
            start = src.base + src.i
            # a gzip member (deflate), without flags that only some inflaters refuse
            if not src.have(10) or src.buf[src.i:src.i + 3] != GZIP_MAGIC \
                    or src.buf[src.i + 3] & 0xE0:
                return resume
            data, used = _member(src, module, limit)
            if data[:10] not in WARC_LINES:
                return resume
            if pending is not None:
                yield pending
            pending, resume = None, start
            cut = data.find(END, 0, MAX_HEADER)
            if cut < 0:
                return resume
            headers, length = _headers(data, 0, cut + 4)
            total = cut + 8 + length
            if length > max_block or len(data) != total or data[total - 4:] != END:
                return resume
            pending = Frame(start, headers, data, cut + 4, length)
            src.i += used
    except Exception:  # _Stop; anything else: warcio's to say
        return resume


def _member(src: _Buffer, module: Any, limit: int) -> tuple[bytes, int]:
    """The content of the gzip member at ``src.i`` and its compressed size; _Stop when it is
    broken, cut short or inflates to more than ``limit`` bytes."""
    inflate, out, size, k = module.decompressobj(31), [], 0, 0
    while not inflate.eof:
        if not src.have(k + 1):
            raise _Stop  # cut short
        piece = memoryview(src.buf)[src.i + k:src.i + k + FEED]
        out.append(inflate.decompress(piece, limit + 1 - size))
        size += len(out[-1])
        if size > limit or inflate.unconsumed_tail:
            raise _Stop
        k += len(piece)
    return b"".join(out), k - len(inflate.unused_data)
