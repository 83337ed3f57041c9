"""The fetch written as WARC: parts that warcio and FastWARC read with valid digests, request and
response records linked, a crawl replayed by the WARC reader into the same vocabulary, revisit
records for 304 answers, no response record for a fetch without an HTTP answer, and an output
pyarrow cannot open refused before anything is fetched."""

from __future__ import annotations

import base64
import gzip
import hashlib
import shutil
import socket
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

import pandas as pd
import pytest
from warcio.archiveiterator import ArchiveIterator

from sparkfield.core.conf import load_config
from sparkfield.core.errors import InputError
from sparkfield.text import run
from sparkfield.text.warc.write import NOT_MODIFIED_PROFILE, _Part, warc_target
from tests.conftest import WIKI_PAGES
from tests.text.http_site import QuietHandler

FETCH = {"delay_s": 0.0, "backoff_s": 0.1, "max_retries": 1, "connect_timeout_s": 2,
         "read_timeout_s": 5, "user_agent": "sparkfield-test"}
PAGES = WIKI_PAGES[:4]


def _handler(pages: dict[str, bytes]):
    class Handler(QuietHandler):
        def do_GET(self):  # noqa: N802
            if self.path == "/robots.txt":
                return self._send(200, b"User-agent: *\nAllow: /\n", "text/plain")
            body = pages.get(self.path)
            if body is None:
                return self._send(404, b"gone")
            etag = f'"{hashlib.sha1(body).hexdigest()[:12]}"'
            if self.headers.get("If-None-Match") == etag:
                return self._send(304, headers={"ETag": etag})
            return self._send(200, body, headers={"ETag": etag})

    return Handler


def _closed_port() -> int:
    """A port nobody listens on: connecting is refused, no HTTP answer."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def site(wiki_pages):
    pages = {f"/{n}": (wiki_pages / n).read_bytes() for n in PAGES}
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(pages))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _cfg(repo_root: Path, out: Path, **job):
    return load_config("bag_of_words", "local", repo_root / "conf", {"job": {
        "output": str(out), "fetch": FETCH, "vector": "count", **job}})


@pytest.fixture(scope="module")
def crawl(spark, repo_root, site, tmp_path_factory):
    """One crawl: the pages, a 404 and a URL whose host refuses the connection."""
    root = tmp_path_factory.mktemp("warc_out")
    urls = [f"{site}/{n}" for n in PAGES] + [f"{site}/missing",
                                             f"http://127.0.0.1:{_closed_port()}/x"]
    (root / "urls.txt").write_text("\n".join(urls) + "\n")
    result = run(spark, _cfg(repo_root, root / "out", source={"urls": str(root / "urls.txt")}))
    return root, result


def _records(folder: Path) -> list:
    """Every record of the parts, with its part, as warcio reads it (digests checked)."""
    got = []
    for part in sorted(folder.glob("*.warc.gz")):
        with part.open("rb") as f:
            for rec in ArchiveIterator(f, check_digests="raise"):
                body = rec.content_stream().read()
                got.append((part.name, rec.rec_type, rec.rec_headers, rec.http_headers, body))
    return got


def test_the_parts_are_valid_warc_for_warcio_and_fastwarc(crawl, site):
    root, result = crawl
    folder = root / "out" / "warc"
    parts = sorted(p.name for p in folder.iterdir())
    assert parts and all(p.startswith("part-") and p.endswith(".warc.gz") for p in parts)
    recs = _records(folder)
    for name in parts:  # a warcinfo record opens each part
        first = next(r for r in recs if r[0] == name)
        assert first[1] == "warcinfo" and b"software: sparkfield/" in first[4]
        assert first[2].protocol == "WARC/1.1"
    by_id = {r[2].get_header("WARC-Record-ID"): r for r in recs}
    responses = {r[2].get_header("WARC-Target-URI"): r for r in recs if r[1] == "response"}
    assert set(responses) == {f"{site}/{n}" for n in PAGES} | {f"{site}/missing"}
    pages = result.pages.toPandas().set_index("url")
    for uri, (_, _, warc, http, body) in responses.items():
        request = by_id[warc.get_header("WARC-Concurrent-To")]
        assert request[1] == "request"
        assert request[2].get_header("WARC-Concurrent-To") == warc.get_header("WARC-Record-ID")
        line = f"{request[3].protocol} {request[3].statusline}"
        assert line == f"GET /{uri.rsplit('/', 1)[1]} HTTP/1.1"
        assert request[3].get_header("User-Agent") == "sparkfield-test"
        assert request[3].get_header("Host") == site.removeprefix("http://")
        digest = base64.b32encode(hashlib.sha1(body).digest()).decode()
        assert warc.get_header("WARC-Payload-Digest") == f"sha1:{digest}"
        assert warc.get_header("WARC-Date").startswith(
            pages.loc[uri, "fetched_at"].strftime("%Y-%m-%dT%H:%M:%S"))
        if uri.endswith("/missing"):
            assert http.get_statuscode() == "404" and warc.get_header("WARC-Truncated")
        else:
            assert http.get_statuscode() == "200" and body == pages.loc[uri, "html"].encode()
    _check_with_fastwarc(folder, len(recs))


def _check_with_fastwarc(folder: Path, n_records: int) -> None:
    from fastwarc.warc import ArchiveIterator as FastIterator
    from fastwarc.warc import WarcRecordType

    seen = 0
    for part in sorted(folder.glob("*.warc.gz")):
        with part.open("rb") as f:
            for rec in FastIterator(f, parse_http=False):
                seen += 1
                assert rec.verify_block_digest(consume=False)
                if rec.record_type == WarcRecordType.response:
                    rec.parse_http()
                    assert rec.verify_payload_digest()
    assert seen == n_records


def test_the_reader_replays_the_crawl_into_the_same_vocabulary(spark, repo_root, crawl):
    root, _ = crawl
    replay = root / "replay"
    run(spark, _cfg(repo_root, replay, source={"warc": f"{root / 'out' / 'warc'}/"}))
    crawled = pd.read_csv(root / "out" / "vocabulary.csv", keep_default_na=False)
    replayed = pd.read_csv(replay / "vocabulary.csv", keep_default_na=False)
    assert len(crawled) > 50
    pd.testing.assert_frame_equal(crawled, replayed)


def test_a_failed_fetch_has_no_response_record_and_is_counted(crawl):
    root, result = crawl
    c = result.report.counts["warc_out"]
    recs = _records(root / "out" / "warc")
    refused = (root / "urls.txt").read_text().split()[-1]
    assert refused not in {r[2].get_header("WARC-Target-URI") for r in recs}
    assert c["pages_without_response"] == 1
    assert c["records"] == {"request": 5, "response": 5, "warcinfo": c["parts"]}
    assert c["parts"] == len(list((root / "out" / "warc").iterdir()))
    assert result.report.counts["pages_failed"] == 2  # the 404 and the refused one


def test_a_304_in_a_recrawl_is_a_revisit_record(spark, repo_root, crawl, site):
    root, _ = crawl
    again = root / "again"
    shutil.copytree(root / "out", again)
    first = {r[2].get_header("WARC-Target-URI"): r[2].get_header("WARC-Date")
             for r in _records(again / "warc") if r[1] == "response"}
    result = run(spark, _cfg(repo_root, again, source={"urls": str(root / "urls.txt")}))
    assert result.report.counts["pages_not_modified"] == len(PAGES)
    recs = _records(again / "warc")
    revisits = {r[2].get_header("WARC-Target-URI"): r for r in recs if r[1] == "revisit"}
    assert set(revisits) == {f"{site}/{n}" for n in PAGES}
    by_id = {r[2].get_header("WARC-Record-ID"): r for r in recs}
    for uri, (_, _, warc, http, body) in revisits.items():
        assert warc.get_header("WARC-Profile") == NOT_MODIFIED_PROFILE
        assert warc.get_header("WARC-Refers-To-Target-URI") == uri
        assert warc.get_header("WARC-Refers-To-Date") == first[uri]
        assert http.get_statuscode() == "304" and body == b""
        request = by_id[warc.get_header("WARC-Concurrent-To")]
        assert request[3].get_header("If-None-Match") == http.get_header("ETag")
    counts = result.report.counts["warc_out"]["records"]
    assert counts["revisit"] == len(PAGES) and counts["response"] == 1  # the 404 again
    replayed = pd.read_csv(again / "vocabulary.csv", keep_default_na=False)
    pd.testing.assert_frame_equal(
        replayed, pd.read_csv(root / "out" / "vocabulary.csv", keep_default_na=False))


def test_no_warc_output_writes_none(spark, repo_root, crawl, site):
    root, _ = crawl
    (root / "one.txt").write_text(f"{site}/{PAGES[0]}\n")
    out = root / "plain"
    result = run(spark, _cfg(repo_root, out, source={"urls": str(root / "one.txt")},
                             warc_output=False))
    assert not (out / "warc").exists() and "warc_out" not in result.report.counts
    assert "pages" in {p.name for p in out.iterdir()}


def test_an_output_pyarrow_cannot_open_is_one_error_line(spark):
    with pytest.raises(InputError) as err:
        warc_target(spark, "ftp://127.0.0.1:1/out.__staging-x/warc", "ftp://127.0.0.1:1/out")
    text = str(err.value)
    assert "\n" not in text and "ftp://127.0.0.1:1/out" in text and "pyarrow" in text


PAGE = {"url": "http://a.test/", "final_url": "http://a.test/", "status": 200,
        "fetched_at": "2024-05-01T12:00:00Z",
        "warc_redirects": None, "warc_request": "GET / HTTP/1.1\r\nHost: a.test",
        "warc_response": "HTTP/1.1 200 OK\r\nContent-Type: text/html",
        "warc_payload": b"<p>x</p>", "warc_not_modified": False,
        "warc_refers_uri": None, "warc_refers_date": None}


def test_a_part_given_up_leaves_nothing(tmp_path):
    part = _Part(str(tmp_path), "part-00000.warc.gz", ".part-00000.warc.gz.7.tmp")
    part.add(PAGE)
    assert [p.name for p in tmp_path.iterdir()] == [".part-00000.warc.gz.7.tmp"]
    part.discard()
    assert list(tmp_path.iterdir()) == []


def test_a_part_whose_folder_is_gone_does_not_make_it_again(tmp_path):
    """A task still running after its run was stopped (the staging deleted) writes nothing."""
    gone = tmp_path / "out.__staging-x" / "warc"
    part = _Part(str(gone), "part-00000.warc.gz", ".part-00000.warc.gz.7.tmp")
    with pytest.raises(RuntimeError, match="is gone"):
        part.add(PAGE)
    assert list(tmp_path.iterdir()) == []


# not clean UTF-8 although it says so: a page re-encoded from its decoded text would differ
ODD_PAGE = ("<html><head><title>Caf\u00e9 odd</title></head><body><p>"
            + "Plain words about coffee, roasting and brewing. " * 40
            + "</p><p>caf\u00e9 ").encode() + b"\xff\xfe broken \xe9 bytes</p></body></html>"


class _ExchangeHandler(QuietHandler):
    """A redirect to one page sent gzip-encoded in chunks over HTTP/1.1, with two Set-Cookie
    headers."""

    protocol_version = "HTTP/1.1"

    def do_GET(self):  # noqa: N802
        if self.path == "/robots.txt":
            return self._send(200, b"User-agent: *\nAllow: /\n", "text/plain")
        if self.path == "/start":
            return self._send(302, b"moved", "text/plain", headers={"Location": "/odd"})
        packed = gzip.compress(ODD_PAGE)
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Set-Cookie", "a=1; Path=/")
        self.send_header("Set-Cookie", "b=2; Path=/")
        self.end_headers()
        for i in range(0, len(packed), 97):
            chunk = packed[i:i + 97]
            self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        self.wfile.write(b"0\r\n\r\n")


def test_the_response_record_keeps_the_exchange_as_received(spark, repo_root, tmp_path):
    """The payload is the body exactly as received (gzip and chunking undone, bytes that do not
    decode kept), every received header is kept (repeated ones too; the undone encodings as
    X-Crawler-*), the request record has the headers sent, the redirect followed has its own
    request and response records, and a replay decodes the same page."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ExchangeHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        site = f"http://127.0.0.1:{server.server_address[1]}"
        (tmp_path / "urls.txt").write_text(f"{site}/start\n")
        crawled = run(spark, _cfg(repo_root, tmp_path / "out",
                                  source={"urls": str(tmp_path / "urls.txt")}))
    finally:
        server.shutdown()
        server.server_close()
    recs = _records(tmp_path / "out" / "warc")
    _check_with_fastwarc(tmp_path / "out" / "warc", len(recs))
    assert [(r[1], r[2].get_header("WARC-Target-URI")) for r in recs[1:]] == [
        ("request", f"{site}/start"), ("response", f"{site}/start"),
        ("request", f"{site}/odd"), ("response", f"{site}/odd")]
    moved = recs[2]
    assert moved[3].get_statuscode() == "302" and moved[4] == b"moved"
    assert moved[3].get_header("Location") == "/odd"
    assert moved[2].get_header("WARC-Concurrent-To") == recs[1][2].get_header("WARC-Record-ID")
    (_, _, warc, http, body) = recs[4]
    assert body == ODD_PAGE and not warc.get_header("WARC-Truncated")
    assert http.get_statuscode() == "200"
    assert http.get_header("Content-Length") == str(len(ODD_PAGE))
    assert http.get_header("X-Crawler-Content-Encoding") == "gzip"
    assert http.get_header("X-Crawler-Transfer-Encoding") == "chunked"
    assert http.get_header("Content-Encoding") is None
    assert [v for k, v in http.headers if k == "Set-Cookie"] == ["a=1; Path=/", "b=2; Path=/"]
    sent = recs[3][3]
    assert sent.protocol == "GET" and sent.statusline == "/odd HTTP/1.1"
    assert "gzip" in sent.get_header("Accept-Encoding")
    assert sent.get_header("User-Agent") == "sparkfield-test"
    replay = run(spark, _cfg(repo_root, tmp_path / "replay",
                             source={"warc": str(tmp_path / "out" / "warc")}))
    html = [r["html"] for r in crawled.pages.select("html").collect()]
    assert html == [r["html"] for r in replay.pages.select("html").collect()] and html[0]


class _LoopAndLatinHandler(QuietHandler):
    """``/loop/N`` redirects to ``/loop/N+1`` for ever; ``/latin`` sends a header in latin-1."""

    def do_GET(self):  # noqa: N802
        if self.path == "/robots.txt":
            return self._send(200, b"User-agent: *\nAllow: /\n", "text/plain")
        if self.path.startswith("/loop/"):
            hop = int(self.path.rsplit("/", 1)[1])
            return self._send(302, b"hop %d" % hop, "text/plain",
                              headers={"Location": f"/loop/{hop + 1}"})
        # http.server writes header values in latin-1, as they come here
        return self._send(200, ODD_PAGE, headers={"X-Note": "caf\u00e9 cr\u00e8me"})


def test_redirects_of_a_url_given_up_and_latin1_headers_are_recorded(spark, repo_root, tmp_path):
    """A URL given up after too many redirects has a request and a response record for each
    redirect received; a response header in latin-1 is stored as received (warcio and FastWARC
    read it back), not percent-encoded."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _LoopAndLatinHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        site = f"http://127.0.0.1:{server.server_address[1]}"
        (tmp_path / "urls.txt").write_text(f"{site}/loop/0\n{site}/latin\n")
        run(spark, _cfg(repo_root, tmp_path / "out", source={"urls": str(tmp_path / "urls.txt")},
                        fetch={**FETCH, "max_redirects": 3}))
    finally:
        server.shutdown()
        server.server_close()
    folder = tmp_path / "out" / "warc"
    recs = _records(folder)
    _check_with_fastwarc(folder, len(recs))
    pages = pd.read_parquet(tmp_path / "out" / "pages").set_index("url")
    assert pages.loc[f"{site}/loop/0", "error"] == "redirects"
    hops = [(r[1], r[2].get_header("WARC-Target-URI"), r[4]) for r in recs
            if "/loop/" in (r[2].get_header("WARC-Target-URI") or "")]
    assert hops == [(kind, f"{site}/loop/{i}", b"" if kind == "request" else b"hop %d" % i)
                    for i in range(4) for kind in ("request", "response")]
    latin = next(r for r in recs if r[1] == "response"
                 and r[2].get_header("WARC-Target-URI") == f"{site}/latin")
    assert latin[3].get_header("X-Note") == "caf\u00e9 cr\u00e8me"
    raw = b"".join(gzip.decompress(p.read_bytes()) for p in sorted(folder.glob("*.warc.gz")))
    assert b"X-Note: caf\xe9 cr\xe8me\r\n" in raw and b"%E9" not in raw.upper()


def test_a_latin1_header_is_written_as_received(tmp_path):
    part = _Part(str(tmp_path), "part-00000.warc.gz", ".part-00000.warc.gz.1.tmp")
    part.add({"url": "http://a.test/", "final_url": "http://a.test/", "status": 200,
              "fetched_at": "2024-05-01T12:00:00Z", "warc_redirects": None,
              "warc_request": "GET / HTTP/1.1\r\nHost: a.test",
              "warc_response": "HTTP/1.1 200 OK\r\nX-Note: caf\u00e9 cr\u00e8me",
              "warc_payload": b"<p>x</p>", "warc_not_modified": False,
              "warc_refers_uri": None, "warc_refers_date": None})
    part.close()
    recs = _records(tmp_path)
    _check_with_fastwarc(tmp_path, len(recs))
    assert recs[-1][3].get_header("X-Note") == "caf\u00e9 cr\u00e8me"
    raw = gzip.decompress((tmp_path / "part-00000.warc.gz").read_bytes())
    assert b"\r\nX-Note: caf\xe9 cr\xe8me\r\n" in raw
