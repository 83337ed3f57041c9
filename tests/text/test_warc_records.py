"""Reading a web archive's records: an archive cut at any byte of its last record gives the
record or a counted ``truncated`` reject (the complete records as warcio counts them, by their
block digests); HTTP bodies de-chunked and decoded as HTTP allows (chunk trailers, stacked and
aliased content codings, brotli and zstd), compared with warcio's reading and the bytes
encoded; bodies that are not text rejected for what they are. No Spark: the executors'
function is called here."""

from __future__ import annotations

import gzip
import io
import sys
import zlib
from pathlib import Path

import pytest
from pyarrow import fs
from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from sparkfield.text.warc.http_body import BodyError, decode_body
from sparkfield.text.warc.read import _file_rows

LOCAL = fs.LocalFileSystem()
DATE = "2024-05-01T12:00:00Z"
PAGE = (b"<html><head><title>Roasting</title></head><body><p>"
        + b"Coffee beans are roasted slowly, then rested before brewing. " * 12
        + b"</p></body></html>")


def _rows(path: Path, framed: bool = True) -> tuple[list[dict], list[dict]]:
    """The pages and the rejects of one file."""
    rows = list(_file_rows(LOCAL, str(path), 5_000_000, framed))
    return ([r for r in rows if r["kind"] == "page"],
            [r for r in rows if r["kind"] == "reject"])


def _response(w: WARCWriter, url: str, body: bytes,
              headers: tuple[tuple[str, str], ...] = ()) -> None:
    http = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8"), *headers],
                            protocol="HTTP/1.1")
    w.write_record(w.create_warc_record(url, "response", payload=io.BytesIO(body),
                                        http_headers=http, warc_headers_dict={"WARC-Date": DATE}))


def _raw_response(w: WARCWriter, url: str, http: bytes) -> None:
    """A response record whose block is ``http`` exactly (head and body as sent)."""
    w.write_record(w.create_warc_record(url, "response", payload=io.BytesIO(http),
                                        warc_headers_dict={"WARC-Date": DATE}))


def _archive(path: Path, write, gz: bool = False) -> Path:
    buf = io.BytesIO()
    write(WARCWriter(buf, gzip=gz))
    path.write_bytes(buf.getvalue())
    return path


# ---- an archive cut short ----------------------------------------------------------------

def _warcio_complete(data: bytes) -> int:
    """The records warcio reads whole: their block digests check out."""
    n = 0
    try:
        for rec in ArchiveIterator(io.BytesIO(data), check_digests=True):
            rec.content_stream().read()
            n += rec.digest_checker.passed is True
    except Exception:  # noqa: BLE001 (warcio gives up on the cut record: the rest is counted)
        pass
    return n


@pytest.mark.parametrize("framed", [True, False], ids=["framed", "warcio"])
@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_every_cut_of_the_last_record_is_the_record_or_a_truncated_reject(tmp_path, gz, framed):
    buf = io.BytesIO()
    w = WARCWriter(buf, gzip=gz)
    _response(w, "http://a.example/1", PAGE)
    last = buf.tell()
    _response(w, "http://a.example/2", PAGE.replace(b"slowly", b"gently"))
    data = buf.getvalue()
    assert _warcio_complete(data) == 2
    path = tmp_path / ("cut.warc.gz" if gz else "cut.warc")
    wrong = []
    for end in range(last + 1, len(data)):
        path.write_bytes(data[:end])
        pages, rejects = _rows(path, framed)
        reasons = [r["reason"] for r in rejects]
        whole = _warcio_complete(data[:end])
        ok = (len(pages) == whole == 2 and not reasons) or (
            len(pages) == whole == 1 and reasons == ["truncated"] and rejects[0]["offset"] == last)
        if not ok:
            wrong.append((end - last, len(pages), whole, reasons))
    assert not wrong, f"{len(wrong)} of {len(data) - last - 1} cuts: {wrong[:8]}"


# ---- chunked transfer coding -------------------------------------------------------------

CHUNKED_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n")


def _chunks(body: bytes, size: int = 97) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + size]), body[i:i + size])
                    for i in range(0, len(body), size))


def _warcio_body(path: Path) -> bytes:
    with path.open("rb") as f:
        return next(iter(ArchiveIterator(f))).content_stream().read()


@pytest.mark.parametrize("body", [
    _chunks(PAGE) + b"0\r\nX-Checksum: 12ab\r\nExpires: never\r\n\r\n",  # a trailer section
    _chunks(PAGE) + b"0;done=1\r\n",  # the last CRLF missing (and a chunk extension)
    _chunks(PAGE) + b"0\r\n",
    PAGE,  # de-chunked already, still labelled chunked
], ids=["trailer", "extension_no_last_crlf", "no_last_crlf", "dechunked"])
def test_chunked_bodies_warcio_reads_are_pages(tmp_path, body):
    path = _archive(tmp_path / "chunked.warc",
                    lambda w: _raw_response(w, "http://a.example/c", CHUNKED_HEAD + body))
    pages, rejects = _rows(path)
    assert not rejects
    assert [p["html"] for p in pages] == [PAGE]
    assert _warcio_body(path).startswith(PAGE)  # warcio keeps what follows the last chunk
    assert _rows(path, framed=False)[0] == pages


def test_a_chunk_cut_short_is_still_a_bad_payload(tmp_path):
    broken = _chunks(PAGE)[:-40] + b"\r\n0\r\n\r\n"  # the last chunk shorter than its size
    path = _archive(tmp_path / "chunked.warc",
                    lambda w: _raw_response(w, "http://a.example/c", CHUNKED_HEAD + broken))
    pages, rejects = _rows(path)
    assert not pages and [r["reason"] for r in rejects] == ["bad_payload"]


# ---- content codings ---------------------------------------------------------------------

def _deflate(raw: bool):
    def pack(body: bytes) -> bytes:
        z = zlib.compressobj(wbits=-15 if raw else 15)
        return z.compress(body) + z.flush()
    return pack


def _brotli(body: bytes) -> bytes:
    import brotli  # the text extra's

    return brotli.compress(body)


def _zstd(body: bytes) -> bytes:
    import zstandard

    return zstandard.ZstdCompressor().compress(body)


@pytest.mark.parametrize(("coding", "pack"), [
    ("gzip", gzip.compress),
    ("x-gzip", gzip.compress),
    ("GZIP", gzip.compress),
    ("gzip, gzip", lambda b: gzip.compress(gzip.compress(b))),
    ("deflate, gzip", lambda b: gzip.compress(_deflate(False)(b))),  # applied in that order
    ("deflate", _deflate(False)),
    ("deflate", _deflate(True)),  # raw deflate, as some servers send it
    ("br", _brotli),
    ("gzip, br", lambda b: _brotli(gzip.compress(b))),
    ("zstd", _zstd),
    ("identity", lambda b: b),
], ids=["gzip", "x-gzip", "upper", "gzip-gzip", "deflate-gzip", "deflate", "raw-deflate",
        "br", "gzip-br", "zstd", "identity"])
@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_content_codings_are_decoded(tmp_path, coding, pack, gz):
    path = _archive(tmp_path / "coded.warc", lambda w: _response(
        w, "http://a.example/p", pack(PAGE), (("Content-Encoding", coding),)), gz)
    pages, rejects = _rows(path)
    assert not rejects, rejects
    assert [p["html"] for p in pages] == [PAGE]
    assert _rows(path, framed=False)[0] == pages


@pytest.mark.parametrize("coding", ["gzip", "x-gzip", "deflate", "br", "zstd", "gzip, br"])
def test_an_empty_body_is_empty_whatever_its_coding(coding):
    assert decode_body(b"", [c.strip() for c in coding.split(",")], 1000) == b""


def test_a_decoded_body_labelled_zstd_needs_no_zstd_decoder(monkeypatch):
    coded = _zstd(PAGE)
    monkeypatch.setitem(sys.modules, "zstandard", None)  # not installed
    assert decode_body(PAGE, ["zstd"], 1 << 20) == PAGE
    with pytest.raises(BodyError, match="zstandard is not installed"):
        decode_body(coded, ["zstd"], 1 << 20)


def test_a_coding_without_a_decoder_is_rejected_as_such(tmp_path):
    path = _archive(tmp_path / "coded.warc", lambda w: _response(
        w, "http://a.example/p", b"\x1f\x9d\x90<html>", (("Content-Encoding", "compress"),)))
    pages, rejects = _rows(path)
    assert not pages and [r["reason"] for r in rejects] == ["unsupported_encoding"]
    assert "compress" in rejects[0]["detail"]


@pytest.mark.parametrize(("coding", "pack"), [
    ("gzip", lambda b: gzip.compress(b)[:-30]),
    ("br", lambda b: _brotli(b)[:-20]),
    ("zstd", lambda b: _zstd(b)[:-20]),
], ids=["gzip", "br", "zstd"])
def test_a_coded_body_cut_short_is_a_bad_payload(tmp_path, coding, pack):
    path = _archive(tmp_path / "coded.warc", lambda w: _response(
        w, "http://a.example/p", pack(PAGE), (("Content-Encoding", coding),)))
    pages, rejects = _rows(path)
    assert not pages and [r["reason"] for r in rejects] == ["bad_payload"]
    assert coding in rejects[0]["detail"]


# ---- bodies sent as HTML that are no text ------------------------------------------------

@pytest.mark.parametrize(("body", "kind"), [
    (lambda: _zstd(PAGE), "application/zstd"),  # zstd, not declared
    (lambda: _brotli(PAGE), "binary data"),  # brotli, not declared
    (lambda: bytes(range(32)) * 20, "binary data"),  # control bytes
], ids=["zstd", "brotli", "control_bytes"])
def test_bodies_that_are_no_text_are_not_html(tmp_path, body, kind):
    path = _archive(tmp_path / "binary.warc", lambda w: _response(w, "http://a.example/b", body()))
    pages, rejects = _rows(path)
    assert not pages and [r["reason"] for r in rejects] == ["not_html"]
    assert kind in rejects[0]["detail"] and "sent as text/html" in rejects[0]["detail"]


def test_a_stray_control_byte_in_a_page_keeps_it_a_page(tmp_path):
    stray = PAGE.replace(b"rested", b"rest\x00ed", 1)
    path = _archive(tmp_path / "stray.warc", lambda w: _response(w, "http://a.example/s", stray))
    pages, rejects = _rows(path)
    assert not rejects and [p["html"] for p in pages] == [stray]
