"""The bag-of-words pure step on three inline pages: no fetch, no run report, no output, every
count checked against a count made by hand."""

from contextlib import ExitStack
from datetime import datetime

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sparkfield.text.crawl.fetch import PAGES_SCHEMA
from sparkfield.text.crawl.state import CrawlState
from sparkfield.text.job import compute
from sparkfield.text.params import BAG_OF_WORDS


def _page(url: str, html: str | None, status: int, error: str | None) -> tuple:
    return (url, url, status, datetime(2024, 5, 1), "text/html", html, error, None, 1, None,
            None, "utf-8" if html else None, "http" if html else None)


def test_compute_counts_pages_sentences_and_words_without_a_report(spark):
    rows = [
        _page("https://a.example/cats",
              "<html><body><p>Cats chase mice. Dogs chase cats.</p></body></html>", 200, None),
        _page("https://a.example/birds",
              "<html><body><p>Birds sing songs.</p></body></html>", 200, None),
        _page("https://a.example/gone", None, 404, "http_4xx"),  # the failed page: no HTML
    ]
    state = CrawlState(fingerprint={})
    pages = state.annotate(spark.createDataFrame(rows, PAGES_SCHEMA).withColumn(
        "doc_id", F.col("url")))
    p = BAG_OF_WORDS.parse({"output": None, "extract": "selector", "selector": "p"})

    with ExitStack() as stack:
        c = compute(spark, p, pages, state, stack)
        sentences = c.sentence_vectors.count()
        documents = c.document_vectors.count()
        reasons = [r["reason"] for r in c.rejects.collect()]

    s = c.stats
    assert s.counts["pages_failed"] == 1
    assert s.counts["pages_new"] == 2 and s.counts["pages_changed"] == 0
    assert s.counts["pages_gone"] == 0
    assert s.counts["vocabulary_update"] == "full"
    assert s.rejects == {"pages": {"http_4xx": 1}} and reasons == ["http_4xx"]
    # "Cats chase mice." "Dogs chase cats." "Birds sing songs."; split as they are read (the
    # job counts them once they are written), so compute's numbers have no count of them
    assert sentences == 3 and "sentences" not in s.outputs
    assert s.outputs["documents"] == documents == 2
    assert s.outputs["duplicates"] == 0
    # cats, chase, mice, dogs, birds, sing, songs; chase and cats twice
    assert s.outputs["vocabulary"] == 7
    counts = c.vocabulary.set_index("word")["count"].to_dict()
    assert counts == {"cats": 2, "chase": 2, "mice": 1, "dogs": 1, "birds": 1, "sing": 1,
                      "songs": 1}
    # the near-duplicates stay a cached frame: the driver holds none of their rows
    assert isinstance(c.duplicates, DataFrame)
    assert [(x["name"], x["rows"]) for x in s.cached] == [
        ("documents", 2), ("signatures", 2), ("duplicates", 0), ("term_counts", 2)]
