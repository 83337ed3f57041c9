"""Reading web archives: the bag_of_words reader (Spark executors framing the records, gzip
members inflated by ISA-L, HTTP parsed, payload decoded by the charset rules, 2 cores) against a
plain single-process warcio loop and a FastWARC loop over the same files.

Two queries, each run the same way on both sides:

- **read**: every record read and every response's HTTP headers and payload bytes taken; the
  loops read each payload into a bytes object, the reader delivers each page to the JVM and sums
  its bytes (``octet_length(html)``). The reader does more here: it also decodes every page.
- **characters**: the same, and the characters of every page counted: the loops decode each
  payload with its declared charset and take ``len``, the reader counts on the JVM
  (``length(html)``: Spark's UTF-8 character count scans every byte, about 0.9 GB here).

The archive is built first from the Wikipedia pages of the shared corpus (saved HTML, 1,500
pages), repeated ``--copies`` times into ``--files`` per-record-gzip WARC files of request and
response records, as a crawler writes them. Records/s count every WARC record read.

Usage: python benchmarks/warc_read.py [--copies 4] [--files 8] [--repeats 3]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from machine import describe
from pyspark.sql import functions as F

from sparkfield.core.conf import load_config
from sparkfield.core.session import build_session
from sparkfield.text.warc.read import read_warc

ROOT = Path(__file__).resolve().parents[1]
READER = "sparkfield reader, Spark local[2]"
WARCIO = "warcio loop, 1 process"
FASTWARC = "FastWARC loop, 1 process"
QUERIES = ("read", "characters")
CORPUS = Path(os.environ.get("SPARKFIELD_DATA", ROOT.parent / "shared/data")) / "corpus"


def pages() -> list[tuple[str, bytes]]:
    """The saved Wikipedia pages: (name, HTML bytes)."""
    out = []
    with tarfile.open(CORPUS / "wikipedia_uoi_2020_html.tar.xz", "r:*") as tar:
        for member in tar:
            if member.isfile() and member.name.endswith(".html"):
                out.append((member.name.rsplit("/", 1)[-1], tar.extractfile(member).read()))
    return out


def write_archive(folder: Path, docs: list[tuple[str, bytes]], copies: int, files: int) -> int:
    """``files`` .warc.gz files holding a request and a response record per page and copy;
    returns the records written."""
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    records = 0
    with contextlib.ExitStack() as stack:
        outs = [stack.enter_context(open(folder / f"crawl-{i:03d}.warc.gz", "wb"))
                for i in range(files)]
        writers = [WARCWriter(fh, gzip=True) for fh in outs]
        for n in range(copies):
            for k, (name, html) in enumerate(docs):
                writer = writers[(n * len(docs) + k) % files]
                url = f"https://en.wikipedia.org/wiki/{name[:-5]}?copy={n}"
                request = writer.create_warc_record(url, "request", payload=io.BytesIO(
                    f"GET /wiki/{name[:-5]} HTTP/1.1\r\nHost: en.wikipedia.org\r\n\r\n"
                    .encode()))
                http = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=UTF-8"),
                                                   ("Content-Length", str(len(html)))],
                                        protocol="HTTP/1.1")
                response = writer.create_warc_record(url, "response", payload=io.BytesIO(html),
                                                     http_headers=http)
                writer.write_record(request)
                writer.write_record(response)
                records += 2
    return records


def _charset(content_type: str | None) -> str:
    """The charset a Content-Type declares (UTF-8 when none)."""
    _, _, rest = (content_type or "").partition("charset=")
    return rest.split(";")[0].strip() or "utf-8"


def warcio_loop(folder: Path, chars: bool) -> int:
    from warcio.archiveiterator import ArchiveIterator

    n = 0
    for path in sorted(folder.glob("*.warc.gz")):
        with open(path, "rb") as fh:
            for record in ArchiveIterator(fh):
                n += 1
                if record.rec_type == "response":
                    ctype = record.http_headers.get_header("Content-Type")
                    body = record.content_stream().read()
                    if chars:
                        len(body.decode(_charset(ctype), "replace"))
    return n


def fastwarc_loop(folder: Path, chars: bool) -> int:
    """FastWARC 2 (Rust): gzip detected from the stream, HTTP headers parsed."""
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    n = 0
    for path in sorted(folder.glob("*.warc.gz")):
        with open(path, "rb") as fh:
            for record in ArchiveIterator(fh, parse_http=True):
                n += 1
                if record.record_type == WarcRecordType.response:
                    ctype = record.http_content_type
                    body = record.reader.read()
                    if chars:
                        len(body.decode(_charset(ctype), "replace"))
    return n


def spark_reader(spark, folder: Path, chars: bool) -> int:
    """The pages read (every response here is one), each page's bytes summed on the JVM, or its
    characters counted (``chars``)."""
    size = F.length if chars else F.octet_length
    rows = read_warc(spark, str(folder)).groupBy("kind").agg(
        F.count(F.lit(1)).alias("n"), F.sum(size("html")).alias("size")).collect()
    return sum(int(r["n"]) for r in rows if r["kind"] == "page")


def timed(fn, repeats: int) -> tuple[float, int]:
    """Median seconds of ``repeats`` runs after one untimed warm-up, and what a run returned."""
    result = fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", type=int, default=4)
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    print(describe(), flush=True)
    docs = pages()
    with tempfile.TemporaryDirectory(prefix="bench-warc-") as tmp:
        folder = Path(tmp)
        records = write_archive(folder, docs, args.copies, args.files)
        size = sum(p.stat().st_size for p in folder.iterdir())
        print(f"archive: {records:,} records ({len(docs):,} pages x {args.copies} copies, "
              "request + response) in "
              f"{args.files} .warc.gz files, {size / 2**20:.1f} MiB", flush=True)
        results = {}
        for query in QUERIES:
            chars = query == "characters"
            for name, loop in ((WARCIO, warcio_loop), (FASTWARC, fastwarc_loop)):
                seconds, n = timed(lambda loop=loop, chars=chars: loop(folder, chars),
                                   args.repeats)
                assert n == records, (name, n, records)
                results[query, name] = seconds
        cfg = load_config("bag_of_words", "local", ROOT / "conf",
                          {"spark": {"master": "local[2]"}})
        spark = build_session(cfg, app_name="bench-warc")
        spark.sparkContext.setLogLevel("WARN")
        try:
            for query in QUERIES:
                seconds, n = timed(lambda q=query: spark_reader(spark, folder, q != "read"),
                                   args.repeats)
                assert n == records // 2, (n, records)  # a page per response record
                results[query, READER] = seconds
        finally:
            spark.stop()
    for (query, name), seconds in results.items():
        print(f"{query:10s} {name:36s} {seconds:7.2f} s  {records / seconds:10,.0f} records/s")
    for query in QUERIES:
        for name in (WARCIO, FASTWARC):
            ratio = results[query, name] / results[query, READER]
            print(f"{query:10s} reader / {name}: {ratio:.2f}x records/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
