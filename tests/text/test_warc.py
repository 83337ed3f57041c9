"""bag_of_words on web archives (``--warc``): WARC files written here with warcio from the six
Wikipedia pages, against the same pages read from a folder; a WET file against cc-pyspark's
word count; broken archives as counted rejects."""

from __future__ import annotations

import gzip
import io
import re
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from bs4 import BeautifulSoup
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from sparkfield.core.conf import load_config
from sparkfield.core.errors import ConfigError, InputError
from sparkfield.text import run
from sparkfield.text.warc.files import list_warc_files
from tests.conftest import WIKI_PAGES as PAGES

DATE = "2024-05-01T12:00:00Z"
BIG = 1_000_000  # a vocabulary that keeps every word
WORD = re.compile(r"\w+", re.UNICODE)  # cc-pyspark's word_count rule


def _url(name: str) -> str:
    return f"https://en.wikipedia.org/wiki/{name.removesuffix('.html')}"


def _response(w: WARCWriter, url: str, body: bytes, ctype: str = "text/html; charset=utf-8",
              status: str = "200 OK", extra: tuple = ()) -> None:
    http = StatusAndHeaders(status, [("Content-Type", ctype), *extra], protocol="HTTP/1.1")
    w.write_record(w.create_warc_record(url, "response", payload=io.BytesIO(body),
                                        http_headers=http, warc_headers_dict={"WARC-Date": DATE}))


def _request(w: WARCWriter, url: str) -> None:
    http = StatusAndHeaders(f"GET {url} HTTP/1.1", [("Host", "en.wikipedia.org")],
                            is_http_request=True)
    w.write_record(w.create_warc_record(url, "request", payload=io.BytesIO(b""),
                                        http_headers=http))


def _conversion(w: WARCWriter, url: str, text: str) -> None:
    w.write_record(w.create_warc_record(url, "conversion", payload=io.BytesIO(text.encode()),
                                        warc_content_type="text/plain",
                                        warc_headers_dict={"WARC-Date": DATE}))


def _archive(records, gz: bool) -> bytes:
    buf = io.BytesIO()
    w = WARCWriter(buf, gzip=gz)
    for write, *args in records:
        write(w, *args)
    return buf.getvalue()


def _page(text: str) -> bytes:
    return f"<html><head><title>t</title></head><body><p>{text}</p></body></html>".encode()


def _cfg(repo_root: Path, out: Path, **job):
    return load_config("bag_of_words", "local", repo_root / "conf",
                       {"job": {"output": str(out), **job}})


# ---- listing ------------------------------------------------------------------------------

def test_listing_takes_a_file_a_folder_or_a_glob(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    for name in ("a/one.warc.gz", "a/b/two.warc", "a/b/three.txt", "a/.hidden.warc"):
        (tmp_path / name).write_bytes(b"x")
    names = lambda listing: sorted(Path(f).name for f, _ in listing.files)  # noqa: E731
    assert names(list_warc_files(str(tmp_path / "a"))) == ["one.warc.gz", "three.txt",
                                                           "two.warc"]
    assert names(list_warc_files(f"{tmp_path}/a/*/*.warc")) == ["two.warc"]
    assert names(list_warc_files(f"file://{tmp_path}/a/one.warc.gz")) == ["one.warc.gz"]
    with pytest.raises(InputError, match="not found"):
        list_warc_files(str(tmp_path / "missing"))
    with pytest.raises(InputError, match="no WARC files"):
        list_warc_files(f"{tmp_path}/a/*.arc")
    with pytest.raises(InputError, match="cannot open its filesystem"):
        list_warc_files("nosuchscheme://host/x.warc")


def test_exactly_one_source(repo_root, tmp_path):
    from sparkfield.text.params import BAG_OF_WORDS, derive

    p = BAG_OF_WORDS.parse({"source": {"warc": "x.warc", "html_dir": "y"}})
    with pytest.raises(ConfigError, match="--warc PATH"):
        derive(p, 1)
    assert derive(BAG_OF_WORDS.parse({"source": {"warc": "x.warc"}}), 1).source == "warc"


# ---- (a) + (d): a WARC against the same pages in a folder ---------------------------------

@pytest.fixture(scope="module")
def wiki_warc(wiki_pages, tmp_path_factory) -> Path:
    """The six pages as responses (each after its request), a warcinfo and a metadata record,
    a 404 and an image response: per-record gzip."""
    records: list = [(lambda w: w.write_record(w.create_warcinfo_record(
        "wiki.warc.gz", {"software": "test"})),)]
    for name in PAGES:
        records += [(_request, _url(name)), (_response, _url(name),
                                             (wiki_pages / name).read_bytes())]
    records += [(_response, "https://en.wikipedia.org/missing", b"<html>gone</html>",
                 "text/html", "404 Not Found"),
                (_response, "https://en.wikipedia.org/logo.png", b"\x89PNG\r\n\x1a\n....",
                 "image/png"),
                (lambda w: w.write_record(w.create_warc_record(
                    _url(PAGES[0]), "metadata", payload=io.BytesIO(b"via: test\r\n"),
                    warc_content_type="application/warc-fields")),)]
    path = tmp_path_factory.mktemp("warc") / "wiki.warc.gz"
    path.write_bytes(_archive(records, gz=True))
    return path


def test_warc_pages_equal_the_saved_pages(spark, repo_root, tmp_path, wiki_pages, wiki_warc):
    from_dir = run(spark, _cfg(repo_root, tmp_path / "dir", source={"html_dir": str(wiki_pages)},
                               vocab_size=BIG))
    from_warc = run(spark, _cfg(repo_root, tmp_path / "warc", source={"warc": str(wiki_warc)},
                                vocab_size=BIG))
    vocab_dir = pd.read_csv(tmp_path / "dir" / "vocabulary.csv")
    vocab_warc = pd.read_csv(tmp_path / "warc" / "vocabulary.csv")
    assert len(vocab_warc) > 1000
    pd.testing.assert_frame_equal(vocab_warc, vocab_dir)
    assert from_warc.report.outputs["documents"] == from_dir.report.outputs["documents"] == 6
    assert from_warc.report.outputs["sentences"] == from_dir.report.outputs["sentences"]
    texts = lambda out: sorted(pd.read_parquet(out / "documents")["text"])  # noqa: E731
    assert texts(tmp_path / "warc") == texts(tmp_path / "dir")
    pages = pd.read_parquet(tmp_path / "warc" / "pages")
    assert sorted(pages["url"]) == sorted(_url(n) for n in PAGES)
    assert set(pages["status"]) == {200} and pages["error"].isna().all()
    assert set(pages["fetched_at"].astype(str)) == {"2024-05-01 12:00:00"}
    assert set(pages["charset_source"]) == {"http"}
    # (d) every record that is not a page is counted by its type and why
    counts = from_warc.report.counts
    assert counts["warc_records"] == {"warcinfo": 1, "request": 6, "response": 8,
                                      "metadata": 1}
    assert counts["warc_responses_not_pages"] == {"http_4xx": 1, "not_html": 1}
    assert counts["warc_files"] == 1
    assert not from_warc.report.rejects.get("warc")
    assert from_warc.report.inputs["warc_records"] == 16


# ---- (b): a WET file against cc-pyspark's word count --------------------------------------

def test_wet_counts_equal_cc_pyspark_word_count(spark, repo_root, tmp_path, wiki_pages):
    from warcio.archiveiterator import ArchiveIterator

    records: list = [(lambda w: w.write_record(w.create_warcinfo_record("x.wet", {})),)]
    for name in PAGES:
        text = BeautifulSoup((wiki_pages / name).read_bytes(), "lxml").get_text("\n")
        records.append((_conversion, _url(name), text))
    wet = tmp_path / "wiki.warc.wet.gz"
    wet.write_bytes(_archive(records, gz=True))
    # cc-pyspark's word_count, in a plain warcio loop: words per conversion record
    words, docs = Counter(), Counter()
    with open(wet, "rb") as fh:
        for record in ArchiveIterator(fh):
            if record.rec_type == "conversion":
                found = WORD.findall(record.content_stream().read().decode("utf-8").lower())
                words.update(found)
                docs.update(set(found))
    res = run(spark, _cfg(repo_root, tmp_path / "out", source={"warc": str(wet)},
                          vocab_size=BIG))
    vocab = pd.read_csv(tmp_path / "out" / "vocabulary.csv", keep_default_na=False)
    assert res.report.outputs["documents"] == 6
    assert len(vocab) == len(words) > 1000
    assert dict(zip(vocab["word"], vocab["count"], strict=True)) == dict(words)
    assert dict(zip(vocab["word"], vocab["documents"], strict=True)) == dict(docs)
    assert res.report.counts["warc_records"] == {"warcinfo": 1, "conversion": 6}


# ---- (c): broken archives -----------------------------------------------------------------

def _good(i: int) -> tuple:
    return (_response, f"http://good.example/{i}", _page(f"Good page {i} reads well."))


def _set_length(data: bytes, delta: int) -> bytes:
    """The first record's Content-Length changed by ``delta``."""
    i = data.index(b"Content-Length: ")
    j = data.index(b"\r\n", i)
    return data[:i] + b"Content-Length: " + str(int(data[i + 16:j]) + delta).encode() + data[j:]


def _without(data: bytes, header: bytes) -> bytes:
    """The first record without its ``header`` line (its block, and so its length, kept)."""
    i = data.index(header)
    return data[:i] + data[data.index(b"\r\n", i) + 2:]


def _dns(w: WARCWriter) -> None:
    w.write_record(w.create_warc_record("dns:good.example", "response",
                                        payload=io.BytesIO(b"20240501 good.example 1.2.3.4"),
                                        warc_content_type="text/dns"))


CHUNKED = [("Transfer-Encoding", "chunked")]


def _chunked(*parts: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


def _torture_files(folder: Path) -> dict[str, tuple[str, list[int]]]:
    """Files of one broken case each: name -> (the reject's reason, the good pages in it)."""
    cases: dict[str, tuple[bytes, str, list[int]]] = {}
    whole = _archive([_good(1), _good(2), _good(3)], gz=False)
    cases["truncated.warc"] = (whole[:-80], "truncated", [1, 2])
    gz = _archive([_good(4), _good(5), _good(6)], gz=True)
    cases["truncated.warc.gz"] = (gz[:-30], "truncated", [4, 5])
    short = _archive([(_response, "http://bad.example/short", _page("cut")), _good(7)], False)
    cases["short_length.warc"] = (_set_length(short, -20), "bad_length", [7])
    long = _archive([(_response, "http://bad.example/long", _page("long")), _good(8),
                     _good(9)], gz=False)
    cases["long_length.warc"] = (_set_length(long, 40), "bad_length", [9])
    nourl = _archive([(_response, "http://bad.example/nourl", _page("x")), _good(10)], False)
    cases["no_target.warc"] = (_without(nourl, b"WARC-Target-URI:"), "missing_header", [10])
    cases["dns.warc"] = (_archive([(_dns,), _good(11)], gz=False), "not_http", [11])
    chunks = _archive([(_response, "http://good.example/12",
                        _chunked(b"<html><body><p>Chunked ", b"page twelve.</p></body>"),
                        "text/html", "200 OK", CHUNKED),
                       (_response, "http://bad.example/chunks", b"5\r\nnot a chunk\r\n0\r\n\r\n",
                        "text/html", "200 OK", CHUNKED), _good(13)], gz=True)
    cases["chunked.warc.gz"] = (chunks, "bad_payload", [12, 13])
    members = [_archive([_good(i)], gz=True) for i in (14, 15, 16)]
    cases["gzip_junk.warc.gz"] = (members[0] + b"\x1f\x8b junk between members" + members[1]
                                  + members[2], "bad_record", [14, 15, 16])
    cases["whole_gzip.warc.gz"] = (gzip.compress(_archive([_good(17), _good(18)], gz=False)),
                                   "gzip_members", [17])
    cases["notes.txt"] = (b"these are notes, not an archive\n" * 20, "not_warc", [])
    cases["empty.warc"] = (b"", "empty", [])
    for name, (data, _, _) in cases.items():
        (folder / name).write_bytes(data)
    return {name: (reason, good) for name, (_, reason, good) in cases.items()}


def test_broken_records_are_counted_rejects(spark, repo_root, tmp_path):
    folder = tmp_path / "archives"
    folder.mkdir()
    cases = _torture_files(folder)
    res = run(spark, _cfg(repo_root, tmp_path / "out", source={"warc": str(folder)},
                          extract="selector", selector="p"))
    rejects = pd.read_parquet(tmp_path / "out" / "rejects")
    warc = rejects[rejects["source"] == "warc"]
    files = warc["record"].str.extract(r'"file":"[^"]*/([^"/]+)"')[0]
    by_file = {name: sorted(warc.loc[files == name, "reason"]) for name in cases}
    assert by_file["long_length.warc"] == ["bad_length", "bad_record"]  # the next one lost
    for name, (reason, _) in cases.items():
        assert reason in by_file[name], (name, by_file[name])
    assert len(warc) == len(cases) + 1  # one reject a case, two where the next record is lost
    assert res.report.rejects["warc"] == dict(Counter(warc["reason"]))
    assert all(warc["record"].str.contains('"detail":"'))
    pages = pd.read_parquet(tmp_path / "out" / "pages")
    good = {f"http://good.example/{i}" for _, wanted in cases.values() for i in wanted}
    assert set(pages["url"]) == good
    assert pages["error"].isna().all()
    chunked = pd.read_parquet(tmp_path / "out" / "documents")
    text = chunked.set_index("url").loc["http://good.example/12", "text"]
    assert text == "Chunked page twelve."
