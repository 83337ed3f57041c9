"""Reading a WARC file from an offset: a stream that knows its position, the next place a
record may start, and why a rejected record failed when warcio does not say (a mandatory
header missing, the file cut short inside the record)."""

from __future__ import annotations

import io
import re
import zlib
from typing import Any

import pyarrow as pa

MAGICS = (b"\x1f\x8b\x08", b"WARC/1.")  # where a record may start: a gzip member, a header
CHUNK = 1 << 20


class Positioned(io.RawIOBase):
    """A forward-only stream that knows its offset in the file (warcio asks ``tell``): the
    bytes already read while looking for a record start come first."""

    def __init__(self, stream: Any, start: int, head: bytes = b""):
        self.stream, self.pos, self.head = stream, start, head

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def close(self) -> None:
        if not self.closed:
            self.stream.close()
        super().close()

    def read(self, size: int = -1) -> bytes:
        if self.head:
            n = len(self.head) if size is None or size < 0 else size
            out, self.head = self.head[:n], self.head[n:]
        else:
            out = self.stream.read() if size is None or size < 0 else self.stream.read(size)
        self.pos += len(out)
        return bytes(out)


def open_at(filesystem: Any, path: str, offset: int) -> Positioned:
    """The file streamed from ``offset``: a seek where the file system allows one, else the
    bytes before it are read and dropped."""
    try:
        file = filesystem.open_input_file(path)
    except (NotImplementedError, pa.ArrowNotImplementedError):
        file = None
    if file is not None:
        at = min(offset, file.size())  # past the end: nothing more to read, as when streamed
        file.seek(max(at, 0))  # before the start (an offset warcio counts back): the start
        return Positioned(pa.BufferedInputStream(file, CHUNK), at)
    stream = filesystem.open_input_stream(path, compression=None, buffer_size=CHUNK)
    left = offset
    while left > 0:
        got = stream.read(min(left, CHUNK))
        if not got:
            break
        left -= len(got)
    return Positioned(stream, offset - left)


def next_start(filesystem: Any, path: str, after: int) -> Positioned | None:
    """The file streamed from the first possible record start past ``after``, or None."""
    src = open_at(filesystem, path, after + 1)
    pos, tail = src.pos, b""
    while True:
        chunk = src.read(CHUNK)
        if not chunk:
            return None
        buf = tail + chunk
        hits = [i for i in (buf.find(m) for m in MAGICS) if i >= 0]
        if hits:
            i = min(hits)
            src.pos, src.head = pos + i, buf[i:]
            return src
        keep = min(len(buf), max(len(m) for m in MAGICS) - 1)
        pos, tail = pos + len(buf) - keep, buf[-keep:]


MANDATORY = ("WARC-Type", "WARC-Record-ID", "WARC-Date", "Content-Length")
TARGETED = ("response", "request", "revisit", "resource", "conversion")


def missing_header(filesystem: Any, path: str, offset: int) -> str | None:
    """Which mandatory header the record at ``offset`` lacks (warcio fails on such records
    without saying so), or None."""
    with open_at(filesystem, path, offset) as src:
        raw = src.read(1 << 16)
    if raw.startswith(b"\x1f\x8b"):
        try:
            raw = zlib.decompressobj(31).decompress(raw, 1 << 16)
        except zlib.error:
            return None
    lines = raw.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    if not lines[0].startswith("WARC/"):
        return None
    fields = {k.strip().lower(): v.strip() for k, _, v in
              (line.partition(":") for line in lines[1:])}
    wanted = MANDATORY + (("WARC-Target-URI",) if fields.get("warc-type") in TARGETED else ())
    lacking = [name for name in wanted if not fields.get(name.lower())]
    return f"no {', '.join(lacking)} header" if lacking else None


NOT_CUT = ("truncated", "empty", "too_many_errors", "unreadable", "too_large")
_CONTENT_LENGTH = re.compile(rb"(?im)^content-length:[ \t]*(\d+)[ \t]*\r?$")


def cut_short(filesystem: Any, path: str, offset: int, size: int) -> str | None:
    """How the file (``size`` bytes) ends inside the record that starts at ``offset``: in its
    gzip member, its headers or its block; None when it does not (or no record starts
    there)."""
    with open_at(filesystem, path, offset) as src:
        head = src.read(1 << 16)
        if not head:
            return None
        if head[:3] == MAGICS[0][:len(head)]:
            return member_cut(src, head)
        if head[:7] != MAGICS[1][:len(head)]:
            return None
        end = head.find(b"\r\n\r\n")
        if end < 0:
            return "the file ends inside the record's headers" if src.pos >= size else None
    length = _CONTENT_LENGTH.search(head, 0, end + 2)
    missing = end + 4 + int(length.group(1)) - (size - offset) if length else 0
    return (f"the file ends {missing} bytes before the end of the record's block "
            f"(Content-Length {length.group(1).decode()})") if missing > 0 else None


def member_cut(src: Positioned, head: bytes) -> str | None:
    """Whether the gzip member that starts with ``head`` (``src`` streams the rest) ends
    before the file does."""
    inflate, data = zlib.decompressobj(31), head
    try:
        while data and not inflate.eof:
            inflate.decompress(data, CHUNK)
            data = inflate.unconsumed_tail or (b"" if inflate.eof else src.read(CHUNK))
    except zlib.error:  # broken rather than cut short
        return None
    return None if inflate.eof else "the file ends inside the record's gzip member"
