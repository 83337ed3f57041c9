"""Near-duplicate pages (mirrors, syndicated copies): MinHash signatures and banded LSH.

Each document is the set of its word k-shingles (tokens by the job's rule, k consecutive
tokens; a text of k words or fewer is one shingle), each shingle a 64-bit hash. One pass of
the Python worker gives per document the size of that set, a digest of it and its MinHash
signature, ``hash_tables`` bands of ``band_rows`` values each, every band hashed to one key.

- Pages with the same shingle set (exact copies, mirrors) share a digest. They are grouped by
  it, never compared pair by pair: each later page duplicates the earliest, similarity 1.0.
  A corpus holding a page n times costs n rows, not n^2 pairs.
- Of the others (one page per set), two are candidates when one band's keys are equal. Only
  the candidates' shingle sets are built again, and their exact Jaccard similarity decides.
  A pair of similarity s is a candidate with probability 1 - (1 - s^r)^b (r = band_rows,
  b = hash_tables): 0.9998 at 0.8 with the defaults (16 x 4), 2.6e-6 at 0.02, the share of
  shingles that a licence header gives two unrelated books.
- A small corpus (up to 20,000 documents, with few enough candidates) takes the same steps on
  the driver, over the collected signatures: its Spark plan would be some ten shuffles of a
  few rows each, seconds where the driver needs milliseconds.

Of each similar pair the page whose URL sorts later is the duplicate; a page similar to several
keeps its most similar partner (ties: the earlier URL). The earliest page of each group of
similar pages is never a duplicate. Equal hashes of different shingles are possible (2^-64 a
pair) and are not checked.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from hashlib import blake2b

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.core.workers import in_worker
from sparkfield.text.bag_of_words.normalise import CHUNK_BYTES, document_tokens, text_chunks, tokens
from sparkfield.text.params import DuplicateSettings

SEED = 42  # of the MinHash functions: the same signatures every run, on every worker
_POLY = np.uint64(0x9E3779B97F4A7C15)  # odd: the polynomial over a shingle's token hashes


def shingles(text: str | None, k: int) -> list[str]:
    """Distinct word k-shingles of ``text`` as strings, in order of first occurrence (a text
    of k words or fewer is one shingle). The sets :func:`shingle_hashes` hashes."""
    toks = tokens(text) if text else []
    if not toks:
        return []
    if len(toks) <= k:
        return [" ".join(toks)]
    return list(dict.fromkeys(" ".join(toks[i:i + k]) for i in range(len(toks) - k + 1)))


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser: a bijection of uint64 that spreads every input bit."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _token_hash(token: str) -> int:
    return int.from_bytes(blake2b(token.encode("utf-8"), digest_size=8).digest(), "little")


TOKEN_HASHES_KEPT = 1 << 20  # a worker's token hashes kept between batches (words recur)


def _token_hashes(words: pa.Array, kept: dict[str, int]) -> np.ndarray:
    """The 64-bit hash of every word of ``words``: each distinct word hashed once, and not
    again while it is in ``kept`` (emptied when it grows past :data:`TOKEN_HASHES_KEPT`)."""
    if len(kept) > TOKEN_HASHES_KEPT:
        kept.clear()
    encoded = pc.dictionary_encode(words)
    distinct = encoded.dictionary.to_pylist()
    for word in distinct:
        if word not in kept:
            kept[word] = _token_hash(word)
    hashes = np.fromiter(map(kept.__getitem__, distinct), np.uint64, len(distinct))
    return hashes[encoded.indices.to_numpy(zero_copy_only=False)]


def shingle_hash_sets(texts: pa.Array, k: int, kept: dict[str, int] | None = None
                      ) -> list[np.ndarray]:
    """The distinct shingles of each text of ``texts`` (as :func:`shingles`; a null: none)
    as sorted 64-bit hashes, tokenised and hashed a whole array at a time. ``kept``: the
    token hashes a worker keeps between calls."""
    toks = document_tokens(texts)
    th = _token_hashes(pc.list_flatten(toks), {} if kept is None else kept)
    ends = np.cumsum(pc.list_value_length(toks).to_numpy(zero_copy_only=False)).tolist()
    return [_shingle_set(th[start:end], k) for start, end in zip([0, *ends], ends, strict=False)]


def _shingle_set(th: np.ndarray, k: int) -> np.ndarray:
    """The sorted distinct hashes of the k-shingles of a text whose token hashes are ``th``."""
    if not len(th):
        return np.empty(0, np.uint64)
    m = min(k, len(th))  # words per shingle: k, or the whole text when it is shorter
    n = len(th) - m + 1
    with np.errstate(over="ignore"):
        h = th[:n].copy()
        for j in range(1, m):
            h = h * _POLY + th[j:j + n]
        h = np.sort(_mix(h ^ np.uint64(m)))
    # np.unique's result, sorted, without its hash table: about 3x faster on a book
    return h[np.concatenate(([True], h[1:] != h[:-1]))]


def shingle_hashes(text: str | None, k: int) -> np.ndarray:
    """The distinct shingles of ``text`` (as :func:`shingles`) as sorted 64-bit hashes."""
    return shingle_hash_sets(pa.array([text], pa.string()), k)[0]


def _hash_functions(count: int) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) of ``count`` functions x -> a*x + b (mod 2^64, a odd) over mixed hashes."""
    rng = np.random.default_rng(SEED)
    a = rng.integers(0, 1 << 63, count, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    return a, rng.integers(0, 1 << 63, count, dtype=np.uint64)


def signature(hashes: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """MinHash signature of a non-empty set of shingle hashes: min of each function."""
    out = np.empty(len(a), np.uint64)
    with np.errstate(over="ignore"):
        for i in range(len(a)):
            out[i] = (hashes * a[i] + b[i]).min()
    return out


def band_keys(sig: np.ndarray, rows: int) -> list[int]:
    """One signed 64-bit key per band of ``rows`` signature values."""
    return [int.from_bytes(blake2b(sig[i:i + rows].tobytes(), digest_size=8).digest(),
                           "little", signed=True) for i in range(0, len(sig), rows)]


SIGNATURES = T.StructType([
    T.StructField("url", T.StringType(), False),
    T.StructField("shingles", T.IntegerType(), False),
    T.StructField("digest", T.BinaryType(), False),
    T.StructField("bands", T.ArrayType(T.LongType(), False), False)])


def signatures(docs: DataFrame, s: DuplicateSettings, text_col: str = "text") -> DataFrame:
    """url, shingles (how many distinct), digest (of the set), bands (one key per band): one
    row per document with at least one word."""
    return docs.select("url", text_col).mapInArrow(
        in_worker(functools.partial(signature_batches, s=s, text_col=text_col)), SIGNATURES)


def signature_batches(batches: Iterator[pa.RecordBatch], s: DuplicateSettings,
                      text_col: str = "text") -> Iterator[pa.RecordBatch]:
    """:func:`signatures`' worker: one output batch per
    :data:`~sparkfield.text.bag_of_words.normalise.CHUNK_BYTES` of text."""
    k, rows = s.shingle_words, s.band_rows
    a, b = _hash_functions(s.hash_tables * s.band_rows)
    kept: dict[str, int] = {}
    for batch in batches:
        texts = batch.column(text_col)
        for start, stop in text_chunks(texts, CHUNK_BYTES):
            sets = shingle_hash_sets(texts.slice(start, stop - start), k, kept)
            found = [i for i, h in enumerate(sets) if len(h)]
            yield pa.RecordBatch.from_arrays(
                [batch.column("url").slice(start, stop - start).take(pa.array(found, pa.int64())),
                 pa.array([len(sets[i]) for i in found], pa.int32()),
                 pa.array([blake2b(sets[i].tobytes(), digest_size=16).digest() for i in found],
                          pa.binary()),
                 pa.array([band_keys(signature(sets[i], a, b), rows) for i in found],
                          pa.list_(pa.int64()))],
                names=SIGNATURES.fieldNames())


def shingle_sets(docs: DataFrame, k: int, text_col: str = "text") -> DataFrame:
    """url, hashes: every document's distinct shingle hashes (as signed 64-bit integers)."""
    schema = T.StructType([T.StructField("url", T.StringType(), False),
                           T.StructField("hashes", T.ArrayType(T.LongType(), False), False)])

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        kept: dict[str, int] = {}
        for batch in batches:
            texts = batch.column(text_col)
            for start, stop in text_chunks(texts, CHUNK_BYTES):
                sets = [h.view(np.int64) for h in shingle_hash_sets(
                    texts.slice(start, stop - start), k, kept)]
                offsets = np.cumsum([0, *map(len, sets)], dtype=np.int32)
                values = np.concatenate(sets) if sets else np.empty(0, np.int64)
                yield pa.RecordBatch.from_arrays(
                    [batch.column("url").slice(start, stop - start),
                     pa.ListArray.from_arrays(offsets, values)], names=["url", "hashes"])

    return docs.select("url", text_col).mapInArrow(in_worker(run), schema)


def _copies_and_near_pairs(docs: DataFrame, s: DuplicateSettings, text_col: str,
                           sigs: DataFrame | None = None) -> tuple[DataFrame, DataFrame]:
    """(url, digest, first: the earliest URL of its set) per document; (a, b, similarity) for
    the pairs of first pages at or above the threshold."""
    sigs = signatures(docs, s, text_col) if sigs is None else sigs
    copies = sigs.withColumn("first", F.min("url").over(Window.partitionBy("digest")))
    firsts = copies.where(F.col("url") == F.col("first"))
    buckets = firsts.select("url", "shingles", F.posexplode("bands").alias("band", "key"))
    cand = buckets.alias("x").join(buckets.alias("y"), ["band", "key"]) \
        .where("x.url < y.url").select(
            F.col("x.url").alias("a"), F.col("y.url").alias("b"),
            F.col("x.shingles").alias("na"), F.col("y.shingles").alias("nb")).distinct()
    urls = cand.select(F.col("a").alias("url")).union(cand.select(F.col("b").alias("url"))) \
        .distinct()
    sets = shingle_sets(docs.join(urls, "url", "left_semi"), s.shingle_words, text_col)
    inter = F.size(F.array_intersect("ha", "hb"))
    near = cand.join(sets.select(F.col("url").alias("a"), F.col("hashes").alias("ha")), "a") \
        .join(sets.select(F.col("url").alias("b"), F.col("hashes").alias("hb")), "b") \
        .select("a", "b", (inter / (F.col("na") + F.col("nb") - inter)).alias("similarity")) \
        .where(F.col("similarity") >= s.threshold)
    return copies.select("url", "digest", "first"), near


DUPLICATES = T.StructType([T.StructField("page", T.StringType(), False),
                           T.StructField("duplicate_of", T.StringType(), False),
                           T.StructField("similarity", T.DoubleType(), True)])
# at most this many documents, their signatures (some 200 bytes each) are compared on the
# driver: a second or less there against some ten shuffles (seconds) of the plan below ...
SMALL_CORPUS_DOCUMENTS = 20_000
# ... as long as the candidate pairs are at most this many (a band's pages pair up) ...
SMALL_CORPUS_PAIRS = 1_000_000
# ... and their shingle sets come to at most this many hashes (8 bytes each)
SMALL_CORPUS_SHINGLES = 16_000_000


def find_duplicates(docs: DataFrame, s: DuplicateSettings, text_col: str = "text",
                    sigs: DataFrame | None = None,
                    small_corpus: int = SMALL_CORPUS_DOCUMENTS) -> DataFrame:
    """page, duplicate_of, similarity: one row per page that duplicates an earlier one.

    The plan reads the documents' :func:`signatures` (one small row per document) several
    times; hashing every document each time would cost several whole passes. Pass them in as
    ``sigs``, persisted for as long as the caller needs them; without them they are computed
    here, at once, and kept as a local checkpoint (executor storage, released when Spark
    cleans up the frame). Of at most ``small_corpus`` documents the signatures are compared
    on the driver (``_duplicates_on_driver``), with the same result, unless the candidates'
    pairs or shingle sets are too many to bring there; 0 never does."""
    if sigs is None:
        sigs = signatures(docs, s, text_col).localCheckpoint(eager=True)
    if small_corpus > 0:
        few = sigs.limit(small_corpus + 1).collect()
        found = (_duplicates_on_driver(docs, s, [r.asDict() for r in few], text_col)
                 if len(few) <= small_corpus else None)
        if found is not None:
            return found
    copies, near = _copies_and_near_pairs(docs, s, text_col, sigs)
    # a later page of a set: its earliest page, at 1.0 no other page is more similar
    same = copies.where(F.col("url") != F.col("first")).select(
        F.col("url").alias("page"), F.col("first").alias("duplicate_of"),
        F.lit(1.0).alias("similarity"))
    # the earliest page of a set: its most similar earlier set, by that set's earliest page
    best = Window.partitionBy("b").orderBy(F.desc("similarity"), "a")
    firsts = near.withColumn("_r", F.row_number().over(best)).where("_r = 1").select(
        F.col("b").alias("page"), F.col("a").alias("duplicate_of"), "similarity")
    return same.unionByName(firsts)


def _duplicates_on_driver(docs: DataFrame, s: DuplicateSettings, sigs: list[dict],
                          text_col: str = "text") -> DataFrame | None:
    """:func:`find_duplicates` of a small corpus whose signature rows (``url``, ``shingles``,
    ``digest``, ``bands``) are ``sigs``: the same rows, found here; Spark builds only the
    candidates' shingle sets. None when the candidate pairs are more than
    :data:`SMALL_CORPUS_PAIRS` or their sets more than :data:`SMALL_CORPUS_SHINGLES` hashes."""
    digests = [bytes(r["digest"]) for r in sigs]  # a classic session gives bytearrays
    first: dict[bytes, str] = {}
    for r, d in zip(sigs, digests, strict=True):
        first[d] = min(first.get(d, r["url"]), r["url"])
    earliest = [first[d] for d in digests]
    rows = [(r["url"], e, 1.0) for r, e in zip(sigs, earliest, strict=True) if r["url"] != e]
    heads = {r["url"]: r for r, e in zip(sigs, earliest, strict=True) if r["url"] == e}
    buckets: dict[tuple[int, int], list[str]] = {}
    for url, r in heads.items():
        for band, key in enumerate(r["bands"]):
            buckets.setdefault((band, key), []).append(url)
    shared = [urls for urls in buckets.values() if len(urls) > 1]
    if sum(len(u) * (len(u) - 1) // 2 for u in shared) > SMALL_CORPUS_PAIRS:
        return None
    pairs = {(a, b) for urls in shared for a in urls for b in urls if a < b}
    best: dict[str, tuple[float, str]] = {}
    if pairs:
        wanted = sorted({u for pair in pairs for u in pair})
        if sum(heads[u]["shingles"] for u in wanted) > SMALL_CORPUS_SHINGLES:
            return None
        table = shingle_sets(docs.where(F.col("url").isin(wanted)), s.shingle_words,
                             text_col).toArrow()
        sets = dict(zip(table.column("url").to_pylist(),
                        (np.asarray(h.values) for h in table.column("hashes")), strict=True))
        for a, b in sorted(pairs):
            inter = len(np.intersect1d(sets[a], sets[b], assume_unique=True))
            sim = inter / (heads[a]["shingles"] + heads[b]["shingles"] - inter)
            # the most similar earlier page; ties: the earlier URL (pairs come sorted)
            if sim >= s.threshold and (b not in best or sim > best[b][0]):
                best[b] = (sim, a)
    rows += [(b, a, sim) for b, (sim, a) in best.items()]
    return docs.sparkSession.createDataFrame(rows, DUPLICATES)
