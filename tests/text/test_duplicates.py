"""Near-duplicates: real Wikipedia pages plus lightly edited copies (a mirror, a syndicated copy
with words changed, a truncated copy); similarities checked against an exact Jaccard computed
here on the same shingles; duplicates kept out of the vocabulary unless asked."""

from __future__ import annotations

import re
import shutil
from itertools import combinations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from pyspark.sql import types as T

from sparkfield.core.conf import load_config
from sparkfield.core.errors import ConfigError
from sparkfield.text import run
from sparkfield.text.bag_of_words import duplicates
from sparkfield.text.bag_of_words.duplicates import (
    DUPLICATES,
    _copies_and_near_pairs,
    _hash_functions,
    band_keys,
    find_duplicates,
    shingle_hash_sets,
    shingle_hashes,
    shingles,
    signature,
    signature_batches,
    signatures,
)
from sparkfield.text.bag_of_words.normalise import tokens
from sparkfield.text.params import BAG_OF_WORDS, duplicate_settings
from tests.conftest import WIKI_PAGES

K = 5


def _oracle_shingles(text: str | None) -> set[tuple[str, ...]]:
    """Word 5-shingles as tuples (independent of the library's string joining)."""
    words = re.findall(r"\w+", (text or "").lower())
    if len(words) <= K:
        return {tuple(words)} if words else set()
    return {tuple(words[i:i + K]) for i in range(len(words) - K + 1)}


def _jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b)


def test_shingles():
    assert shingles("One two three four five six. One two three four five", 5) == [
        "one two three four five", "two three four five six", "three four five six one",
        "four five six one two", "five six one two three", "six one two three four"]
    assert shingles("Too short", 5) == ["too short"]
    assert shingles("", 5) == [] and shingles(None, 5) == []
    assert shingles("a b c", 1) == ["a", "b", "c"]


def test_shingle_hashes_are_the_shingle_sets(wiki_pages):
    """One 64-bit hash per distinct shingle: the sets' sizes and every pair's Jaccard
    similarity are those of the shingles as strings, on real pages and on short texts."""
    texts = [(wiki_pages / n).read_text("utf-8") for n in WIKI_PAGES]
    texts += ["Too short", "too SHORT", "a b c d e", "a b c d e f", "", None]
    hashes = [shingle_hashes(t, K) for t in texts]
    strings = [set(shingles(t, K)) for t in texts]
    for h, st in zip(hashes, strings, strict=True):
        assert h.dtype == "uint64" and len(h) == len(st)
        assert (h[1:] > h[:-1]).all()  # sorted, distinct
    for i, j in combinations(range(len(texts) - 2), 2):
        inter = len(set(hashes[i].tolist()) & set(hashes[j].tolist()))
        assert inter == len(strings[i] & strings[j])
    assert (hashes[6] == hashes[7]).all()  # case folded, as the tokens are
    assert not set(shingle_hashes("a b", 5).tolist()) & set(shingle_hashes("a b c", 5).tolist())


def test_shingle_sets_of_many_texts_are_each_texts_own(monkeypatch):
    """Texts tokenised and hashed together (token hashes kept between calls) give each
    text the set it has alone: no shingle runs from one text into the next."""
    texts = ["one two three four five six", "seven eight nine ten eleven", None, "",
             "Too short", "six seven eight nine ten", "ΣΑ ΟΔΟΣ\nnaïve café x y z"] * 2
    kept: dict[str, int] = {}
    hashed = []
    token_hash = duplicates._token_hash
    monkeypatch.setattr(duplicates, "_token_hash", lambda w: hashed.append(w) or token_hash(w))
    together = shingle_hash_sets(pa.array(texts, pa.string()), K, kept)
    assert sorted(hashed) == sorted({w for t in texts if t for w in tokens(t)})  # each once
    again = shingle_hash_sets(pa.array(texts, pa.string()), K, kept)
    assert len(hashed) == len(kept)  # the second call hashed no word again
    monkeypatch.undo()
    for text, a, b in zip(texts, together, again, strict=True):
        alone = shingle_hashes(text, K)
        assert np.array_equal(a, alone) and np.array_equal(b, alone)
        assert len(alone) == len(set(shingles(text, K)))


def test_signature_batches_are_cut_by_text_size(monkeypatch):
    texts = ["the cat sat on the mat today", None, "Too short", "", "a b c d e f g h"] * 4
    batch = pa.RecordBatch.from_arrays([pa.array([f"u{i}" for i in range(len(texts))]),
                                        pa.array(texts, pa.string())], names=["url", "text"])
    s = duplicate_settings()
    whole = [r for b in signature_batches(iter([batch]), s) for r in b.to_pylist()]
    monkeypatch.setattr(duplicates, "CHUNK_BYTES", 30)
    cut = list(signature_batches(iter([batch]), s))
    assert len(cut) > 3
    assert [r for b in cut for r in b.to_pylist()] == whole
    assert [r["url"] for r in whole] == [f"u{i}" for i, t in enumerate(texts) if t]


def test_signatures_in_spark_are_those_computed_here(spark):
    """The worker's hashes and MinHash functions are fixed: the same signature in any
    process (no per-process hash seed)."""
    rows = [("a", "the cat sat on the mat today"), ("b", "Too short"), ("c", None), ("d", "")]
    s = duplicate_settings()
    got = {r["url"]: r for r in signatures(spark.createDataFrame(rows, DOCS), s).collect()}
    assert sorted(got) == ["a", "b"]  # no words: no signature
    a, b = _hash_functions(s.hash_tables * s.band_rows)
    for url, text in rows[:2]:
        h = shingle_hashes(text, s.shingle_words)
        assert got[url]["shingles"] == len(h)
        assert got[url]["bands"] == band_keys(signature(h, a, b), s.band_rows)
        assert len(got[url]["bands"]) == s.hash_tables


def test_copies_are_grouped_not_compared(spark):
    """A page held 40 times costs 40 rows, not 780 compared pairs: copies are grouped by
    their set, and only one page per set takes part in the comparison."""
    words = [f"w{i}" for i in range(60)]
    rows = [(f"p{c:02d}", " ".join(words)) for c in range(40)]
    rows += [("q", " ".join(["q", *words]))]  # 56 of 57 shingles shared
    rows += [(f"r{c}", " ".join(f"r{i}" for i in range(30))) for c in range(3)]
    df = spark.createDataFrame(rows, DOCS)
    settings = duplicate_settings({"threshold": 0.8})
    _, near = _copies_and_near_pairs(df, settings, "text")
    assert [tuple(r) for r in near.collect()] == [("p00", "q", pytest.approx(56 / 57))]
    got = find_duplicates(df, settings).orderBy("page").toPandas()
    want = [(f"p{c:02d}", "p00", 1.0) for c in range(1, 40)] + [("q", "p00", 56 / 57)] + [
        ("r1", "r0", 1.0), ("r2", "r0", 1.0)]
    assert [(p, d, pytest.approx(x)) for p, d, x in want] == list(
        zip(got["page"], got["duplicate_of"], got["similarity"], strict=True))


def test_settings_are_checked(repo_root, tmp_path):
    with pytest.raises(ValueError, match="threshold"):
        duplicate_settings({"threshold": 0})
    cfg = load_config("bag_of_words", "local", repo_root / "conf", {"job": {
        "source": {"html_dir": str(tmp_path)}, "duplicates": {"threshold": 1.5}}})
    with pytest.raises(ConfigError, match="threshold"):
        BAG_OF_WORDS.parse(cfg.job)


DOCS = T.StructType([T.StructField("url", T.StringType(), False),
                     T.StructField("text", T.StringType(), True)])


def test_find_duplicates_inline(spark):
    base = " ".join(f"w{i}" for i in range(100))  # b: 91 of 101 shingles shared
    rows = [("a", base), ("b", base.replace("w20", "x20")), ("c", base + " extra words"),
            ("d", "something else entirely with many other words here and there"),
            ("e", None), ("f", "")]
    settings = duplicate_settings({"threshold": 0.8})
    got = find_duplicates(spark.createDataFrame(rows, DOCS), settings).orderBy("page").toPandas()
    assert got["page"].tolist() == ["b", "c"] and got["duplicate_of"].tolist() == ["a", "a"]
    for page, sim in zip(got["page"], got["similarity"], strict=True):
        text = dict((u, t) for u, t in rows)[page]
        assert sim == pytest.approx(_jaccard(_oracle_shingles(text),
                                             _oracle_shingles(base)), abs=1e-9)


def _edited(words: list[str], at: int, mark: str) -> str:
    return " ".join(w if i != at else f"{mark}{i}" for i, w in enumerate(words))


def test_a_small_corpus_compared_on_the_driver_equals_the_spark_plan(spark, monkeypatch):
    """The same rows from the driver's comparison (up to ``small_corpus`` documents) and from
    the Spark plan (``small_corpus=0``): copies, near pairs, a page equally similar to two
    earlier ones (the earlier URL wins), a pair just under the threshold, null and empty
    texts, a corpus one document over the limit, and too many candidate pairs or hashes to
    bring to the driver."""
    words = [f"w{i}" for i in range(60)]
    base = " ".join(words)
    rows = [("a", base), ("a2", base), ("a3", base),  # copies: a2 and a3 duplicate a
            ("b", _edited(words, 30, "x")), ("c", _edited(words, 30, "y")),  # c: a tie
            ("d", " ".join(words[:50])),  # 46 of a's 56 shingles: under 0.9, over 0.8
            ("e", None), ("f", ""), ("g", "one two three four five six seven eight"),
            ("g2", "one two three four five six seven eight")]
    df = spark.createDataFrame(rows, DOCS).cache()
    for threshold in (0.8, 0.9):
        settings = duplicate_settings({"threshold": threshold})
        plan = find_duplicates(df, settings, small_corpus=0).orderBy("page")
        driver = find_duplicates(df, settings).orderBy("page")
        above = find_duplicates(df, settings, small_corpus=len(rows) - 3).orderBy("page")
        want = [tuple(r) for r in plan.collect()]
        assert [tuple(r) for r in driver.collect()] == want
        assert [tuple(r) for r in above.collect()] == want
        assert driver.schema == DUPLICATES
        pages = {p: (d, x) for p, d, x in want}
        assert pages["a2"] == pages["a3"] == ("a", 1.0) and pages["g2"] == ("g", 1.0)
        assert ("d" in pages) == ("b" in pages) == ("c" in pages) == (threshold == 0.8)
        if threshold == 0.8:  # c is as similar to a as to b (51 of 61): a, the earlier URL
            assert pages["b"] == pages["c"] == ("a", pytest.approx(51 / 61))
    planned = []
    monkeypatch.setattr(duplicates, "_copies_and_near_pairs",
                        lambda *a, **k: planned.append(1) or _copies_and_near_pairs(*a, **k))
    for bound in ("SMALL_CORPUS_SHINGLES", "SMALL_CORPUS_PAIRS"):  # too much to bring back
        with monkeypatch.context() as m:
            m.setattr(duplicates, bound, 2)
            sent_back = find_duplicates(df, settings).orderBy("page")
            assert [tuple(r) for r in sent_back.collect()] == want  # the last threshold's
    assert planned == [1, 1]  # the plan, not the driver, each time
    df.unpersist()


def test_a_small_corpus_is_compared_without_a_shuffle(spark):
    """Without candidates the driver's comparison runs no Spark job but the collect of the
    signatures, and no shuffle: the plan's shuffles are what a first look at a few pages
    waited for."""
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        pytest.skip("a classic session's status tracker counts the jobs")
    rows = [(f"p{i}", " ".join(f"t{i}w{j}" for j in range(20))) for i in range(5)]
    df = spark.createDataFrame(rows, DOCS)
    settings = duplicate_settings({"threshold": 0.8})
    sigs = signatures(df, settings).cache()
    sigs.count()
    sc = spark.sparkContext
    sc.setJobGroup("small-dups", "small-dups")
    try:
        got = find_duplicates(df, settings, sigs=sigs).collect()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    assert got == []
    tracker = sc.statusTracker()
    jobs = [tracker.getJobInfo(j) for j in tracker.getJobIdsForGroup("small-dups")]
    assert jobs and all(len(j.stageIds) == 1 for j in jobs)  # no shuffle: reads of the cache
    sigs.unpersist()


def _copies(src, dst):
    """The real pages plus three lightly edited copies, named to sort after the originals."""
    for name in WIKI_PAGES:
        shutil.copy(src / name, dst / name)
    nlp = (src / WIKI_PAGES[0]).read_text("utf-8")
    mirror = nlp.replace("<title>", "<title>Mirror: ").replace(
        "<body", "<div><p>Mirrored from Wikipedia, the free encyclopedia.</p></div><body", 1)
    (dst / "x_mirror_nlp.html").write_text(mirror, "utf-8")
    ir = (src / WIKI_PAGES[1]).read_text("utf-8")
    synd = ir.replace(" retrieval ", " search ", 6).replace(" the ", " a ", 4)
    (dst / "x_syndicated_ir.html").write_text(synd, "utf-8")
    tm = (src / WIKI_PAGES[2]).read_text("utf-8")
    for m in reversed(list(re.finditer(r"<p>.*?</p>", tm, flags=re.S))[-8:]):
        tm = tm[:m.start()] + tm[m.end():]  # cut short: the last 8 paragraphs left out
    (dst / "x_truncated_tm.html").write_text(tm, "utf-8")
    return {"x_mirror_nlp.html": WIKI_PAGES[0], "x_syndicated_ir.html": WIKI_PAGES[1],
            "x_truncated_tm.html": WIKI_PAGES[2]}


def _cfg(repo_root, pages, out, **job):
    return load_config("bag_of_words", "local", repo_root / "conf", {"job": {
        "source": {"html_dir": str(pages)}, "output": str(out), "vector": "count", **job}})


def test_mirrors_and_syndicated_copies_on_real_pages(spark, repo_root, tmp_path, wiki_pages):
    pages = tmp_path / "pages"
    pages.mkdir()
    expected = _copies(wiki_pages, pages)
    out = tmp_path / "out"
    res = run(spark, _cfg(repo_root, pages, out))
    dups = pd.read_csv(out / "duplicates.csv")
    assert list(dups.columns) == ["page", "duplicate_of", "similarity"]
    name = lambda u: u.rsplit("/", 1)[-1]  # noqa: E731
    assert {name(p): name(d) for p, d in zip(dups["page"], dups["duplicate_of"],
                                             strict=True)} == expected
    assert res.report.outputs["duplicates"] == 3

    # the oracle: exact Jaccard of every pair, on the text the job counted
    docs = pd.read_parquet(out / "state" / "documents")
    docs = docs[docs["error"].isna()]
    sh = {name(u): _oracle_shingles(t) for u, t in zip(docs["url"], docs["text"], strict=True)}
    want = {(b, a): _jaccard(sh[a], sh[b]) for a, b in combinations(sorted(sh), 2)
            if _jaccard(sh[a], sh[b]) >= 0.8}
    assert set(want) == set(expected.items())  # every similar pair found, nothing more
    for p, d, s in zip(dups["page"], dups["duplicate_of"], dups["similarity"], strict=True):
        assert s == pytest.approx(want[(name(p), name(d))], abs=1e-3)
    assert 0.8 <= dups["similarity"].min() < 0.99  # lightly edited, not identical

    # duplicates stay out of the vocabulary: it is the vocabulary of the originals alone
    originals = tmp_path / "originals"
    originals.mkdir()
    for n in WIKI_PAGES:
        shutil.copy(wiki_pages / n, originals / n)
    alone = tmp_path / "alone"
    run(spark, _cfg(repo_root, originals, alone))
    vocab = pd.read_csv(out / "vocabulary.csv", keep_default_na=False)
    pd.testing.assert_frame_equal(vocab, pd.read_csv(alone / "vocabulary.csv",
                                                     keep_default_na=False))
    assert len(pd.read_parquet(out / "documents")) == len(WIKI_PAGES) + 3  # still vectorised

    kept = tmp_path / "kept"
    run(spark, _cfg(repo_root, pages, kept, keep_duplicates=True))
    vk = pd.read_csv(kept / "vocabulary.csv", keep_default_na=False).set_index("word")
    va = vocab.set_index("word")
    assert vk.loc["the", "count"] > va.loc["the", "count"]
    assert vk.loc["the", "documents"] == va.loc["the", "documents"] + 3
    assert len(pd.read_csv(kept / "duplicates.csv")) == 3  # still listed


def _near_copies() -> dict[str, str]:
    """Every page has near-duplicates: three texts, each as an original, an exact copy and
    copies with words changed (a page may then be nearest to a copy rather than the
    original), and an unrelated page. URLs sort so that originals come first."""
    texts = {}
    for base in ("a", "b", "c"):
        words = [f"{base}{i}" for i in range(120)]
        texts[f"https://m.example/{base}/0"] = " ".join(words)
        texts[f"https://m.example/{base}/1"] = " ".join(words)  # a mirror
        for n, at in ((2, [30]), (3, [30, 90]), (4, [5, 110])):  # 3: nearest to 2
            edited = [f"{w}x" if i in at else w for i, w in enumerate(words)]
            texts[f"https://m.example/{base}/{n}"] = " ".join(edited)
    texts["https://m.example/z"] = " ".join(f"z{i}" for i in range(50))
    return texts


def test_duplicates_csv_and_counts_against_a_pairwise_oracle(spark, repo_root, tmp_path):
    """duplicates.csv, byte for byte, as a brute-force comparison of every pair gives it:
    each later page at or above the threshold with its most similar earlier page (ties: the
    earlier URL), by page, similarities as Python prints them; the count in the report; the
    vocabulary counts the pages that duplicate none alone."""
    texts = _near_copies()
    pages = tmp_path / "pages"
    pages.mkdir()
    pd.DataFrame({"url": list(texts), "status": [200] * len(texts),
                  "content_type": ["text/plain"] * len(texts),
                  "html": list(texts.values())}).to_parquet(pages / "part-0.parquet")
    out = tmp_path / "out"
    res = run(spark, load_config("bag_of_words", "local", repo_root / "conf", {"job": {
        "source": {"pages": str(pages)}, "output": str(out), "vocab_size": 1000}}))

    sh = {u: _oracle_shingles(t) for u, t in texts.items()}
    best = {}  # page -> (similarity, duplicate_of)
    for a, b in combinations(sorted(texts), 2):
        inter, union = len(sh[a] & sh[b]), len(sh[a] | sh[b])
        sim = inter / union
        if sim >= 0.8 and (b not in best or sim > best[b][0]):
            best[b] = (sim, a)
    assert len(best) == 12  # every copy; the originals and the unrelated page are none
    want = "page,duplicate_of,similarity\n" + "".join(
        f"{p},{a},{s!r}\n" for p, (s, a) in sorted(best.items()))
    assert (out / "duplicates.csv").read_text("utf-8") == want
    assert res.report.outputs["duplicates"] == len(best)
    assert {"name": "duplicates", "rows": len(best)}.items() <= next(
        c for c in res.report.cached if c["name"] == "duplicates").items()

    vocab = pd.read_csv(out / "vocabulary.csv", keep_default_na=False)
    kept = [t for u, t in texts.items() if u not in best]
    assert sorted(vocab["word"]) == sorted(w for t in kept for w in t.split())
    assert (vocab["documents"] == 1).all() and (vocab["count"] == 1).all()
