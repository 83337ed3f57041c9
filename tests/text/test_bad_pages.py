"""Bad pages, bad URLs and damaged earlier outputs: every one ends as a counted reject with its
reason, a full run with a warning, or one ``error:`` line (exit 2), never a traceback or a page
silently cut or lost."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import struct
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from pathlib import Path

import pandas as pd
import pytest

from sparkfield.core.conf import load_config
from sparkfield.core.report import Stats
from sparkfield.text import run
from sparkfield.text.crawl.fetch import fetch_partition
from sparkfield.text.crawl.request import REASONS
from sparkfield.text.job import pages_from_html_dir
from sparkfield.text.pages.charset import decode_html
from sparkfield.text.params import fetch_settings
from tests.conftest import ROOT, job_module
from tests.text.http_site import QuietHandler

FETCH = {"delay_s": 0.0, "backoff_s": 0.1, "max_retries": 1, "connect_timeout_s": 2,
         "read_timeout_s": 5, "total_timeout_s": 10, "user_agent": "sparkfield-test"}
DESSERT = ("<html><head><title>Desserts</title></head><body><p>Une crème brûlée et un café au "
           "lait, s'il vous plaît. La crème est très bonne.</p></body></html>")
PAGE = (b"<html><head><title>Tea</title></head><body><p>Green tea and black tea are both "
        b"made from the leaves of the same plant.</p></body></html>")
MALFORMED = "http://[::1:bad/x"


def _png() -> bytes:
    """A real 1x1 grey PNG."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(
            ">I", zlib.crc32(kind + data))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00\x80")) + chunk(b"IEND", b""))


class Handler(QuietHandler):
    """Responses with wrong or missing headers, answered over keep-alive connections."""

    protocol_version = "HTTP/1.1"

    def _raw(self, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(200)
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802
        if self.path == "/robots.txt":
            return self._send(200, b"User-agent: *\nAllow: /\n", "text/plain")
        if self.path == "/short-length":  # the header says 60 bytes, the page is longer
            return self._raw(PAGE, {"Content-Type": "text/html", "Content-Length": "60"})
        if self.path == "/untyped.png":
            png = _png()
            return self._raw(png, {"Content-Length": str(len(png))})
        if self.path == "/untyped-page":  # no Content-Type, no charset, latin-1
            body = DESSERT.encode("latin-1")
            return self._raw(body, {"Content-Length": str(len(body))})
        if self.path == "/binary-as-html":  # control bytes sent as text/html
            body = bytes(range(32)) * 40
            return self._raw(body, {"Content-Type": "text/html", "Content-Length": str(len(body))})
        if self.path == "/tea":
            return self._send(200, PAGE)
        return self._send(404, b"not here")


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _fetch(urls: list[str]) -> dict:
    return {o.url: o for o in fetch_partition(urls, fetch_settings(FETCH))}


# ---- fetching, without Spark ------------------------------------------------------------

def test_a_body_longer_than_its_content_length_is_turned_down(base):
    out = _fetch([f"{base}/short-length", f"{base}/tea"])
    short = out[f"{base}/short-length"]
    assert short.error == "bad_length" and short.html is None, short
    assert "Content-Length (60 bytes)" in short.error_detail
    # the next page on the same host (the same connection, were it kept) is whole
    assert out[f"{base}/tea"].error is None and out[f"{base}/tea"].html == PAGE.decode()


def test_an_untyped_image_is_not_html_and_an_untyped_page_is_kept(base):
    out = _fetch([f"{base}/untyped.png", f"{base}/untyped-page"])
    png = out[f"{base}/untyped.png"]
    assert png.error == "not_html" and png.html is None
    assert png.error_detail.startswith("not HTML: image/png")
    assert "no Content-Type" in png.error_detail
    page = out[f"{base}/untyped-page"]
    assert page.error is None and page.content_type is None
    assert "Une crème brûlée" in page.html
    assert (page.charset, page.charset_source) == ("cp1252", "guess")


def test_binary_data_sent_as_html_is_not_html(base):
    out = _fetch([f"{base}/binary-as-html", f"{base}/tea"])
    binary = out[f"{base}/binary-as-html"]
    assert binary.error == "not_html" and binary.html is None, binary
    assert "binary data" in binary.error_detail and "sent as text/html" in binary.error_detail
    assert out[f"{base}/tea"].error is None


def test_a_malformed_url_is_its_own_outcome_and_the_others_are_fetched(base):
    bad = [MALFORMED, "http://[::1]:99999/", "http://exa mple.org/", "http://" + "a" * 300]
    out = _fetch([*bad, f"{base}/tea"])
    assert sorted(out) == sorted([*bad, f"{base}/tea"])
    for url in bad:
        assert out[url].error == "invalid_url" and out[url].error_detail, out[url]
    assert "Invalid IPv6 URL" in out[MALFORMED].error_detail
    assert out[f"{base}/tea"].error is None and out[f"{base}/tea"].status == 200


def test_undeclared_latin1_decodes_as_windows_1252_and_is_a_guess():
    raw = "<html><body><p>crème brûlée</p></body></html>".encode("latin-1")
    assert "crème brûlée" in decode_html(raw)  # not "crčme brűlée" (windows-1250)
    from sparkfield.text.pages.charset import decode_page

    assert decode_page(raw)[1:] == ("cp1252", "guess")
    assert "Une crème brûlée et un café" in decode_html(DESSERT.encode("cp1252"))
    # Latin-script code pages the detector tells apart still win where windows-1252 reads
    # worse, and other scripts are left to the detector
    polish = "<p>Zażółć gęślą jaźń, to jest polski tekst.</p>"
    assert decode_page(polish.encode("cp1250")) == (polish, "cp1250", "guess")
    russian = "<p>Привет, как дела? Это тест русского текста.</p>"
    assert decode_page(russian.encode("cp1251")).text == russian
    # declared and UTF-8 pages are not guesses
    assert decode_page("<p>crème</p>".encode())[2] == "utf-8"
    assert decode_page(b"<p>plain</p>")[2] == "utf-8"
    assert decode_page(raw, "iso-8859-1")[1:] == ("cp1252", "http")


# ---- the job ----------------------------------------------------------------------------

def _cfg(repo_root: Path, out: Path | None, **source) -> object:
    return load_config("bag_of_words", "local", repo_root / "conf", {"job": {
        "source": source, "output": str(out) if out else None, "fetch": FETCH,
        "extract": "selector"}})


def _truncate_parquet(folder: Path) -> None:
    for part in sorted(folder.glob("part-*.parquet")):
        part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])


def test_bad_responses_and_urls_are_counted_rejects_of_a_crawl_that_goes_on(
        spark, repo_root, tmp_path, base, caplog):
    urls = {f"{base}/tea": None, f"{base}/untyped-page": None,
            f"{base}/short-length": "bad_length", f"{base}/untyped.png": "not_html",
            MALFORMED: "invalid_url"}
    urls_file = tmp_path / "urls.txt"
    urls_file.write_text("\n".join(urls) + "\n")
    out = tmp_path / "out"
    res = run(spark, _cfg(repo_root, out, urls=str(urls_file)))
    pages = pd.read_parquet(out / "pages").set_index("url")
    assert sorted(pages.index) == sorted(urls)  # every URL has its row
    assert pages["error"].where(pages["error"].notna(), None).to_dict() == urls
    assert pages.loc[f"{base}/untyped-page", "charset_source"] == "guess"
    rejects = pd.read_parquet(out / "rejects")
    assert sorted(rejects["reason"]) == ["bad_length", "invalid_url", "not_html"]
    assert res.report.rejects["pages"] == {"bad_length": 1, "invalid_url": 1, "not_html": 1}
    assert set(res.report.rejects["pages"]) <= set(REASONS)
    c = res.report.counts
    assert c["pages_charset_guessed"] == 1 and c["pages_without_content_type"] == 1
    docs = pd.read_parquet(out / "documents").set_index("url")
    assert "Une crème brûlée" in docs.loc[f"{base}/untyped-page", "text"]

    # earlier pages/ that cannot be read: a warning and every URL fetched again
    _truncate_parquet(out / "pages")
    with caplog.at_level(logging.WARNING, logger="sparkfield.text"):
        again = run(spark, _cfg(repo_root, out, urls=str(urls_file)))
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("earlier pages" in w and "cannot be read" in w for w in warned), warned
    assert any("earlier pages" in n for n in again.report.notes)
    assert "pages_revalidated" not in again.report.counts
    assert len(pd.read_parquet(out / "pages")) == len(urls)


def test_saved_files_that_are_not_pages_are_counted_rejects(spark, repo_root, tmp_path):
    src = tmp_path / "saved"
    src.mkdir()
    (src / "tea.html").write_bytes(PAGE)
    (src / "dessert.html").write_bytes(DESSERT.encode("latin-1"))  # no charset declared
    (src / "empty.html").write_bytes(b"")
    (src / "photo.png").write_bytes(_png())
    (src / "notes.pdf").write_text("not really a PDF")  # by its name
    out = tmp_path / "out"
    res = run(spark, _cfg(repo_root, out, html_dir=str(src)))
    assert res.report.inputs["html_files"] == 5
    rejects = pd.read_parquet(out / "rejects")
    by_file = {json.loads(r)["url"].rsplit("/", 1)[-1]: (reason, json.loads(r)["error_detail"])
               for reason, r in zip(rejects["reason"], rejects["record"], strict=True)}
    assert by_file == {
        "empty.html": ("empty", "empty file (0 bytes)"),
        "photo.png": ("not_html", "not HTML: image/png"),
        "notes.pdf": ("not_html", "not HTML: application/pdf (by its name)")}
    assert res.report.rejects["pages"] == {"empty": 1, "not_html": 2}
    assert res.report.reject_fraction() == (5, 3 / 5)
    docs = pd.read_parquet(out / "documents").set_index("url")
    text = docs.loc[next(u for u in docs.index if u.endswith("/dessert.html")), "text"]
    assert "Une crème brûlée et un café au lait" in text
    assert res.report.counts["pages_charset_guessed"] == 1


@contextmanager
def _within(seconds: int) -> Iterator[None]:
    def expired(*_):
        raise TimeoutError(f"still listing after {seconds}s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def test_a_link_loop_in_the_html_dir_reads_each_folder_once(spark, tmp_path):
    src = tmp_path / "saved"
    (src / "a").mkdir(parents=True)
    (src / "page.html").write_bytes(PAGE)
    (src / "a" / "inner.html").write_bytes(PAGE.replace(b"Tea", b"Inner"))
    os.symlink("..", src / "a" / "up")  # back up the tree: a loop
    os.symlink(".", src / "a" / "self")
    os.symlink("a", src / "b")  # a second way into a
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "more.html").write_bytes(PAGE.replace(b"Tea", b"More"))
    os.symlink(outside, src / "more")  # a folder elsewhere, linked in: read
    with _within(120):
        pages, n_files, _ = pages_from_html_dir(spark, str(src))
        names = sorted(u.split("/saved/", 1)[1] for u in
                       pages.where("error is null").toPandas()["url"])
    assert names == ["a/inner.html", "more/more.html", "page.html"]
    assert n_files == 3
    from sparkfield.text.pages.listing import list_files

    found = list_files(spark, str(src))
    assert (found.links, found.revisits) == (1, 3)  # "more" followed; up, self, b not
    stats = Stats()
    pages_from_html_dir(spark, str(src), stats=stats)
    assert stats.counts["directory_links_not_followed"] == 3
    assert any("read once" in n for n in stats.notes)


def _main(*argv: str) -> int:
    return job_module("bag_of_words").main(["--conf-dir", str(ROOT / "conf"), *argv])


def _error_lines(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if ln.startswith("error: ")]


def test_too_many_files_is_one_error_line_and_no_lock_is_left(spark, tmp_path, capsys,
                                                              monkeypatch):
    src = tmp_path / "saved"
    src.mkdir()
    for i in range(5):
        (src / f"p{i}.html").write_bytes(PAGE)
    monkeypatch.setattr("sparkfield.text.pages.listing.MAX_FILES", 3)
    out = tmp_path / "out"
    code = _main("--html-dir", str(src), "--output", str(out))
    err = capsys.readouterr().err
    assert code == 2, err[-2000:]
    assert len(_error_lines(err)) == 1 and "more than 3 files" in _error_lines(err)[0]
    assert "Traceback" not in err
    assert not out.exists() and not Path(f"{out}.lock").exists()


def _report(out: Path) -> dict:
    return json.loads((out / "run_report.json").read_text())


def test_a_damaged_state_means_a_full_run_with_a_warning(spark, tmp_path, capsys, caplog):
    src = tmp_path / "saved"
    src.mkdir()
    (src / "tea.html").write_bytes(PAGE)
    (src / "dessert.html").write_bytes(DESSERT.encode("utf-8"))
    out = tmp_path / "out"
    args = ("--html-dir", str(src), "--output", str(out), "--extract", "selector")
    assert _main(*args) == 0
    want = (out / "vocabulary.csv").read_text()

    def rerun(*more: str) -> dict:
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="sparkfield.text"):
            code = _main(*args, *more)
        err = capsys.readouterr().err
        assert code == 0 and "Traceback" not in err and not _error_lines(err), err[-2000:]
        assert (out / "vocabulary.csv").read_text() == want
        report = _report(out)
        report["warnings"] = [r.getMessage() for r in caplog.records
                              if r.levelno == logging.WARNING and r.name == "sparkfield.text"]
        return report

    shutil.rmtree(out / "state" / "documents")  # the folder goes missing
    r = rerun("--refresh")  # --refresh does not read the old state at all
    assert r["counts"]["incremental"] == "refresh: full run" and not r["warnings"]

    shutil.rmtree(out / "state" / "documents")
    r = rerun()
    assert r["counts"]["incremental"] == "earlier state unreadable: full run"
    assert len(r["warnings"]) == 1 and "state/documents is missing" in r["warnings"][0]
    assert r["warnings"][0] in r["notes"]

    r = rerun()  # the state written by that run is whole again
    assert r["counts"]["incremental"] == "reused the earlier state" and not r["warnings"]

    _truncate_parquet(out / "state" / "terms")  # a cut Parquet file
    r = rerun()
    assert r["counts"]["incremental"] == "earlier state unreadable: full run"
    assert "state/terms/part-" in r["warnings"][0]
    assert "is not a whole Parquet file" in r["warnings"][0]

    (out / "state" / "meta.json").write_text("{not json")
    r = rerun()
    assert r["counts"]["incremental"] == "earlier state unreadable: full run"
    assert "state/meta.json is not JSON" in r["warnings"][0]
