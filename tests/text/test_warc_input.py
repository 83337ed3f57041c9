"""Web-archive input (``--warc``): what is listed and what becomes a document, against warcio
reading the same files."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest
from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from sparkfield.core.conf import load_config
from sparkfield.core.errors import InputError
from sparkfield.text import run
from sparkfield.text.warc.files import list_warc_files, on_default_fs
from tests.conftest import job_module

ROOT = Path(__file__).resolve().parents[2]


def _archive(*pages: tuple[str, str, str]) -> bytes:
    """A per-record gzipped WARC of (url, WARC-Date, paragraph text) responses."""
    buf = io.BytesIO()
    w = WARCWriter(buf, gzip=True)
    for url, date, text in pages:
        body = f"<html><head><title>t</title></head><body><p>{text}</p></body></html>"
        http = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8")],
                                protocol="HTTP/1.1")
        w.write_record(w.create_warc_record(url, "response", payload=io.BytesIO(body.encode()),
                                            http_headers=http,
                                            warc_headers_dict={"WARC-Date": date}))
    return buf.getvalue()


def _warcio_pages(files: list[Path]) -> list[tuple[str, str, bytes]]:
    """(url, WARC-Date, payload) of every 200 HTML response, as warcio reads them."""
    out = []
    for f in files:
        with open(f, "rb") as fh:
            for rec in ArchiveIterator(fh):
                if rec.rec_type == "response" and rec.http_headers.get_statuscode() == "200":
                    out.append((rec.rec_headers.get_header("WARC-Target-URI"),
                                rec.rec_headers.get_header("WARC-Date"),
                                rec.content_stream().read()))
    return out


def _cfg(out: Path, warc: str):
    return load_config("bag_of_words", "local", ROOT / "conf",
                       {"job": {"output": str(out), "source": {"warc": warc},
                                "extract": "selector", "selector": "p", "vocab_size": 1000}})


def _names(listing) -> list[str]:
    return sorted(Path(f).name for f, _ in listing.files)


# ---- two captures of one URL --------------------------------------------------------------

def test_two_captures_of_one_url_give_one_document_the_latest(spark, tmp_path):
    folder = tmp_path / "crawl"
    folder.mkdir()
    old = "Zebras graze slowly. Alpacas watch them."
    new = "Zebras run fast. Zebras sleep late."
    (folder / "first.warc.gz").write_bytes(_archive(
        ("http://a.example/", "2024-05-01T12:00:00Z", old),
        ("http://b.example/", "2024-05-01T12:00:00Z", "Otters swim in rivers.")))
    (folder / "second.warc.gz").write_bytes(_archive(
        ("http://a.example/", "2024-06-01T12:00:00Z", new)))
    seen = _warcio_pages(sorted(folder.iterdir()))
    latest = {}
    for url, _date, body in sorted(seen, key=lambda r: r[1]):
        latest[url] = body
    res = run(spark, _cfg(tmp_path / "out", str(folder)))
    out = tmp_path / "out"
    docs = pd.read_parquet(out / "documents")
    assert sorted(docs["url"]) == sorted(latest)  # one document a URL, as many as warcio's
    assert res.report.outputs["documents"] == len(docs) == len(latest)
    assert docs.set_index("url").loc["http://a.example/", "text"] == new
    pages = pd.read_parquet(out / "pages")
    assert len(pages) == res.report.outputs["pages"] == len(latest)
    sentences = pd.read_parquet(out / "sentences")
    assert sorted(sentences.groupby("url").size().items()) == [
        ("http://a.example/", 2), ("http://b.example/", 1)]
    vocab = pd.read_csv(out / "vocabulary.csv").set_index("word")
    assert vocab.loc["zebras", "count"] == 2 and vocab.loc["zebras", "documents"] == 1
    assert "alpacas" not in vocab.index
    assert res.report.counts["warc_earlier_captures"] == len(seen) - len(latest) == 1


# ---- symbolic links -----------------------------------------------------------------------

def _linked_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "crawl"
    (folder / "sub").mkdir(parents=True)
    (folder / "one.warc.gz").write_bytes(_archive(
        ("http://one.example/", "2024-05-01T12:00:00Z", "Herons fish at dawn.")))
    (folder / "sub" / "two.warc.gz").write_bytes(_archive(
        ("http://two.example/", "2024-05-01T12:00:00Z", "Kestrels hover over fields.")))
    (folder / "sub" / "up").symlink_to("..")  # a loop: crawl/sub/up/sub/up/...
    (folder / "gone.warc.gz").symlink_to(tmp_path / "missing.warc.gz")
    return folder


def test_a_link_loop_is_followed_once_and_a_dangling_link_is_named(tmp_path):
    listing = list_warc_files(str(_linked_folder(tmp_path)))
    assert _names(listing) == ["one.warc.gz", "two.warc.gz"]
    assert listing.revisits == 1
    assert [(Path(f).name, why) for f, why in listing.unreadable.items()] == [
        ("gone.warc.gz", "a broken link")]


def test_a_dangling_link_is_a_counted_reject(spark, tmp_path):
    folder = _linked_folder(tmp_path)
    res = run(spark, _cfg(tmp_path / "out", str(folder)))
    seen = _warcio_pages([folder / "one.warc.gz", folder / "sub" / "two.warc.gz"])
    assert res.report.outputs["documents"] == len(seen) == 2
    assert res.report.rejects["warc"] == {"unreadable": 1}
    assert res.report.counts["directory_links_not_followed"] == 1
    rejects = pd.read_parquet(tmp_path / "out" / "rejects")
    record = rejects.loc[rejects["source"] == "warc", "record"].item()
    assert "gone.warc.gz" in record and "a broken link" in record


# ---- a filesystem that opens but cannot be listed -----------------------------------------

def test_a_path_that_cannot_be_listed_is_one_error_line(tmp_path, capsys, monkeypatch):
    # S3 at a port where nothing listens: the filesystem opens, listing it fails
    for name, value in {"AWS_ENDPOINT_URL": "http://127.0.0.1:1", "AWS_REGION": "us-east-1",
                        "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y",
                        "AWS_EC2_METADATA_DISABLED": "true"}.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(InputError, match="cannot list"):
        list_warc_files("s3://bucket/crawl")
    code = job_module("bag_of_words").main(
        ["--conf-dir", str(ROOT / "conf"), "--warc", "s3://bucket/crawl/*.warc.gz",
         "--output", str(tmp_path / "out")])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert code == 2 and len(lines) == 1, err[-3000:]
    assert "s3://bucket/crawl/*.warc.gz" in lines[0] and "cannot list" in lines[0]
    assert "Traceback" not in err


# ---- names that look like globs or URIs ---------------------------------------------------

def test_an_existing_path_is_taken_literally(tmp_path, monkeypatch):
    odd = tmp_path / "crawl[1]"
    odd.mkdir()
    (odd / "a.warc").write_bytes(b"x")
    (odd / "b*.warc").write_bytes(b"x")
    (tmp_path / "crawl1").mkdir()
    (tmp_path / "crawl1" / "other.warc").write_bytes(b"x")
    assert _names(list_warc_files(str(odd))) == ["a.warc", "b*.warc"]
    assert _names(list_warc_files(str(odd / "b*.warc"))) == ["b*.warc"]
    # a path that does not exist as written is a glob, below the deepest folder that does
    assert _names(list_warc_files(f"{odd}/a*")) == ["a.warc"]
    assert _names(list_warc_files(f"{tmp_path}/crawl[0-9]/*.warc")) == ["other.warc"]


def test_a_relative_path_with_a_colon_is_local(tmp_path, monkeypatch):
    (tmp_path / "crawl:2024").mkdir()
    (tmp_path / "crawl:2024" / "a.warc").write_bytes(b"x")
    monkeypatch.chdir(tmp_path)
    assert _names(list_warc_files("crawl:2024")) == ["a.warc"]
    assert _names(list_warc_files("crawl:2024/a.warc")) == ["a.warc"]
    assert _names(list_warc_files("crawl:20*/*.warc")) == ["a.warc"]
    with pytest.raises(InputError, match="not found"):
        list_warc_files("crawl:2025/a.warc")
    with pytest.raises(InputError, match="cannot open its filesystem"):
        list_warc_files("nosuchscheme://host/x.warc")


def test_a_path_without_a_scheme_is_on_the_default_filesystem(spark, tmp_path):
    # as Spark's own inputs: on a cluster whose fs.defaultFS is HDFS, /data/crawl is there
    hconf = spark.sparkContext._jsc.hadoopConfiguration()
    before = hconf.get("fs.defaultFS")
    try:
        hconf.set("fs.defaultFS", "hdfs://127.0.0.1:9")
        assert on_default_fs(spark, "/data/crawl/*.warc.gz") == \
            "hdfs://127.0.0.1:9/data/crawl/*.warc.gz"
        assert on_default_fs(spark, "file:/data/crawl") == "file:/data/crawl"
        assert on_default_fs(spark, "s3://b/crawl") == "s3://b/crawl"
    finally:
        hconf.set("fs.defaultFS", before)
    assert on_default_fs(spark, str(tmp_path)) == str(tmp_path)
    assert on_default_fs(spark, "crawl:2024/a.warc") == "crawl:2024/a.warc"
