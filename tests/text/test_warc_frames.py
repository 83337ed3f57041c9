"""The WARC reader's two paths give the same rows: records framed exactly (warc_frames, gzip
members inflated by ISA-L or zlib) and records read by warcio's ArchiveIterator, on the broken
archives of test_warc, on real pages, on records of every kind and odd shape, and on archives
cut short or with a byte changed anywhere. No Spark: the executors' function is called here."""

from __future__ import annotations

import gzip
import io
import random
import struct
import zlib
from pathlib import Path

import pyarrow as pa
import pytest
from pyarrow import fs
from pyspark.sql.pandas.types import to_arrow_schema
from warcio.recordloader import ArcWarcRecordLoader
from warcio.statusandheaders import StatusAndHeaders, StatusAndHeadersParser
from warcio.warcwriter import WARCWriter

from sparkfield.text.pages.charset import decode_page
from sparkfield.text.warc import records as warc_frames
from sparkfield.text.warc.read import RECORDS_SCHEMA, _batch, _decoded, _file_rows, _text_column
from sparkfield.text.warc.records import frames, plain_headers
from tests.conftest import WIKI_PAGES
from tests.text.test_warc import _torture_files

SCHEMA = to_arrow_schema(RECORDS_SCHEMA)
LOCAL = fs.LocalFileSystem()
DATE = b"2024-05-01T12:00:00Z"


@pytest.fixture(params=["isal", "zlib"])
def inflater(request, monkeypatch):
    """Each test once with each inflater of gzip members."""
    if request.param == "zlib":
        monkeypatch.setattr(warc_frames, "inflater", lambda: zlib)
    else:
        pytest.importorskip("isal")
    return request.param


def _rows(path: Path, framed: bool, max_bytes: int = 5_000_000) -> list[dict]:
    return _batch(list(_file_rows(LOCAL, str(path), max_bytes, framed)), SCHEMA).to_pylist()


def _same_rows(path: Path, max_bytes: int = 5_000_000, case: str = "") -> list[dict]:
    fast, slow = _rows(path, True, max_bytes), _rows(path, False, max_bytes)
    assert len(fast) == len(slow), (path.name, case, fast, slow)
    for a, b in zip(fast, slow, strict=True):
        assert a == b, (path.name, case)
    return fast


def _framed_all(path: Path) -> int:
    """How many records the framing hands over; asserts it read the whole file."""
    found = frames(LOCAL.open_input_stream(str(path), compression=None), 10_000_000)
    n = 0
    while True:
        try:
            next(found)
        except StopIteration as done:
            assert done.value is None, (path.name, done.value)
            return n
        n += 1


# ---- records written by hand --------------------------------------------------------------

def _record(block: bytes, headers: list[tuple[str, str]] | None = None, kind: str = "response",
            uri: str | None = "http://site.example/p", version: bytes = b"WARC/1.0",
            length: str | None = None, tail: bytes = b"\r\n\r\n", raw: bytes = b"") -> bytes:
    """One record's bytes: its WARC headers (``headers`` replace or add some; None: without
    it), extra raw header lines, its block, its tail."""
    fields = {"WARC-Type": kind, "WARC-Record-ID": f"<urn:uuid:{len(block):08x}-{kind}>",
              "WARC-Date": DATE.decode(), "WARC-Target-URI": uri}
    fields.update(headers or [])
    fields["Content-Length"] = str(len(block)) if length is None else length
    head = b"".join(f"{k}: {v}\r\n".encode() for k, v in fields.items() if v is not None)
    return version + b"\r\n" + head + raw + b"\r\n" + block + tail


def _http(body: bytes, ctype: str | None = "text/html; charset=utf-8", status: bytes = b"200 OK",
          extra: bytes = b"") -> bytes:
    head = b"HTTP/1.1 " + status + b"\r\n"
    if ctype is not None:
        head += b"Content-Type: " + ctype.encode("latin-1") + b"\r\n"
    return head + extra + b"\r\n" + body


def _chunks(*parts: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


PAGE = "<html><head><title>Crème</title></head><body><p>Naïve café — über</p></body></html>"
GOOD = [
    _record(b"software: test\r\n", kind="warcinfo", uri=None,
            headers=[("Content-Type", "application/warc-fields")]),
    _record(b"GET /p HTTP/1.1\r\nHost: site.example\r\n\r\n", kind="request",
            headers=[("Content-Type", "application/http; msgtype=request")]),
    _record(_http(PAGE.encode())),
    _record(_http(PAGE.encode("cp1252"), "text/html; charset=ISO-8859-1")),
    _record(_http(b'<html><head><meta charset="utf-8"></head><p>' + "é".encode() + b"</p>",
                  "text/html")),
    _record(_http("<p>détecté</p>".encode("cp1250"), "text/html")),
    _record(_http(b"<p>broken \xff\xfe utf-8 \xc3</p>")),
    _record(_http(b"\xef\xbb\xbf<p>bom</p>")),
    _record(_http(b"<p>utf-16 declared</p>", "text/html; charset=utf-16")),
    _record(_http(b"<html>gone</html>", status=b"404 Not Found")),
    _record(_http(b"<html>moved</html>", status=b"301 Moved Permanently")),
    _record(_http(b"\x89PNG\r\n\x1a\n....", "image/png")),
    _record(_http(b"\x89PNG\r\n\x1a\n....", "text/html")),
    _record(_http(_chunks(b"<p>chunked ", b"page</p>"), "text/html",
                  extra=b"Transfer-Encoding: chunked\r\n")),
    _record(_http(gzip.compress(b"<p>gzipped page</p>"), extra=b"Content-Encoding: gzip\r\n")),
    _record(_http(_chunks(gzip.compress(b"<p>chunked gzip</p>")),
                  extra=b"Transfer-Encoding: chunked\r\nContent-Encoding: gzip\r\n")),
    _record(_http(b"zz\r\nnot a chunk\r\n", extra=b"Transfer-Encoding: chunked\r\n")),
    _record(_http(gzip.compress(b"<p>cut</p>")[:-12], extra=b"Content-Encoding: gzip\r\n")),
    _record(_http(b"<p>latin-1 header</p>",
                  extra=b"X-Name: caf\xe9\r\nSet-Cookie: \xc3\xa9=1\r\n")),
    _record(_http(b"<p>folded</p>", extra=b"X-Folded: one\r\n  two\r\n\tthree\r\n")),
    _record(_http(b"<p>odd lines</p>", extra=b"no colon here\r\nX-Space : v \r\n:empty\r\n")),
    _record(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-No-End: 1"),
    _record(_http(b"<p>no reason</p>", status=b"200")),
    _record(_http(b"<p>bad status</p>", status=b"abc")),
    _record(b"ICY 200 OK\r\nContent-Type: text/html\r\n\r\n<p>icy</p>"),
    _record(b"\r\n<p>starts blank</p>"),
    _record(b"20240501 site.example 1.2.3.4", uri="dns:site.example",
            headers=[("Content-Type", "text/dns")]),
    _record(_http(b"<p>angled</p>"), uri="<http://site.example/angled>"),
    _record(_http(b"<p>spaced</p>"), uri="http://site.example/a b"),
    _record(_http(b"<p>https</p>"), uri="HTTPS://SITE.EXAMPLE/upper"),
    _record(_http(b"<p>no date</p>"), headers=[("WARC-Date", None)]),
    _record(_http(b"<p>bad date</p>"), headers=[("WARC-Date", "yesterday")]),
    _record(b"", headers=[]),
    _record(_http(b""), kind="revisit",
            headers=[("WARC-Profile", "http://netpreserve.org/warc/1.0/revisit/identical")]),
    _record(b"", kind="revisit"),
    _record(b"via: test\r\n", kind="metadata",
            headers=[("Content-Type", "application/warc-fields")]),
    _record(b"<html>resource</html>", kind="resource", headers=[("Content-Type", "text/html")]),
    _record(PAGE.encode(), kind="conversion", headers=[("Content-Type", "text/plain")]),
    _record(PAGE.encode("cp1252"), kind="conversion",
            headers=[("Content-Type", "text/plain; charset=windows-1252")]),
    _record(_http(PAGE.encode()), version=b"WARC/1.1"),
    _record(_http(PAGE.encode()), headers=[("X-Continued", "a\r\n continued\r\n\tagain")]),
    _record(_http(PAGE.encode()), raw=b"Header-Without-Colon\r\nWARC-Type: second\r\n"),
    _record(_http(b"<p>\xe9t\xe9 header</p>"), headers=[("X-Caf\xe9", "\xe9")]),
    _record(_http(b"<p>\x00\x01 controls</p>")),
    _record(_http(("<p>" + "big page " * 20000 + "</p>").encode())),
    _record(b"no type at all", kind=None),
]


def _file(folder: Path, name: str, records: list[bytes], gz: bool) -> Path:
    path = folder / name
    path.write_bytes(b"".join(gzip.compress(r) if gz else r for r in records))
    return path


def test_records_of_every_kind_give_the_same_rows(tmp_path, inflater):
    for gz in (False, True):
        path = _file(tmp_path, f"good.warc{'.gz' if gz else ''}", GOOD, gz)
        rows = _same_rows(path)
        assert _framed_all(path) == len(GOOD)
        assert sum(r["kind"] == "page" for r in rows) >= 15
        assert {r["reason"] for r in rows if r["kind"] == "reject"} >= {
            "not_html", "bad_payload", "missing_header", "bad_header", "not_http"}
    small = _same_rows(path, max_bytes=1000)  # pages over max_bytes are rejects (too_large)
    assert any(r["reason"] == "too_large" for r in small)


ODD = {  # records the framing leaves to warcio (it goes on from them)
    "blank-looking header line": _record(_http(b"<p>x</p>"), raw=b"  \r\n"),
    "warc 0.18": _record(_http(b"<p>x</p>"), version=b"WARC/0.18"),
    "lower-case version": _record(_http(b"<p>x</p>"), version=b"warc/1.0"),
    "bare LF": _record(_http(b"<p>x</p>")).replace(b"\r\nWARC-Date", b"\nWARC-Date"),
    "plus length": _record(_http(b"<p>x</p>"), length="+" + str(len(_http(b"<p>x</p>")))),
    "spaced length": _record(_http(b"<p>x</p>"), length=f" {len(_http(b'<p>x</p>'))} "),
    "no length": _record(_http(b"<p>x</p>")).replace(b"Content-Length: ", b"X-Length: "),
    "bad length": _record(_http(b"<p>x</p>"), length="ten"),
    "long length": _record(_http(b"<p>x</p>"), length="9999"),
    "short length": _record(_http(b"<p>x</p>"), length="5"),
    "continued length": _record(_http(b"<p>x</p>"), raw=b" continued\r\n"),
    "two lengths": _record(_http(b"<p>x</p>"), raw=b"Content-Length: 3\r\n"),
    "no tail": _record(_http(b"<p>x</p>"), tail=b""),
    "LF tail": _record(_http(b"<p>x</p>"), tail=b"\n\n"),
    "long tail": _record(_http(b"<p>x</p>"), tail=b"\r\n\r\n\r\n"),
    "junk after": _record(_http(b"<p>x</p>")) + b"junk\r\n",
    "no target": _record(_http(b"<p>x</p>"), uri=None),
    "empty target": _record(_http(b"<p>x</p>"), uri=""),
    "huge block": _record(_http(b"<p>" + b"x" * 4_000_000 + b"</p>")),
    "arc line": b"http://site.example/ 1.2.3.4 20240501120000 text/html 10\n0123456789\n",
}


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_odd_records_are_left_to_warcio_with_the_same_rows(tmp_path, inflater, gz):
    for k, (name, odd) in enumerate(ODD.items()):
        path = _file(tmp_path, f"odd{k}.warc{'.gz' if gz else ''}", [*GOOD[:4], odd, *GOOD[4:8]],
                     gz)
        _same_rows(path, max_bytes=2_000_000, case=name)  # "huge block": over the framed size


def test_odd_gzip_members(tmp_path, inflater):
    members = [gzip.compress(r) for r in GOOD[:6]]
    whole = gzip.compress(b"".join(GOOD[6:9]))
    flagged = bytearray(members[1])
    flagged[3] |= 0x20  # a reserved flag: zlib refuses the member, ISA-L would not
    hcrc = bytearray(members[2][:10])
    hcrc[3] |= 2  # a header CRC
    hcrc += struct.pack("<H", zlib.crc32(bytes(hcrc)) & 0xFFFF) + members[2][10:]
    named = io.BytesIO()
    with gzip.GzipFile(filename="record.warc", mode="wb", fileobj=named, mtime=0) as out:
        out.write(GOOD[2])  # a member with a file name in its header (FNAME)
    cases = {
        "named member": [*members[:2], named.getvalue(), *members[3:]],
        "empty member": [members[0], gzip.compress(b""), *members[1:]],
        "two records a member": [members[0], gzip.compress(GOOD[1] + GOOD[2]), *members[3:]],
        "whole file one member": [whole],
        "reserved flag": [members[0], bytes(flagged), *members[2:]],
        "header crc": [*members[:2], bytes(hcrc), *members[3:]],
        "no trailer at the end": [*members[:5], members[5][:-8]],
        "half a trailer": [*members[:5], members[5][:-3]],
        "bad crc": [members[0], members[1][:-8] + b"\0\0\0\0" + members[1][-4:], *members[2:]],
        "junk between": [*members[:3], b"junk", *members[3:]],
        "zeros at the end": [*members, b"\0" * 16],
        "plain record after": [*members[:3], GOOD[3]],
        "gzip record after plain": [GOOD[0], *members[1:]],
        "blank lines in member": [members[0], gzip.compress(GOOD[1] + b"\r\n"), *members[2:]],
    }
    for k, (name, parts) in enumerate(cases.items()):
        path = tmp_path / f"case{k}.warc.gz"
        path.write_bytes(b"".join(parts))
        _same_rows(path, case=name)
        if name in ("named member", "header crc"):
            assert _framed_all(path) == 6, name


# ---- archives cut short, and with a byte changed ------------------------------------------

def _small_archive(gz: bool) -> bytes:
    return b"".join(gzip.compress(r) if gz else r for r in (GOOD[0], GOOD[1], GOOD[2], GOOD[9],
                                                             GOOD[13], GOOD[26], GOOD[37]))


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_archives_cut_anywhere_give_the_same_rows(tmp_path, inflater, gz):
    data = _small_archive(gz)
    path = tmp_path / ("cut.warc.gz" if gz else "cut.warc")
    for end in range(0, len(data), 23 if gz else 31):
        path.write_bytes(data[:end])
        _same_rows(path, case=f"cut at {end}")


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_archives_with_a_changed_byte_give_the_same_rows(tmp_path, inflater, gz):
    data = _small_archive(gz)
    path = tmp_path / ("flip.warc.gz" if gz else "flip.warc")
    rng = random.Random(7)
    for _ in range(150):
        changed = bytearray(data)
        at = rng.randrange(len(data))
        changed[at] = rng.choice([changed[at] ^ 1 << rng.randrange(8), 0x0A, 0x0D, 0x20, 0x30])
        path.write_bytes(bytes(changed))
        _same_rows(path, case=f"byte {at}: {changed[at]:#x}")


# ---- the broken archives of test_warc, and real pages -------------------------------------

def test_the_broken_archives_give_the_same_rows(tmp_path, inflater):
    for name in _torture_files(tmp_path):
        _same_rows(tmp_path / name)


def test_real_pages_are_framed_and_give_the_same_rows(tmp_path, wiki_pages, inflater):
    for gz in (False, True):
        buf = io.BytesIO()
        writer = WARCWriter(buf, gzip=gz)
        writer.write_record(writer.create_warcinfo_record("wiki.warc", {"software": "test"}))
        for name in WIKI_PAGES:
            url = f"https://en.wikipedia.org/wiki/{name[:-5]}"
            http = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=UTF-8")],
                                    protocol="HTTP/1.1")
            writer.write_record(writer.create_warc_record(
                url, "response", payload=io.BytesIO((wiki_pages / name).read_bytes()),
                http_headers=http))
        path = tmp_path / f"wiki.warc{'.gz' if gz else ''}"
        path.write_bytes(buf.getvalue())
        rows = _same_rows(path)
        assert _framed_all(path) == 1 + len(WIKI_PAGES)
        pages = [r for r in rows if r["kind"] == "page"]
        assert len(pages) == len(WIKI_PAGES)
        for page, name in zip(pages, WIKI_PAGES, strict=True):
            assert page["html"] == (wiki_pages / name).read_bytes().decode("utf-8")


# ---- the parts ----------------------------------------------------------------------------

def test_plain_header_blocks_are_parsed_as_warcio_parses_them():
    blocks = [
        b"WARC/1.0\r\nWARC-Type: response\r\nContent-Length: 10\r\n\r\n",
        b"WARC/1.1\r\nA:b\r\nC :  d  \r\n:e\r\nno colon\r\nF:\r\nG: h: i\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n",
        b"HTTP/1.0  404   Not Found  \r\nX:\ty\t\r\n\r\n",
        b"HTTP/1.1\r\n\r\n",
        b"GET /x HTTP/1.1\r\nHost: a\r\n\r\n",
        b"200 OK\r\n\r\n",
    ]
    for block in blocks:
        warc = block.startswith(b"WARC")
        ours = plain_headers(block, 0, len(block), warc=warc)
        parser = StatusAndHeadersParser(ArcWarcRecordLoader.WARC_TYPES if warc
                                        else ArcWarcRecordLoader.HTTP_TYPES, verify=warc)
        theirs = parser.parse(_Lines(block))
        assert ours is not None, block
        assert (ours.protocol, ours.statusline, ours.headers, ours.total_len) == (
            theirs.protocol, theirs.statusline, theirs.headers, theirs.total_len), block
    for odd in (b"HTTP/1.1 200\r\n folded\r\n\r\n", b"HTTP/1.1 200\r\nA: \xe9\r\n\r\n",
                b"HTTP/1.1 200\nA: b\r\n\r\n", b"\r\n\r\n"):
        assert plain_headers(odd, 0, len(odd), warc=False) is None, odd


class _Lines:
    def __init__(self, data: bytes):
        self.stream = io.BytesIO(data)

    def readline(self, size: int = -1) -> bytes:
        return self.stream.readline(size)


def test_declared_utf8_pages_stay_bytes_and_decode_as_decode_page():
    cases = [(PAGE.encode(), "utf-8"), (b"<p>\xff broken \xc3</p>", "UTF-8"),
             (b"\xef\xbb\xbf<p>bom</p>", "utf-8"), (PAGE.encode("cp1252"), "latin1"),
             (b'<meta charset="utf-8"><p>\xc3\xa9</p>', None), (b"<p>plain</p>", None),
             (b"<p>\xed\xa0\x80 surrogate</p>", "utf8"), (b"", "utf-8")]
    for body, label in cases:
        text, charset, source = _decoded(body, label)
        want = decode_page(body, label)
        assert (charset, source) == (want.charset, want.source), (body, label)
        assert _text_column([text]).to_pylist() == [want.text], (body, label)
    column = _text_column([b"ok \xc3\xa9", "str", None, b"bad \xff"])
    assert column.type == pa.string()
    assert column.to_pylist() == ["ok é", "str", None, "bad \ufffd"]
