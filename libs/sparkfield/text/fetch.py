"""Polite fetching with requests, one session per Spark partition.

URLs are grouped by host and hosts packed onto partitions (heaviest first), so every host lives
in exactly one partition: at most one request per host is in flight cluster-wide. Inside a
partition, hosts take turns: while one host waits out its delay another is fetched. Every URL
yields exactly one row with its outcome; every loop is bounded (retries, redirects, size).
"""

from __future__ import annotations

import heapq
import time
import urllib.robotparser
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from urllib.parse import urljoin, urlsplit

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.text.charset import decode_html, decode_page
from sparkfield.text.request import (
    Deadline,
    TooLarge,
    classify,
    http_reason,
    new_session,
    read_capped,
)
from sparkfield.text.revalidate import conditional_headers, crawl_delay
from sparkfield.text.sniff import non_html_type, signature_type

__all__ = ["PAGES_SCHEMA", "FetchSettings", "Outcome", "conform_pages", "decode_html",
           "fetch_batches", "fetch_one", "fetch_partition", "host_of", "unfetchable"]

PAGES_SCHEMA = T.StructType([
    T.StructField("url", T.StringType(), False),
    T.StructField("final_url", T.StringType(), True),
    T.StructField("status", T.IntegerType(), True),
    T.StructField("fetched_at", T.TimestampType(), True),
    T.StructField("content_type", T.StringType(), True),
    T.StructField("html", T.StringType(), True),
    T.StructField("error", T.StringType(), True),  # the reason key (request.REASONS)
    T.StructField("error_detail", T.StringType(), True),  # what exactly went wrong
    T.StructField("attempts", T.IntegerType(), True),
    T.StructField("etag", T.StringType(), True),  # validators for the next run's revalidation
    T.StructField("last_modified", T.StringType(), True),
    T.StructField("charset", T.StringType(), True),  # the codec the HTML was decoded with
    T.StructField("charset_source", T.StringType(), True),  # charset.SOURCES ("guess": suspect)
])


def conform_pages(df: DataFrame) -> DataFrame:
    """``df`` with every PAGES_SCHEMA column (the missing ones null), in that order: pages of an
    older run lack the newer columns."""
    have = set(df.columns)
    return df.select(*[F.col(f.name) if f.name in have else F.lit(None).cast(f.dataType)
                       .alias(f.name) for f in PAGES_SCHEMA])


@dataclass(frozen=True)
class FetchSettings:
    user_agent: str = "sparkfield-bot/0.1 (+https://example.invalid/bot)"
    delay_s: float = 1.0  # between two requests to the same host
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 20.0  # between two reads
    total_timeout_s: float = 30.0  # a whole request (robots.txt too): connect, redirects, body
    max_retries: int = 3  # on connection errors, 429 and 5xx
    backoff_s: float = 1.0  # first retry wait, doubled each time
    max_backoff_s: float = 60.0
    max_retry_after_s: float = 120.0  # a longer Retry-After gives up instead of waiting
    max_redirects: int = 5
    max_bytes: int = 5_000_000
    respect_robots: bool = True
    robots_max_bytes: int = 500_000  # a longer robots.txt is read up to this size
    max_crawl_delay_s: float = 60.0  # a longer robots.txt Crawl-delay gives the host's URLs up

    @classmethod
    def from_dict(cls, d: dict | None) -> FetchSettings:
        d = d or {}
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


def host_of(url: str) -> str:
    try:
        parts = urlsplit(url)
        return f"{parts.scheme}://{parts.netloc}".lower()
    except ValueError:
        return ""


class _Robots:
    def __init__(self, session, settings: FetchSettings):
        self.session, self.settings, self.cache = session, settings, {}
        self.delays: dict[str, float | None] = {}
        self.failures: dict[str, tuple[str, str]] = {}  # host -> (reason, detail)

    def failure(self, url: str) -> tuple[str, str] | None:
        """Why the host's URLs cannot be fetched, when its robots.txt showed it (a timeout)."""
        return self.failures.get(host_of(url))

    def delay(self, url: str) -> float | None:
        """The host's robots.txt Crawl-delay for our user agent (known once allowed() ran)."""
        return self.delays.get(host_of(url))

    def allowed(self, url: str) -> bool:
        if not self.settings.respect_robots:
            return True
        host = host_of(url)
        if host not in self.cache:
            parser = urllib.robotparser.RobotFileParser()
            deadline = Deadline(self.settings.total_timeout_s)
            try:
                with deadline, self.session.get(
                        urljoin(host, "/robots.txt"), stream=True, allow_redirects=True,
                        timeout=(self.settings.connect_timeout_s,
                                 self.settings.read_timeout_s)) as r:
                    if r.status_code in (401, 403):
                        parser.disallow_all = True
                    elif r.status_code >= 400:
                        parser.allow_all = True
                    else:
                        text = read_capped(r, self.settings.robots_max_bytes, deadline,
                                           truncate=True).decode("utf-8", errors="replace")
                        parser.parse(text.splitlines())
                        self.delays[host] = crawl_delay(text, self.settings.user_agent)
            except Exception as exc:  # unreachable robots.txt: the page fetch will report why
                parser.allow_all = True
                reason, detail, _ = classify(exc, deadline)
                if reason == "timeout" and deadline.expired:  # a host that trickles
                    self.failures[host] = (reason, f"robots.txt: {detail}")
            self.cache[host] = parser
        return self.cache[host].can_fetch(self.settings.user_agent, url)


@dataclass
class Outcome:
    url: str
    final_url: str | None = None
    status: int | None = None
    fetched_at: datetime | None = None
    content_type: str | None = None
    html: str | None = None
    error: str | None = None
    error_detail: str | None = None
    attempts: int = 0
    etag: str | None = None
    last_modified: str | None = None
    charset: str | None = None
    charset_source: str | None = None


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            return max(0.0, (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds())
        except (TypeError, ValueError):
            return None


def fetch_one(session, url: str, settings: FetchSettings, headers: dict | None = None
              ) -> tuple[Outcome, float]:
    """One attempt, under the total deadline. Returns the outcome and, for a retryable
    failure, the wait before the next attempt (negative: do not retry). ``headers``
    (conditional ones) may get a 304: status 304, no html, no error (the caller keeps its
    stored page)."""
    import requests

    out = Outcome(url=url, fetched_at=_now())
    deadline = Deadline(settings.total_timeout_s)
    try:
        with deadline, session.get(url, stream=True, allow_redirects=True, headers=headers,
                                   timeout=(settings.connect_timeout_s,
                                            settings.read_timeout_s)) as r:
            out.status, out.final_url = r.status_code, r.url
            out.content_type = r.headers.get("Content-Type")
            out.etag, out.last_modified = r.headers.get("ETag"), r.headers.get("Last-Modified")
            if r.status_code == 304 and headers:
                return out, -1.0
            if r.status_code == 429 or r.status_code >= 500:
                out.error, out.error_detail = http_reason(r.status_code), f"HTTP {r.status_code}"
                wait = _retry_after(r.headers.get("Retry-After"))
                if wait is not None and wait > settings.max_retry_after_s:
                    out.error_detail += f" (Retry-After {wait:.0f}s exceeds the limit)"
                    return out, -1.0
                return out, wait if wait is not None else 0.0
            if r.status_code >= 400:
                out.error, out.error_detail = http_reason(r.status_code), f"HTTP {r.status_code}"
                return out, -1.0
            ctype = (out.content_type or "").split(";")[0].strip().lower()
            if ctype not in ("text/html", "application/xhtml+xml", ""):
                out.error, out.error_detail = "not_html", f"not HTML: {ctype}"
                return out, -1.0
            declared = r.headers.get("Content-Length")
            if declared and declared.isdigit() and int(declared) > settings.max_bytes:
                raise TooLarge(f"{declared} bytes > {settings.max_bytes}")
            body = read_capped(r, settings.max_bytes, deadline)
            if deadline.overlong:
                out.error, out.error_detail = "bad_length", (
                    f"the body runs past its Content-Length ({declared} bytes): the page "
                    "would be cut short")
                return out, -1.0
            kind = non_html_type(body) if not ctype else signature_type(body)
            if kind:
                out.error = "not_html"
                out.error_detail = f"not HTML: {kind} (by its bytes" + (
                    "; no Content-Type)" if not ctype else f"; sent as {ctype})")
                return out, -1.0
            charset = requests.utils.get_encoding_from_headers(r.headers) \
                if "charset" in (out.content_type or "").lower() else None
            out.html, out.charset, out.charset_source = decode_page(body, charset)
            return out, -1.0
    except Exception as exc:  # every URL gets its outcome; the reason says what kind
        out.error, out.error_detail, retry = classify(exc, deadline)
        if out.error == "redirects":
            out.error_detail = f"too many redirects (> {settings.max_redirects})"
        if out.error == "too_large":
            out.error_detail = f"too large: {out.error_detail}"
        return out, 0.0 if retry else -1.0


def fetch_partition(urls: list[str], settings: FetchSettings,
                    validators: dict[str, dict[str, str]] | None = None) -> list[Outcome]:
    """Fetch ``urls`` (one partition) with one session, hosts taking turns; ``validators`` maps
    a URL to its conditional request headers. A host's robots.txt Crawl-delay, when longer than
    the conf delay, spaces its requests."""
    session = new_session(settings.user_agent, settings.max_redirects)
    robots = _Robots(session, settings)
    results: list[Outcome] = []
    queues: dict[str, list[str]] = {}
    for u in urls:
        refused = unfetchable(u)
        if refused:
            results.append(Outcome(url=str(u), error=refused[0], error_detail=refused[1],
                                   fetched_at=_now()))
            continue
        queues.setdefault(host_of(u), []).append(u)
    # (time the host may be asked again, host); each host's URLs in their given order
    ready = [(0.0, h) for h in queues]
    heapq.heapify(ready)
    pending = {h: [(u, 0) for u in reversed(q)] for h, q in queues.items()}
    try:
        while ready:
            at, host = heapq.heappop(ready)
            now = time.monotonic()
            if at > now:
                time.sleep(at - now)
            url, tries = pending[host].pop()
            try:
                next_at = _step(session, robots, settings, validators, pending[host], results,
                                url, tries)
            except Exception as exc:  # one URL's surprise is that URL's outcome
                reason, detail, _ = classify(exc)
                results.append(Outcome(url=url, error=reason, error_detail=detail,
                                       attempts=tries, fetched_at=_now()))
                next_at = time.monotonic()
            if pending[host]:
                heapq.heappush(ready, (next_at, host))
    finally:
        session.close()
    return results


def unfetchable(url: object) -> tuple[str, str] | None:
    """(reason, detail) when ``url`` cannot be requested at all (malformed, not http/https);
    None when it can be tried."""
    if not isinstance(url, str):
        return "invalid_url", f"invalid URL: {url!r}"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (a port out of range or not a number raises here)
    except ValueError as exc:
        return "invalid_url", f"invalid URL: {exc}"
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return "unsupported_url", "unsupported URL (only http/https)"
    return None


def _step(session, robots: _Robots, settings: FetchSettings,
          validators: dict[str, dict[str, str]] | None, queue: list[tuple[str, int]],
          results: list[Outcome], url: str, tries: int) -> float:
    """One turn of a host: ``url`` answered from robots.txt, put back to wait, or fetched
    (again on ``queue`` when it is to be retried). Returns when the host may be asked next."""
    first = host_of(url) not in robots.cache  # robots.txt is asked for now: a request too
    if tries == 0 and not robots.allowed(url):
        results.append(Outcome(url=url, error="robots", attempts=0,
                               error_detail="disallowed by robots.txt", fetched_at=_now()))
        return time.monotonic()
    if tries == 0 and robots.failure(url):
        reason, detail = robots.failure(url)
        results.append(Outcome(url=url, error=reason, error_detail=detail, attempts=0,
                               fetched_at=_now()))
        return time.monotonic()
    if (robots.delay(url) or 0.0) > settings.max_crawl_delay_s:
        results.append(Outcome(
            url=url, attempts=0, fetched_at=_now(), error="robots",
            error_detail=f"robots.txt Crawl-delay {robots.delay(url):g}s exceeds the "
                         f"limit ({settings.max_crawl_delay_s:g}s)"))
        return time.monotonic()
    if first and robots.delay(url):
        queue.append((url, tries))  # the page waits its turn after robots.txt
        return time.monotonic() + robots.delay(url)
    out, wait = fetch_one(session, url, settings, (validators or {}).get(url))
    out.attempts = tries + 1
    next_at = time.monotonic() + max(settings.delay_s, robots.delay(url) or 0.0)
    if wait >= 0 and tries < settings.max_retries:
        backoff = min(settings.backoff_s * 2 ** tries, settings.max_backoff_s)
        queue.append((url, tries + 1))
        return max(next_at, time.monotonic() + max(wait, backoff))
    results.append(out)
    return next_at


def fetch_batches(settings: FetchSettings):
    """A ``mapInPandas`` function: column ``url`` (and optionally a stored page's ``etag`` and
    ``last_modified``, sent as conditional headers) in, one PAGES_SCHEMA row per URL out."""

    def run(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        urls, validators = [], {}
        for b in batches:
            urls += b["url"].tolist()
            if "etag" in b.columns:
                for u, e, m in zip(b["url"], b["etag"], b["last_modified"], strict=True):
                    if h := conditional_headers(e, m):
                        validators[u] = h
        if not urls:
            return
        rows = [asdict(o) for o in fetch_partition(urls, settings, validators)]
        yield pd.DataFrame(rows, columns=PAGES_SCHEMA.names)

    return run
