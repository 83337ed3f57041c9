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
from pyspark.sql import types as T

PAGES_SCHEMA = T.StructType([
    T.StructField("url", T.StringType(), False),
    T.StructField("final_url", T.StringType(), True),
    T.StructField("status", T.IntegerType(), True),
    T.StructField("fetched_at", T.TimestampType(), True),
    T.StructField("content_type", T.StringType(), True),
    T.StructField("html", T.StringType(), True),
    T.StructField("error", T.StringType(), True),
    T.StructField("attempts", T.IntegerType(), True),
])


@dataclass(frozen=True)
class FetchSettings:
    user_agent: str = "sparkfield-bot/0.1 (+https://example.invalid/bot)"
    delay_s: float = 1.0  # between two requests to the same host
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 20.0
    max_retries: int = 3  # on connection errors, 429 and 5xx
    backoff_s: float = 1.0  # first retry wait, doubled each time
    max_backoff_s: float = 60.0
    max_retry_after_s: float = 120.0  # a longer Retry-After gives up instead of waiting
    max_redirects: int = 5
    max_bytes: int = 5_000_000
    respect_robots: bool = True

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


def decode_html(raw: bytes, header_charset: str | None) -> str:
    """Bytes to text: the HTTP charset, else a <meta> charset, else UTF-8 (bad bytes replaced)."""
    charset = header_charset
    if not charset:
        head = raw[:4096].decode("ascii", errors="ignore").lower()
        idx = head.find("charset=")
        if idx >= 0:
            tail = head[idx + 8:].lstrip("\"' ")
            charset = "".join(ch for ch in tail[:40] if ch.isalnum() or ch in "-_")
    try:
        return raw.decode(charset or "utf-8", errors="replace")
    except LookupError:
        return raw.decode("utf-8", errors="replace")


class _Robots:
    def __init__(self, session, settings: FetchSettings):
        self.session, self.settings, self.cache = session, settings, {}

    def allowed(self, url: str) -> bool:
        if not self.settings.respect_robots:
            return True
        host = host_of(url)
        if host not in self.cache:
            parser = urllib.robotparser.RobotFileParser()
            try:
                r = self.session.get(urljoin(host, "/robots.txt"), timeout=(
                    self.settings.connect_timeout_s, self.settings.read_timeout_s),
                    allow_redirects=True)
                if r.status_code in (401, 403):
                    parser.disallow_all = True
                elif r.status_code >= 400:
                    parser.allow_all = True
                else:
                    parser.parse(r.text.splitlines())
            except Exception:  # unreachable robots.txt: the page fetch will report why
                parser.allow_all = True
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
    attempts: int = 0


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


def fetch_one(session, url: str, settings: FetchSettings) -> tuple[Outcome, float]:
    """One attempt. Returns the outcome and, for a retryable failure, the wait before the next
    attempt (negative: do not retry)."""
    import requests

    out = Outcome(url=url, fetched_at=datetime.now(UTC).replace(tzinfo=None))
    try:
        with session.get(url, stream=True, allow_redirects=True, timeout=(
                settings.connect_timeout_s, settings.read_timeout_s)) as r:
            out.status, out.final_url = r.status_code, r.url
            out.content_type = r.headers.get("Content-Type")
            if r.status_code == 429 or r.status_code >= 500:
                out.error = f"HTTP {r.status_code}"
                wait = _retry_after(r.headers.get("Retry-After"))
                if wait is not None and wait > settings.max_retry_after_s:
                    out.error += f" (Retry-After {wait:.0f}s exceeds the limit)"
                    return out, -1.0
                return out, wait if wait is not None else 0.0
            if r.status_code >= 400:
                out.error = f"HTTP {r.status_code}"
                return out, -1.0
            ctype = (out.content_type or "").split(";")[0].strip().lower()
            if ctype not in ("text/html", "application/xhtml+xml", ""):
                out.error = f"not HTML: {ctype}"
                return out, -1.0
            declared = r.headers.get("Content-Length")
            if declared and declared.isdigit() and int(declared) > settings.max_bytes:
                out.error = f"too large: {declared} bytes > {settings.max_bytes}"
                return out, -1.0
            buf = bytearray()
            for block in r.iter_content(65536):
                buf += block
                if len(buf) > settings.max_bytes:
                    out.error = f"too large: more than {settings.max_bytes} bytes"
                    return out, -1.0
            charset = requests.utils.get_encoding_from_headers(r.headers) \
                if "charset" in (out.content_type or "").lower() else None
            out.html = decode_html(bytes(buf), charset)
            return out, -1.0
    except requests.exceptions.TooManyRedirects:
        out.error = f"too many redirects (> {settings.max_redirects})"
        return out, -1.0
    except (requests.exceptions.ConnectionError, requests.exceptions.Timeout,
            requests.exceptions.ChunkedEncodingError) as exc:
        out.error = f"{type(exc).__name__}: {str(exc)[:200]}"
        return out, 0.0
    except requests.exceptions.RequestException as exc:
        out.error = f"{type(exc).__name__}: {str(exc)[:200]}"
        return out, -1.0


def fetch_partition(urls: list[str], settings: FetchSettings) -> list[Outcome]:
    """Fetch ``urls`` (one partition) with one session, hosts taking turns."""
    import requests

    session = requests.Session()
    session.headers["User-Agent"] = settings.user_agent
    session.max_redirects = settings.max_redirects
    robots = _Robots(session, settings)
    results: list[Outcome] = []
    queues: dict[str, list[str]] = {}
    for u in urls:
        parts = urlsplit(u) if isinstance(u, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
            results.append(Outcome(url=str(u), error="unsupported URL (only http/https)",
                                   fetched_at=datetime.now(UTC).replace(tzinfo=None)))
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
            if tries == 0 and not robots.allowed(url):
                results.append(Outcome(url=url, error="disallowed by robots.txt", attempts=0,
                                       fetched_at=datetime.now(UTC).replace(tzinfo=None)))
                next_at = time.monotonic()
            else:
                out, wait = fetch_one(session, url, settings)
                out.attempts = tries + 1
                next_at = time.monotonic() + settings.delay_s
                if wait >= 0 and tries < settings.max_retries:
                    backoff = min(settings.backoff_s * 2 ** tries, settings.max_backoff_s)
                    pending[host].append((url, tries + 1))
                    next_at = max(next_at, time.monotonic() + max(wait, backoff))
                else:
                    results.append(out)
            if pending[host]:
                heapq.heappush(ready, (next_at, host))
    finally:
        session.close()
    return results


def fetch_batches(settings: FetchSettings):
    """A ``mapInPandas`` function: column ``url`` in, one PAGES_SCHEMA row per URL out."""

    def run(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        urls = [u for b in batches for u in b["url"].tolist()]
        if not urls:
            return
        rows = [asdict(o) for o in fetch_partition(urls, settings)]
        yield pd.DataFrame(rows, columns=PAGES_SCHEMA.names)

    return run
