"""Fetching without Spark: declared charsets, the total deadline against a server that trickles
bytes, and failures grouped by reason."""

from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from sparkfield.text.crawl.fetch import fetch_partition, server_of
from sparkfield.text.crawl.request import REASONS
from sparkfield.text.job import url_host
from sparkfield.text.pages.charset import decode_html
from sparkfield.text.params import fetch_settings

CAFE = "<html><head>{decl}<title>Café</title></head><body><p>Crème brûlée à Noël – “quoted”</p>"


@pytest.mark.parametrize("decl", [
    '<meta charset="windows-1252">', "<meta charset=iso-8859-1>",
    "<meta http-equiv='Content-Type' content='text/html; charset=windows-1252'>",
])
def test_a_meta_charset_is_honoured(decl):
    page = CAFE.format(decl=decl)
    raw = page.replace("–", "-").encode("cp1252") if "8859" in decl else page.encode("cp1252")
    text = decode_html(raw, None)
    assert "<title>Café</title>" in text and "Crème brûlée à Noël" in text
    assert "\ufffd" not in text


def test_shift_jis_by_http_equiv_and_the_header_before_meta():
    page = ('<html><head><meta http-equiv="Content-Type" content="text/html; charset=Shift_JIS">'
            "<title>日本語</title></head><body><p>自然言語処理は言語学の一分野です。</p>")
    assert "自然言語処理は言語学の一分野です。" in decode_html(page.encode("shift_jis"), None)
    # the HTTP header wins over the page's own declaration
    latin = "<meta charset='utf-8'><p>Café</p>".encode("cp1252")
    assert "Café" in decode_html(latin, "windows-1252")
    # an unknown header label falls through to the page's declaration
    assert "Café" in decode_html(
        "<meta charset='windows-1252'><p>Café</p>".encode("cp1252"), "no-such-charset")


def test_undeclared_pages_are_detected():
    page = "<html><body><p>Ein Gruß aus Köln, schöne Grüße an die Bürger und Bäcker.</p>" * 5
    assert "Gruß aus Köln" in decode_html(page.encode("utf-8"), None)
    assert "Gruß aus Köln" in decode_html(page.encode("cp1252"), None)
    assert "Café" in decode_html("\ufeff<p>Café</p>".encode("utf-8-sig"), None)


class _Trickle(BaseHTTPRequestHandler):
    """/robots.txt and pages that send one byte every 0.2 s for up to 8 s."""

    trickle_robots = False

    def log_message(self, *args):
        pass

    def _drip(self, n: int) -> None:
        for _ in range(n):
            self.wfile.write(b"x")
            self.wfile.flush()
            time.sleep(0.2)

    def do_GET(self):  # noqa: N802
        try:
            if self.path == "/robots.txt" and not self.trickle_robots:
                body = b"User-agent: *\nAllow: /\n"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            elif self.path in ("/robots.txt", "/trickle"):
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", "40")
                self.end_headers()
                self._drip(40)
            elif self.path == "/trickle-no-length":  # ends when the server closes
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Connection", "close")
                self.end_headers()
                self._drip(40)
                self.close_connection = True
            else:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
        except OSError:  # the client gave up
            pass


def _server(trickle_robots: bool):
    handler = type("H", (_Trickle,), {"trickle_robots": trickle_robots})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_a_trickling_server_ends_as_a_failed_url_at_the_deadline():
    pages, robots = _server(False), _server(True)
    try:
        a = f"http://127.0.0.1:{pages.server_address[1]}"
        b = f"http://127.0.0.1:{robots.server_address[1]}"
        settings = fetch_settings({"delay_s": 0.0, "connect_timeout_s": 1, "read_timeout_s": 1,
                                   "total_timeout_s": 1.0, "max_retries": 2, "backoff_s": 0.1})
        t0 = time.monotonic()
        out = {o.url: o for o in fetch_partition(
            [f"{a}/trickle", f"{a}/trickle-no-length", f"{b}/page", f"{b}/other"], settings)}
        elapsed = time.monotonic() - t0
    finally:
        pages.shutdown()
        robots.shutdown()
    for url, o in out.items():
        assert o.error == "timeout" and o.html is None, (url, o)
        assert "total deadline of 1s exceeded" in o.error_detail
    assert out[f"{b}/page"].error_detail.startswith("robots.txt:")
    assert out[f"{a}/trickle"].attempts == 1  # a host that trickles is not asked again
    assert elapsed < 6, elapsed  # three requests of 1 s each, not 8 s each


def test_failures_are_grouped_by_reason():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    settings = fetch_settings({"delay_s": 0.0, "connect_timeout_s": 1, "read_timeout_s": 1,
                               "max_retries": 0, "respect_robots": False})
    out = {o.url: o for o in fetch_partition(
        [f"http://127.0.0.1:{closed}/", "http://no-such-host.invalid/", "ftp://example.org/f"],
        settings)}
    assert out[f"http://127.0.0.1:{closed}/"].error == "refused"
    assert "Connection refused" in out[f"http://127.0.0.1:{closed}/"].error_detail
    assert out["http://no-such-host.invalid/"].error == "dns"
    assert out["ftp://example.org/f"].error == "unsupported_url"
    assert {o.error for o in out.values()} <= set(REASONS)


URLS = ["http://Example.ORG/a", "https://example.org:8443/b?q=1", "http://user:pw@example.org/",
        "http://a@b@example.org:81/x", "http://[::1]:8080/", "HTTP://[2001:DB8::1]/p",
        "http://example.org/a b", "http://example.org?x#y", "http://example.org#frag",
        "http://127.0.0.1:5000", "ftp://files.example.org/f", "mailto:x@example.org",
        "not a url", "", "http:///nohost", "https://xn--bcher-kva.example/", "\thttp://Ex.org/a",
        "\x0b http://ex.org/", "http://ex\t.org/", "http://ex.org\r\n/p", None]


def test_the_job_groups_urls_by_the_host_name_fetching_counts_by(spark):
    df = spark.createDataFrame([(u,) for u in URLS], "url string")
    got = [r["host"] for r in df.select(url_host("url").alias("host")).collect()]
    assert got == [server_of(u) if u is not None else "" for u in URLS]
    assert got[:4] == ["example.org"] * 4 and got[4] == "::1"
