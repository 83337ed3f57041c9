"""bag_of_words end to end: a real HTTP server on 127.0.0.1 serving real Wikipedia pages and
the failure cases a crawler meets; vocabulary counts against an independent count."""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict
from http.server import ThreadingHTTPServer
from pathlib import Path

import pandas as pd
import pytest
from bs4 import BeautifulSoup
from pyspark.sql import functions as F

from sparkfield.core.conf import load_config
from sparkfield.core.errors import InputError
from sparkfield.text import run
from sparkfield.text.crawl.request import REASONS
from sparkfield.text.job import pages_from_html_dir
from tests.conftest import WIKI_PAGES as PAGES
from tests.text.http_site import QuietHandler

FETCH = {"delay_s": 0.05, "backoff_s": 0.1, "max_retries": 2, "connect_timeout_s": 2,
         "read_timeout_s": 1, "max_redirects": 4, "max_bytes": 400_000,
         "max_retry_after_s": 5, "user_agent": "sparkfield-test"}


class Site:
    def __init__(self, pages: Path):
        self.pages = pages
        self.hits: Counter = Counter()
        self.spans: dict[str, list] = defaultdict(list)
        self.lock = threading.Lock()


def make_handler(site: Site):
    class Handler(QuietHandler):
        def do_GET(self):  # noqa: N802
            start = time.monotonic()
            path = self.path
            with site.lock:
                site.hits[path] += 1
                n = site.hits[path]
            try:
                self._route(path, n)
            finally:  # a span ends when its reply begins: the thread may note it later
                end = self.replied_at or time.monotonic()
                with site.lock:
                    site.spans[self.headers["Host"]].append((start, end, path))

        def _route(self, path, n):
            if path == "/robots.txt":
                return self._send(200, b"User-agent: *\nDisallow: /private/\n", "text/plain")
            if path.startswith("/wiki/"):
                return self._send(200, (site.pages / path[6:]).read_bytes())
            if path == "/flaky":
                if n == 1:
                    return self._send(500, b"oops")
                return self._send(200, b"<html><p>Flaky page works now.</p></html>")
            if path == "/busy":
                if n == 1:
                    return self._send(429, b"", headers={"Retry-After": "1"})
                return self._send(200, b"<html><p>Patience pays.</p></html>")
            if path == "/slow":
                time.sleep(2.5)
                return self._send(200, b"<html><p>too late</p></html>")
            if path.startswith("/loop/"):
                nxt = "/loop/b" if path == "/loop/a" else "/loop/a"
                return self._send(302, b"", headers={"Location": nxt})
            if path == "/image.png":
                return self._send(200, b"\x89PNG....", "image/png")
            if path == "/big":
                return self._send(200, b"<html><p>" + b"word " * 100_000 + b"</p></html>")
            if path == "/latin1":
                return self._send(200, "<html><p>Café crème à Noël.</p></html>".encode(
                    "iso-8859-1"), "text/html; charset=iso-8859-1")
            return self._send(404, b"not here")

    return Handler


class QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address):  # timed-out clients close early
        pass


@pytest.fixture(scope="module")
def site(wiki_pages):
    s = Site(wiki_pages)
    server = QuietServer(("127.0.0.1", 0), make_handler(s))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    s.port = server.server_address[1]
    yield s
    server.shutdown()


def _urls(site) -> dict[str, str]:
    a = f"http://127.0.0.1:{site.port}"
    b = f"http://localhost:{site.port}"  # a second host name for the same server
    expected = {f"{a}/wiki/{p}": "ok" for p in PAGES[:3]}
    expected.update({f"{b}/wiki/{p}": "ok" for p in PAGES[3:]})
    expected.update({
        f"{a}/missing": "http_4xx", f"{a}/flaky": "ok", f"{b}/busy": "ok",
        f"{a}/slow": "timeout", f"{a}/loop/a": "redirects",
        f"{a}/private/secret": "robots", f"{b}/image.png": "not_html",
        f"{a}/big": "too_large", f"{b}/latin1": "ok", "ftp://example.org/file": "unsupported_url",
    })
    return expected


def _cfg(repo_root, urls_file, out, **job):
    return load_config("bag_of_words", "local", repo_root / "conf", {"job": {
        "source": {"urls": str(urls_file)}, "output": str(out), "fetch": FETCH, **job}})


def test_every_url_has_exactly_one_outcome(spark, repo_root, tmp_path, site):
    expected = _urls(site)
    urls_file = tmp_path / "urls.txt"
    urls_file.write_text("# crawl list\n" + "\n".join(expected) + "\n" + next(iter(expected))
                         + "\n\n")
    out = tmp_path / "out"
    res = run(spark, _cfg(repo_root, urls_file, out))
    pages = pd.read_parquet(out / "pages")
    assert sorted(pages["url"]) == sorted(expected)  # each once, duplicate line folded
    assert res.report.counts["duplicate_urls"] == 1
    for row in pages.itertuples():
        want = expected[row.url]
        if want == "ok":
            assert row.error is None and row.status == 200 and row.html, row
        else:
            assert row.error == want and row.error_detail, (row.url, row.error, row.error_detail)
    by_url = pages.set_index("url")
    a = f"http://127.0.0.1:{site.port}"
    assert by_url.loc[f"{a}/flaky", "attempts"] == 2
    assert "Café crème à Noël" in by_url.loc[f"http://localhost:{site.port}/latin1", "html"]
    # bounded loops: retries, redirects; robots-disallowed never requested
    assert site.hits["/slow"] == FETCH["max_retries"] + 1
    assert site.hits["/loop/a"] + site.hits["/loop/b"] <= FETCH["max_redirects"] + 2
    assert site.hits["/private/secret"] == 0
    assert site.hits["/missing"] == 1
    # politeness: never two requests at once to the same host (a request arriving before the
    # reply to the one before it began). The server may still be busy with a request the client
    # gave up on (it waited read_timeout_s for it: /slow, or any reply held up on a loaded
    # machine) when the retry arrives; nothing else may overlap.
    for spans in site.spans.values():
        spans = sorted(spans)
        overlaps = [(a, b) for a, b in zip(spans, spans[1:], strict=False)
                    if b[0] < a[1] and b[0] < a[0] + FETCH["read_timeout_s"]]
        assert not overlaps, overlaps
    rejects = pd.read_parquet(out / "rejects")
    failed = pages[pages["error"].notna()]
    assert len(rejects[rejects["source"] == "pages"]) == len(failed) == 7
    # reasons grouped under their keys; the exception text is the detail in the record
    assert set(res.report.rejects["pages"]) <= set(REASONS)
    assert "ReadTimeout" in by_url.loc[f"{a}/slow", "error_detail"]
    assert "Read timed out" in rejects.set_index("reason").loc["timeout", "record"]
    assert res.report.inputs["urls"] == len(expected) + 1
    assert res.report.skew["fetch.urls_per_partition"]["partitions"] >= 1

    # a re-run revalidates what succeeded (this server sends no ETag / Last-Modified: a plain
    # GET, the content hash tells unchanged) and fetches again what failed
    before = Counter(site.hits)
    res2 = run(spark, _cfg(repo_root, urls_file, out))
    again = {p: site.hits[p] - before[p] for p in site.hits}
    assert again[f"/wiki/{PAGES[0]}"] == 1 and again["/flaky"] == 1
    c = res2.report.counts
    assert (c["pages_new"], c["pages_changed"], c["pages_gone"]) == (0, 0, 0)
    assert c["pages_unchanged"] == len(expected) - 7
    assert again["/missing"] == 1
    assert len(pd.read_parquet(out / "pages")) == len(expected)
    # --refresh fetches everything again
    before = Counter(site.hits)
    run(spark, _cfg(repo_root, urls_file, out, refresh=True))
    assert site.hits[f"/wiki/{PAGES[0]}"] - before[f"/wiki/{PAGES[0]}"] == 1


def _oracle(pages_dir: Path) -> tuple[pd.DataFrame, dict[str, Counter]]:
    """The top-200 table and each page's word counts, counted independently of the job."""
    import re

    counts, docs, per_page = Counter(), Counter(), {}
    for f in sorted(pages_dir.iterdir()):
        soup = BeautifulSoup(f.read_bytes(), "lxml")
        for t in soup(["script", "style", "noscript", "template"]):
            t.decompose()
        for br in soup("br"):
            br.replace_with("\n")
        words = [w for p in soup.find_all("p")  # inline elements run together
                 for w in re.findall(r"\w+", p.get_text("").lower())]
        counts.update(words)
        docs.update(set(words))
        per_page[f.name] = Counter(words)
    table = pd.DataFrame({"word": list(counts), "count": [counts[w] for w in counts],
                          "documents": [docs[w] for w in counts]})
    top = table.sort_values(["count", "word"], ascending=[False, True]).head(200) \
        .reset_index(drop=True)
    return top, per_page


@pytest.mark.parametrize("vector", ["binary", "count", "tfidf"])
def test_vocabulary_counts_equal_an_independent_count(spark, repo_root, tmp_path, wiki_pages,
                                                      vector):
    out = tmp_path / "out"
    cfg = load_config("bag_of_words", "local", repo_root / "conf", {"job": {
        "source": {"html_dir": str(wiki_pages)}, "output": str(out), "vector": vector,
        "extract": "selector"}})
    res = run(spark, cfg)
    vocab = pd.read_csv(out / "vocabulary.csv", keep_default_na=False)
    want, per_page = _oracle(wiki_pages)
    pd.testing.assert_frame_equal(vocab[["word", "count", "documents"]], want,
                                  check_dtype=False)
    assert vocab["rank"].tolist() == list(range(1, 201))
    sents = pd.read_parquet(out / "sentences")
    docs = pd.read_parquet(out / "documents")
    assert len(docs) == len(PAGES)
    # the sentences are split as they are written, and counted from what was written; only
    # TF-IDF, whose IDF is fitted on them first, caches them
    assert res.report.outputs["sentences"] == len(sents) > len(PAGES)
    cached_names = {c["name"] for c in res.report.cached}
    assert ("sentences" in cached_names) == (vector == "tfidf"), cached_names
    assert list(docs.columns) == ["doc_id", "url", "text", "title", "vector"]
    assert {"doc_id", "url", "sentence_idx", "sentence", "tokens", "vector"} <= set(sents.columns)
    vocab_index = {w: i for i, w in enumerate(vocab["word"])}
    first = sents.iloc[0]
    vec = first["vector"]
    size = vec["size"] if isinstance(vec, dict) else len(vec)
    assert size == 200
    toks = Counter(t for t in first["tokens"] if t in vocab_index)
    got = dict(zip(vec["indices"], vec["values"], strict=True))
    if vector == "binary":
        assert got == {vocab_index[t]: 1.0 for t in toks}
    elif vector == "count":
        assert got == {vocab_index[t]: float(n) for t, n in toks.items()}
    else:
        assert set(got) == {vocab_index[t] for t in toks} - {
            i for i, v in got.items() if v == 0}
    # document vectors: each page's own counts of the vocabulary words
    for url, dvec in zip(docs["url"], docs["vector"], strict=True):
        page = per_page[url.rsplit("/", 1)[-1]]
        want_doc = {vocab_index[w]: n for w, n in page.items() if w in vocab_index}
        got_doc = dict(zip(dvec["indices"], dvec["values"], strict=True))
        if vector == "binary":
            assert got_doc == dict.fromkeys(want_doc, 1.0)
        elif vector == "count":
            assert got_doc == {i: float(n) for i, n in want_doc.items()}
        else:
            assert set(got_doc) <= set(want_doc)
    assert (out / "top_words.png").read_bytes()[:4] == b"\x89PNG"
    assert res.report.outputs["documents"] == len(PAGES)


def test_an_empty_vocabulary_is_bad_input_and_writes_nothing(spark, repo_root, tmp_path,
                                                            wiki_pages):
    out = tmp_path / "out"
    cfg = load_config("bag_of_words", "local", repo_root / "conf", {"job": {
        "source": {"html_dir": str(wiki_pages)}, "output": str(out),
        "min_df": len(PAGES) + 1}})
    with pytest.raises(InputError, match=f"passes min_df={len(PAGES) + 1}"):
        run(spark, cfg)
    assert not out.exists()


INLINE_PAGE = """<html><head><meta charset="windows-1252"><title>Artemis</title></head><body>
<nav><a href="/">Home</a> <a href="/about">About</a></nav><article><h1>The goddess</h1>
<p><span class="dropcap">M</span>uch of what is known about Arte<a href="/a">mis</a> comes from
the hymns, which were sung at her temples along the coast of Asia Minor for many centuries.</p>
<p>Her sanctuary at Ephesus was counted among the wonders of the ancient world; pilgrims came
from Athens, Corinth and Syracuse to see it, and the caf\xe9 owners of the town grew rich.</p>
</article><footer>Impressum</footer></body></html>"""


def test_html_dir_is_read_recursively_and_counted_with_main_text(spark, repo_root, tmp_path,
                                                                  wiki_pages):
    src = tmp_path / "saved"
    (src / "a" / "b").mkdir(parents=True)
    for i, name in enumerate(PAGES):  # at three depths
        folder = [src, src / "a", src / "a" / "b"][i % 3]
        (folder / name).write_bytes((wiki_pages / name).read_bytes())
    (src / "a" / "b" / "artemis.html").write_bytes(INLINE_PAGE.encode("cp1252"))
    (src / "a" / "empty.html").write_bytes(
        b"<html><body><script>go()</script><img src=a.png></body></html>")
    (src / "broken.html").write_bytes(b"<html><meta charset='utf-8'><p>Caf\xe9 \xff</p>"
                                      + b"<p>word </p>" * 50)
    out = tmp_path / "out"
    res = run(spark, load_config("bag_of_words", "local", repo_root / "conf", {"job": {
        "source": {"html_dir": str(src)}, "output": str(out)}}))
    n = len(PAGES) + 3
    assert res.report.inputs["html_files"] == n  # the denominator of --max-reject-fraction
    docs = pd.read_parquet(out / "documents").set_index("url")
    assert list(docs.columns[:2]) == ["doc_id", "text"]
    text = docs.loc[next(u for u in docs.index if u.endswith("/a/b/artemis.html")), "text"]
    assert "Much of what is known about Artemis" in text  # inline markup splits no word
    assert "café owners" in text  # the declared windows-1252
    assert "Impressum" not in text and "Home" not in text  # boilerplate left out
    rejects = pd.read_parquet(out / "rejects")
    assert rejects["reason"].tolist() == ["no main text found"]
    assert "/a/empty.html" in rejects["record"][0]
    assert res.report.counts["pages_with_replacement_chars"] == 1
    assert res.report.reject_fraction() == (n, 1 / n)
    assert len(docs) == n - 1


def test_an_empty_html_dir_is_bad_input(spark, repo_root, tmp_path):
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    cfg = load_config("bag_of_words", "local", repo_root / "conf", {"job": {
        "source": {"html_dir": str(tmp_path / "empty")}, "output": str(tmp_path / "out")}})
    with pytest.raises(InputError, match="no files under the HTML directory"):
        run(spark, cfg)


def test_saved_pages_are_laid_out_for_parsing_by_their_sizes(spark, tmp_path, wiki_pages):
    """One partition per task slot, of about equal bytes, every file once (the file source
    alone makes four partitions of these seven files, one of them empty)."""
    src = tmp_path / "saved"
    src.mkdir()
    sizes = {}
    for name in PAGES:
        (src / name).write_bytes((wiki_pages / name).read_bytes())
        sizes[name] = (src / name).stat().st_size
    (src / "_underscored.html").write_bytes(b"<p>kept too</p>")
    sizes["_underscored.html"] = 15
    pages, n_files, _ = pages_from_html_dir(spark, str(src))
    assert n_files == len(sizes)
    parts = pages.select(F.element_at(F.split("url", "/"), -1).alias("name")).rdd.glom() \
        .collect()
    assert len(parts) == spark.sparkContext.defaultParallelism == 2
    names = [r["name"] for part in parts for r in part]
    assert sorted(names) == sorted(sizes)
    loads = [sum(sizes[r["name"]] for r in part) for part in parts]
    assert abs(loads[0] - loads[1]) <= max(sizes.values())  # LPT: within the largest page
    assert min(loads) > 0


def _one_row_group_of_pages(target: Path) -> list[str]:
    """64 pages (url, html) written as a Parquet file of one row group; their URLs."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    urls = [f"https://example.org/book/{i}" for i in range(64)]
    pq.write_table(pa.table({"url": urls, "html": [f"<p>page {i}</p>" for i in range(64)]}),
                   target, row_group_size=64)
    return urls


def test_pages_of_one_parquet_row_group_are_spread_over_the_task_slots(spark, tmp_path):
    """A Parquet file written in one row group is read by one of its splits, one task holding
    every page; spread, each of the 4 partitions per task slot holds some, every page once."""
    from sparkfield.text.job import spread_pages

    urls = _one_row_group_of_pages(tmp_path / "pages.parquet")
    read = spark.read.parquet(str(tmp_path / "pages.parquet"))

    def filled(df):
        return [len(p) for p in df.select("url").rdd.glom().collect() if p]

    assert len(filled(read)) == 1  # the layout that needs spreading
    spread = spread_pages(read.withColumn("doc_id", F.sha2("url", 256)))
    assert spread.rdd.getNumPartitions() == 4 * spark.sparkContext.defaultParallelism
    assert len(filled(spread)) == spread.rdd.getNumPartitions()
    assert sorted(r["url"] for r in spread.collect()) == sorted(urls)


def test_the_job_spreads_parquet_pages_and_keeps_saved_htmls_layout(spark, repo_root,
                                                                    tmp_path):
    """load() spreads --pages read as one partition over 4 partitions per task slot; saved
    HTML keeps its layout by file size, one partition per slot."""
    from contextlib import ExitStack

    from sparkfield.text.job import load
    from sparkfield.text.params import BAG_OF_WORDS, derive

    html = tmp_path / "html"
    html.mkdir()
    for i in range(16):
        (html / f"p{i}.html").write_text(f"<p>Page {i} holds a few words.</p>" * (i + 1))
    _one_row_group_of_pages(tmp_path / "pages.parquet")
    slots = spark.sparkContext.defaultParallelism
    for source, path, n_parts, n_rows in (("pages", tmp_path / "pages.parquet", 4 * slots, 64),
                                          ("html_dir", html, slots, 16)):
        cfg = load_config("bag_of_words", "local", repo_root / "conf",
                          {"job": {"source": {source: str(path)}}})
        p = BAG_OF_WORDS.parse(cfg.job)
        with ExitStack() as stack:
            loaded = load(spark, p, derive(p, cfg.practices.sample_seed), stack)
            sizes = [len(part) for part in loaded.pages.select("url").rdd.glom().collect()]
        assert len(sizes) == n_parts and min(sizes) > 0 and sum(sizes) == n_rows, \
            (source, sizes)


def test_the_result_is_the_same_with_and_without_an_output(spark, repo_root, tmp_path,
                                                           wiki_pages):
    src = tmp_path / "saved"
    src.mkdir()
    for name in PAGES[:3]:
        (src / name).write_bytes((wiki_pages / name).read_bytes())
    (src / "empty.html").write_bytes(b"")  # a reject

    def cfg(out: Path | None):
        return load_config("bag_of_words", "local", repo_root / "conf", {"job": {
            "source": {"html_dir": str(src)}, "output": str(out) if out else None,
            "extract": "selector"}})

    alone = run(spark, cfg(None))
    written = run(spark, cfg(tmp_path / "out"))
    assert (alone.output, written.output) == (None, str(tmp_path / "out"))
    for name in ("pages", "sentences", "documents"):
        a, b = getattr(alone, name), getattr(written, name)
        assert a.columns == b.columns, name
        # saved pages are stamped when they are read
        rows = [sorted(df.drop("fetched_at").toJSON().collect()) for df in (a, b)]
        assert rows[0] == rows[1] and rows[0], name
    pd.testing.assert_frame_equal(alone.vocabulary, written.vocabulary)
    for part in ("inputs", "outputs", "rejects", "counts"):
        assert getattr(alone.report, part) == getattr(written.report, part), part
    assert written.report.rejects == {"pages": {"empty": 1}}
    # counted by splitting them without an output, from the written files with one
    assert alone.report.outputs["sentences"] == written.sentences.count() > 3
