"""A crawl that stays fresh: conditional requests against a real HTTP server on 127.0.0.1 that
speaks ETag / Last-Modified / 304, an incremental re-run equal to a fresh run, the word
statistics updated from the change, and robots.txt Crawl-delay measured on the wire."""

from __future__ import annotations

import threading
import time
from collections import Counter
from email.utils import formatdate
from http.server import ThreadingHTTPServer

import pandas as pd
import pytest
from pyspark.sql import types as T

from sparkfield.core.conf import load_config
from sparkfield.core.practices import cached_storage_bytes
from sparkfield.text import run
from sparkfield.text.bag_of_words.vectorise import top_vocabulary, vocabulary
from sparkfield.text.crawl.fetch import fetch_partition
from sparkfield.text.crawl.revalidate import conditional_headers, crawl_delay
from sparkfield.text.crawl.state import update_word_stats, word_stats
from sparkfield.text.params import fetch_settings
from tests.conftest import WIKI_PAGES
from tests.text.http_site import QuietHandler

FETCH = {"delay_s": 0.0, "backoff_s": 0.1, "max_retries": 1, "connect_timeout_s": 2,
         "read_timeout_s": 5, "user_agent": "sparkfield-test"}


class Site:
    """Pages by path: (body, validator) where validator is 'etag', 'date' or None."""

    def __init__(self):
        self.pages: dict[str, tuple[bytes, str | None]] = {}
        self.version: Counter = Counter()  # bumps the validator when a page changes
        self.log: list[tuple[str, str, int, float]] = []  # (host, path, status, time)
        self.robots: dict[str, str] = {}  # host name -> robots.txt
        self.redirects: dict[str, str] = {}  # path -> Location
        self.lock = threading.Lock()

    def put(self, path: str, body: bytes, validator: str | None) -> None:
        with self.lock:
            self.pages[path] = (body, validator)
            self.version[path] += 1


def handler(site: Site):
    class Handler(QuietHandler):
        def _send(self, code, body=b"", headers=None):
            host = self.headers["Host"].split(":")[0]
            with site.lock:
                site.log.append((host, self.path, code, time.monotonic()))
            super()._send(code, body, headers=headers)

        def do_GET(self):  # noqa: N802
            host = self.headers["Host"].split(":")[0]
            if self.path == "/robots.txt":
                return self._send(200, site.robots.get(host, "").encode())
            if self.path in site.redirects:
                return self._send(302, headers={"Location": site.redirects[self.path]})
            with site.lock:
                page = site.pages.get(self.path)
                version = site.version[self.path]
            if page is None:
                return self._send(404, b"gone")
            body, validator = page
            headers = {}
            if validator == "etag":
                headers["ETag"] = f'"v{version}"'
                if self.headers.get("If-None-Match") == headers["ETag"]:
                    return self._send(304, headers=headers)
            elif validator == "date":
                headers["Last-Modified"] = formatdate(1_700_000_000 + 3600 * version,
                                                      usegmt=True)
                if self.headers.get("If-Modified-Since") == headers["Last-Modified"]:
                    return self._send(304, headers=headers)
            return self._send(200, body, headers)

    return Handler


@pytest.fixture
def site():
    s = Site()
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler(s))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    s.port = server.server_address[1]
    yield s
    server.shutdown()
    server.server_close()


# ---- pure pieces ------------------------------------------------------------------------

def test_crawl_delay_follows_the_group_of_our_agent():
    txt = ("User-agent: otherbot\nCrawl-delay: 9\n\n"
           "User-agent: sparkfield-bot\nUser-agent: x\nDisallow: /a\nCrawl-delay: 0.5\n\n"
           "User-agent: *\nCrawl-delay: 2\n")
    assert crawl_delay(txt, "sparkfield-bot/0.1 (+https://example.invalid/bot)") == 0.5
    assert crawl_delay(txt, "someone-else/1.0") == 2.0
    assert crawl_delay("User-agent: *\nDisallow: /\n", "a/1") is None
    assert crawl_delay("User-agent: *\nCrawl-delay: soon\n", "a/1") is None
    assert crawl_delay("", "a/1") is None


def test_conditional_headers():
    assert conditional_headers('"v1"', "Tue, 14 Nov 2023 22:13:20 GMT") == {
        "If-None-Match": '"v1"', "If-Modified-Since": "Tue, 14 Nov 2023 22:13:20 GMT"}
    assert conditional_headers(None, None) == {}
    assert conditional_headers(float("nan"), "") == {}  # pandas gives NaN for a null


TERMS_SCHEMA = T.StructType([
    T.StructField("doc_id", T.StringType(), False),
    T.StructField("terms", T.ArrayType(T.StringType(), False), False),
    T.StructField("counts", T.ArrayType(T.IntegerType(), False), False),
])


def test_word_stats_updated_from_the_change_equal_a_recount(spark):
    old = [("a", ["x", "y"], [2, 1]), ("b", ["y", "z"], [3, 1]), ("c", [], []),
           ("d", ["w"], [5])]
    new = [("a", ["x", "y"], [2, 1]), ("b", ["y", "q"], [1, 4]), ("e", ["z", "x"], [1, 1])]
    old_df = spark.createDataFrame(old, TERMS_SCHEMA)
    new_df = spark.createDataFrame(new, TERMS_SCHEMA)
    added = new_df.where("doc_id in ('b', 'e')")
    removed = old_df.where("doc_id in ('b', 'c', 'd')")
    got = update_word_stats(word_stats(old_df), added, removed).toPandas()
    want = word_stats(new_df).toPandas()
    key = ["word"]
    pd.testing.assert_frame_equal(got.sort_values(key).reset_index(drop=True),
                                  want.sort_values(key).reset_index(drop=True),
                                  check_dtype=False)
    assert "w" not in set(got["word"])  # in no document any more
    assert dict(zip(got["word"], got["documents"], strict=True)) == {
        "x": 2, "y": 2, "z": 1, "q": 1}
    # the ranking from statistics is vectorise.vocabulary's
    for size, min_df, stop in [(3, 1, ()), (10, 2, ()), (2, 1, ("x",))]:
        a = top_vocabulary(word_stats(new_df), size, min_df, stop).toPandas()
        b = vocabulary(new_df, size, min_df, stop).toPandas()
        pd.testing.assert_frame_equal(a, b, check_dtype=False)


# ---- Crawl-delay on the wire ------------------------------------------------------------

def test_crawl_delay_spaces_requests_to_that_host_only(site):
    slow, fast = "127.0.0.1", "localhost"
    site.robots[slow] = "User-agent: *\nCrawl-delay: 0.8\nDisallow: /private\n"
    site.robots[fast] = "User-agent: *\nDisallow: /private\n"
    for i in range(4):
        site.put(f"/p{i}", b"<html><p>page</p></html>", None)
    urls = [f"http://{h}:{site.port}/p{i}" for h in (slow, fast) for i in range(4)]
    settings = fetch_settings({**FETCH, "delay_s": 0.05})
    out = fetch_partition(urls, settings)
    assert all(o.error is None and o.status == 200 for o in out), out
    times = {h: [t for host, _, _, t in site.log if host == h] for h in (slow, fast)}
    assert len(times[slow]) == len(times[fast]) == 5  # robots.txt + 4 pages each
    gaps = {h: [b - a for a, b in zip(ts, ts[1:], strict=False)] for h, ts in times.items()}
    assert min(gaps[slow]) >= 0.8 - 0.01, gaps[slow]  # robots.txt itself counts as a request
    assert sorted(gaps[fast])[1] < 0.4, gaps[fast]  # the conf delay only: the measure tells

    # a Crawl-delay beyond the limit gives the host's URLs up without asking for them
    site.log.clear()
    site.robots[slow] = "User-agent: *\nCrawl-delay: 3600\n"
    out = fetch_partition([f"http://{slow}:{site.port}/p0"], fetch_settings(
        {**FETCH, "max_crawl_delay_s": 10}))
    assert out[0].error is not None and out[0].status is None
    reason = f"{out[0].error} {getattr(out[0], 'error_detail', '')}"
    assert "Crawl-delay 3600s exceeds the limit" in reason
    assert [p for _, p, _, _ in site.log] == ["/robots.txt"]


def test_a_redirect_is_a_request_like_any_other(site):
    slow, fast = "127.0.0.1", "localhost"
    site.log.clear()
    site.robots[slow] = "User-agent: *\nCrawl-delay: 0.3\nDisallow: /private\n"
    site.robots[fast] = "User-agent: *\n"
    site.put("/p0", b"<html><p>page</p></html>", None)
    site.redirects.update({"/hop": "/hop2", "/hop2": "/p0", "/inside": "/private/x",
                           "/away": f"http://{slow}:{site.port}/private/y"})
    urls = [f"http://{slow}:{site.port}/hop", f"http://{slow}:{site.port}/inside",
            f"http://{fast}:{site.port}/away"]
    # the waits between hops (0.3 s each) do not count against the 0.5 s a request may take
    out = {o.url: o for o in fetch_partition(urls, fetch_settings(
        {**FETCH, "delay_s": 0.05, "total_timeout_s": 0.5}))}
    hop = out[urls[0]]
    assert (hop.error, hop.status, hop.final_url) == (None, 200, f"http://{slow}:{site.port}/p0")
    for url, target in ((urls[1], "/private/x"), (urls[2], "/private/y")):
        assert out[url].error == "robots" and out[url].status is None, out[url]
        assert f"redirect to http://{slow}:{site.port}{target}" in out[url].error_detail
    asked = [p for h, p, _, _ in site.log]
    assert "/private/x" not in asked and "/private/y" not in asked
    times = [t for h, p, _, t in site.log if h == slow and p in ("/hop", "/hop2", "/p0")]
    assert len(times) == 3
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert min(gaps) >= 0.3 - 0.01, gaps  # the host's Crawl-delay between hops


def test_one_host_name_is_one_host_whatever_its_port(site):
    other = ThreadingHTTPServer(("127.0.0.1", 0), handler(site))  # the same pages, second port
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        site.log.clear()
        for i in range(3):
            site.put(f"/p{i}", b"<html><p>page</p></html>", None)
        urls = [f"http://127.0.0.1:{port}/p{i}" for i in range(3)
                for port in (site.port, other.server_address[1])]
        out = fetch_partition(urls, fetch_settings({**FETCH, "delay_s": 0.2}))
    finally:
        other.shutdown()
        other.server_close()
    assert all(o.error is None for o in out), out
    times = [t for _, p, _, t in site.log if p != "/robots.txt"]
    assert len(times) == 6
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert min(gaps) >= 0.2 - 0.01, gaps


def test_a_redirect_from_another_host_counts_for_the_host_it_reaches(site):
    slow, fast = "127.0.0.1", "localhost"
    other = ThreadingHTTPServer((slow, 0), handler(site))  # a second origin of host `slow`
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        site.log.clear()
        for i in range(3):
            site.put(f"/p{i}", b"<html><p>page</p></html>", None)
        site.redirects["/away"] = f"http://{slow}:{other.server_address[1]}/p0"
        urls = [f"http://{slow}:{site.port}/p1", f"http://{slow}:{site.port}/p2",
                f"http://{fast}:{site.port}/away"]
        out = fetch_partition(urls, fetch_settings({**FETCH, "delay_s": 0.3}))
    finally:
        other.shutdown()
        other.server_close()
    assert all(o.error is None and o.status == 200 for o in out), out
    asked = [(p, t) for h, p, _, t in site.log if h == slow]
    # robots.txt and /p1, /p2, and the redirect's robots.txt of the second origin and /p0
    assert sorted(p for p, _ in asked) == ["/p0", "/p1", "/p2", "/robots.txt", "/robots.txt"]
    times = [t for _, t in asked[1:]]  # a host's first page follows its robots.txt at once
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert min(gaps) >= 0.3 - 0.01, (asked, gaps)


# ---- incremental re-run = fresh run -----------------------------------------------------

def _cfg(repo_root, urls_file, out, **job):
    return load_config("bag_of_words", "local", repo_root / "conf", {"job": {
        "source": {"urls": str(urls_file)}, "output": str(out), "fetch": FETCH,
        "vector": "count", **job}})


def _docs(out) -> dict[str, dict[int, float]]:
    docs = pd.read_parquet(out / "documents")
    return {u: dict(zip(v["indices"].tolist(), v["values"].tolist(), strict=True))
            for u, v in zip(docs["url"], docs["vector"], strict=True)}


def _sentences(out) -> list[tuple]:
    s = pd.read_parquet(out / "sentences")
    return sorted((r.url, r.sentence_idx, r.sentence, tuple(r.tokens),
                   tuple(r.vector["indices"].tolist()), tuple(r.vector["values"].tolist()))
                  for r in s.itertuples())


def test_incremental_rerun_equals_a_fresh_run(spark, repo_root, tmp_path, site, wiki_pages):
    base = f"http://127.0.0.1:{site.port}"
    validators = ["etag", "date", None, "etag", "date", "etag"]
    for name, v in zip(WIKI_PAGES, validators, strict=True):
        site.put(f"/{name}", (wiki_pages / name).read_bytes(), v)
    first = WIKI_PAGES[:5]
    urls_file = tmp_path / "urls.txt"
    urls_file.write_text("\n".join(f"{base}/{n}" for n in first) + "\n")
    out = tmp_path / "out"
    r1 = run(spark, _cfg(repo_root, urls_file, out))
    assert r1.report.counts["pages_new"] == 5 and r1.report.counts["pages_gone"] == 0

    # the site changes: one page edited, one deleted, one dropped from the list, one added
    edited = WIKI_PAGES[1]
    body = (wiki_pages / edited).read_bytes().replace(b" information ", b" zyzzyva ", 3)
    site.put(f"/{edited}", body, "date")
    with site.lock:
        del site.pages[f"/{WIKI_PAGES[3]}"]
    now = [n for n in WIKI_PAGES if n != WIKI_PAGES[4]]
    urls_file.write_text("\n".join(f"{base}/{n}" for n in now) + "\n")
    site.log.clear()

    r2 = run(spark, _cfg(repo_root, urls_file, out))
    c = r2.report.counts
    assert (c["pages_new"], c["pages_changed"], c["pages_unchanged"], c["pages_gone"]) == \
        (1, 1, 2, 2), c
    assert c["pages_not_modified"] == 1  # WIKI_PAGES[0] (ETag); [2] has no validator
    assert c["pages_parsed"] == 2 and c["vocabulary_update"] == "incremental"
    assert c["documents_added"] == 2 and c["documents_removed"] == 3
    # the run released its caches and its copies of the earlier output; what it returns is
    # what it wrote
    assert cached_storage_bytes(spark) == 0
    assert r2.documents.count() == 4 and r2.pages.count() == 5
    statuses = {p: s for _, p, s, _ in site.log if p != "/robots.txt"}
    assert statuses == {f"/{WIKI_PAGES[0]}": 304, f"/{WIKI_PAGES[1]}": 200,
                        f"/{WIKI_PAGES[2]}": 200, f"/{WIKI_PAGES[3]}": 404,
                        f"/{WIKI_PAGES[5]}": 200}
    pages = pd.read_parquet(out / "pages").set_index("url")
    assert pages.loc[f"{base}/{WIKI_PAGES[0]}", "status"] == 200  # the stored page, kept
    assert pages.loc[f"{base}/{WIKI_PAGES[0]}", "html"] == (
        wiki_pages / WIKI_PAGES[0]).read_bytes().decode("utf-8")
    assert pages["change"].to_dict() == {
        f"{base}/{WIKI_PAGES[0]}": "unchanged", f"{base}/{WIKI_PAGES[1]}": "changed",
        f"{base}/{WIKI_PAGES[2]}": "unchanged", f"{base}/{WIKI_PAGES[3]}": None,
        f"{base}/{WIKI_PAGES[5]}": "new"}

    fresh = tmp_path / "fresh"
    r3 = run(spark, _cfg(repo_root, urls_file, fresh))
    assert r3.report.counts["vocabulary_update"] == "full"
    inc_vocab = pd.read_csv(out / "vocabulary.csv", keep_default_na=False)
    pd.testing.assert_frame_equal(inc_vocab, pd.read_csv(fresh / "vocabulary.csv",
                                                         keep_default_na=False))
    assert "zyzzyva" in set(pd.read_parquet(out / "state" / "word_stats")["word"])
    assert _docs(out) == _docs(fresh)
    assert _sentences(out) == _sentences(fresh)
    st_out = pd.read_parquet(out / "state" / "word_stats").sort_values("word")
    st_fresh = pd.read_parquet(fresh / "state" / "word_stats").sort_values("word")
    pd.testing.assert_frame_equal(st_out.reset_index(drop=True),
                                  st_fresh.reset_index(drop=True))

    # changed parse settings: the stored parse is not reused
    r4 = run(spark, _cfg(repo_root, urls_file, out, selector="p, li"))
    assert r4.report.counts["incremental"] == "parse settings changed: full run"
    assert r4.report.counts["vocabulary_update"] == "full"
