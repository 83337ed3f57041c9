"""Polite fetching with requests, one session per Spark partition.

URLs are grouped by host (the host name: http and https, and every port, of one name are one
host) and hosts packed onto partitions (heaviest first), so every host lives in exactly one
partition: at most one request per host of the list is in flight cluster-wide. Inside a
partition, hosts take turns: while one host waits out its delay another is fetched. A redirect
is a request like any other: it waits the delay of the host it goes to, and robots.txt of its
origin (scheme, host and port, as robots.txt is per origin) may refuse it. Its host is spaced
within the partition that follows it: a host that the list also holds elsewhere may get it
beside that partition's own requests.
Every URL yields exactly one row with its outcome; every loop is bounded (retries, redirects,
size).

Why one module: the per-partition fetch loop, its politeness schedule per host and the page rows
it emits are one state machine."""

from __future__ import annotations

import heapq
import time
import urllib.robotparser
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urljoin, urlsplit

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.text.crawl.request import (
    Deadline,
    Refused,
    TooLarge,
    classify,
    http_reason,
    new_session,
    read_capped,
)
from sparkfield.text.crawl.revalidate import conditional_headers, crawl_delay
from sparkfield.text.pages.charset import decode_html, decode_page
from sparkfield.text.pages.sniff import non_html_type, sent_as_html_type
from sparkfield.text.params import FetchSettings

__all__ = ["CAPTURED_SCHEMA", "PAGES_SCHEMA", "FetchSettings", "Outcome", "conform_pages",
           "decode_html", "fetch_batches", "fetch_one", "fetch_partition", "host_of",
           "server_of", "unfetchable"]

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
# what a fetch that is written as WARC keeps of each exchange besides the page (warc_out)
EXCHANGE_FIELDS = [
    T.StructField("request", T.StringType(), True),  # request line and headers sent
    T.StructField("response", T.StringType(), True),  # status line and headers received
    T.StructField("payload", T.BinaryType(), True),  # the body as received, when complete
]
CAPTURED_SCHEMA = T.StructType([
    # the redirects followed before the last exchange, in order, each with the URL it asked for
    T.StructField("warc_redirects", T.ArrayType(T.StructType(
        [T.StructField("url", T.StringType(), True), *EXCHANGE_FIELDS])), True),
    *[T.StructField(f"warc_{f.name}", f.dataType, True) for f in EXCHANGE_FIELDS],
])


def conform_pages(df: DataFrame) -> DataFrame:
    """``df`` with every PAGES_SCHEMA column (the missing ones null), in that order: pages of an
    older run lack the newer columns."""
    have = set(df.columns)
    return df.select(*[F.col(f.name) if f.name in have else F.lit(None).cast(f.dataType)
                       .alias(f.name) for f in PAGES_SCHEMA])


def server_of(url: str) -> str:
    """The host name politeness counts by (lower case, no port): the job's ``host`` column."""
    try:
        return urlsplit(url).hostname or ""
    except ValueError:
        return ""


def host_of(url: str) -> str:
    """The origin robots.txt belongs to: scheme, host and port."""
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
    warc_redirects: list[dict[str, Any]] | None = None
    warc_request: str | None = None
    warc_response: str | None = None
    warc_payload: bytes | None = None


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


def fetch_one(session, url: str, settings: FetchSettings, headers: dict | None = None,
              capture: bool = False, before_hop: Callable[[str, str], None] | None = None
              ) -> tuple[Outcome, float]:
    """One attempt, under the total deadline. Returns the outcome and, for a retryable
    failure, the wait before the next attempt (negative: do not retry). ``headers``
    (conditional ones) may get a 304: status 304, no html, no error (the caller keeps its
    stored page). ``capture`` keeps the exchanges for WARC (CAPTURED_SCHEMA): the request and
    response heads as sent and received, and the body once read whole; each redirect's too (a
    URL given up after too many redirects keeps every redirect it received).
    ``before_hop(url, next_url)`` runs when ``url`` answers with a redirect requests will
    follow, with the deadline's clock stopped: it waits out the politeness delay, or raises
    ``Refused`` not to follow."""
    import requests

    out = Outcome(url=url, fetched_at=_now())
    deadline = Deadline(settings.total_timeout_s)
    hooks = {"response": _hop_hook(session, settings, deadline, before_hop)} \
        if before_hop else None
    try:
        with deadline, session.get(url, stream=True, allow_redirects=True, headers=headers,
                                   hooks=hooks, timeout=(settings.connect_timeout_s,
                                                         settings.read_timeout_s)) as r:
            out.status, out.final_url = r.status_code, r.url
            if capture:
                out.warc_request, out.warc_response = exchange_heads(r)
                out.warc_redirects = [_redirect(hop) for hop in r.history] or None
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
            if capture:
                out.warc_payload = body
            kind = non_html_type(body) if not ctype else sent_as_html_type(body)
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
            given_up = getattr(exc, "response", None)  # the last redirect, not followed
            if capture and given_up is not None:
                out.warc_redirects = [_redirect(hop) for hop in [*given_up.history, given_up]]
        if out.error == "too_large":
            out.error_detail = f"too large: {out.error_detail}"
        return out, 0.0 if retry else -1.0


def _hop_hook(session, settings: FetchSettings, deadline: Deadline,
              before_hop: Callable[[str, str], None]) -> Callable[..., Any]:
    """A requests response hook: ``before_hop`` for each redirect requests will follow (not
    the one past ``max_redirects``, which fails the URL)."""
    redirects = 0

    def hook(response: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal redirects
        target = session.get_redirect_target(response) if response.is_redirect else None
        if target:
            redirects += 1
            if redirects <= settings.max_redirects:
                try:
                    deadline.check()
                    response.content  # noqa: B018 (read now, not after the wait)
                    with deadline.paused():
                        before_hop(response.url, urljoin(response.url, target))
                except Exception:
                    response.close()  # the connection is not read on
                    raise
        return response

    return hook


def exchange_heads(response: Any) -> tuple[str, str]:
    """The request line and headers sent, and the status line and headers received (every
    header as it came, repeated ones included), each as CRLF-joined lines. http.client sends
    Host first, then the session's headers."""
    request = response.request
    lines = [f"{request.method} {request.path_url} HTTP/1.1"]
    if "Host" not in request.headers:
        lines.append(f"Host: {urlsplit(request.url).netloc.rpartition('@')[2]}")
    lines += [f"{k}: {v}" for k, v in request.headers.items()]
    raw = response.raw  # urllib3's response: every header line, in order
    version = "HTTP/1.0" if raw.version == 10 else "HTTP/1.1"
    status = f"{version} {response.status_code} {response.reason or ''}".rstrip()
    received = raw.headers.items()
    return "\r\n".join(lines), "\r\n".join([status] + [f"{k}: {v}" for k, v in received])


def _redirect(hop: Any) -> dict[str, Any]:
    """A redirect followed: its heads and its body (requests reads it whole to free the
    connection)."""
    request, response = exchange_heads(hop)
    return {"url": hop.url, "request": request, "response": response, "payload": hop.content}


def fetch_partition(urls: list[str], settings: FetchSettings,
                    validators: dict[str, dict[str, str]] | None = None,
                    capture: bool = False) -> list[Outcome]:
    """Fetch ``urls`` (one partition) with one session, hosts taking turns; ``validators`` maps
    a URL to its conditional request headers. A host's robots.txt Crawl-delay, when longer than
    the conf delay, spaces its requests. The URLs that cannot be requested come first.
    ``capture``: see :func:`fetch_one`."""
    refused, queues = _by_host(urls)
    session = new_session(settings.user_agent, settings.max_redirects)
    try:
        fetch = _PartitionFetch(session, _Robots(session, settings), settings, validators or {},
                                capture)
        _take_turns(queues, fetch.turn)
        return refused + fetch.results
    finally:
        session.close()


def _by_host(urls: list[str]) -> tuple[list[Outcome], dict[str, list[str]]]:
    """The outcomes of the URLs that cannot be requested at all, and the others by host (in
    their given order)."""
    refused: list[Outcome] = []
    queues: dict[str, list[str]] = {}
    for u in urls:
        why = unfetchable(u)
        if why:
            refused.append(Outcome(url=str(u), error=why[0], error_detail=why[1],
                                   fetched_at=_now()))
        else:
            queues.setdefault(server_of(u), []).append(u)
    return refused, queues


# one turn of a host: (the host's waiting (url, tries), url, tries) -> when it may be asked next
Turn = Callable[[list[tuple[str, int]], str, int], float]


def _take_turns(queues: dict[str, list[str]], turn: Turn) -> None:
    """Hosts take turns, each host's URLs in their given order: while one host waits out its
    delay another is asked. A turn may put its URL back to wait (a retry)."""
    ready = [(0.0, h) for h in queues]  # (time the host may be asked again, host)
    heapq.heapify(ready)
    pending = {h: [(u, 0) for u in reversed(q)] for h, q in queues.items()}
    while ready:
        at, host = heapq.heappop(ready)
        now = time.monotonic()
        if at > now:
            time.sleep(at - now)
        url, tries = pending[host].pop()
        next_at = turn(pending[host], url, tries)
        if pending[host]:
            heapq.heappush(ready, (next_at, host))


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


@dataclass
class _PartitionFetch:
    """One partition's session, robots.txt answers and outcomes."""

    session: Any
    robots: _Robots
    settings: FetchSettings
    validators: dict[str, dict[str, str]]
    capture: bool = False
    results: list[Outcome] = field(default_factory=list)
    answered: dict[str, float] = field(default_factory=dict)  # host -> its last reply's time

    def _delay(self, url: str) -> float:
        return max(self.settings.delay_s, self.robots.delay(url) or 0.0)

    def turn(self, queue: list[tuple[str, int]], url: str, tries: int) -> float:
        """One turn of a host (see :meth:`_step`)."""
        try:
            return self._step(queue, url, tries)
        except Exception as exc:  # one URL's surprise is that URL's outcome
            reason, detail, _ = classify(exc)
            self.results.append(Outcome(url=url, error=reason, error_detail=detail,
                                        attempts=tries, fetched_at=_now()))
            return time.monotonic()

    def _step(self, queue: list[tuple[str, int]], url: str, tries: int) -> float:
        """``url`` answered from robots.txt, put back to wait, or fetched (again on ``queue``
        when it is to be retried). Returns when the host may be asked next."""
        first = host_of(url) not in self.robots.cache  # robots.txt is asked for now: a request
        refused = self._robots_answer(url, tries)
        if refused is not None:
            self.results.append(refused)
            return time.monotonic()
        if first and self.robots.delay(url):
            queue.append((url, tries))  # the page waits its turn after robots.txt
            return time.monotonic() + self.robots.delay(url)
        due = self.answered.get(server_of(url), float("-inf")) + self._delay(url)
        if due > time.monotonic():  # a redirect from another host came here meanwhile
            queue.append((url, tries))
            return due
        return self._fetch(queue, url, tries)

    def _robots_answer(self, url: str, tries: int) -> Outcome | None:
        """The outcome of a URL that robots.txt turns down (disallowed, a robots.txt that
        trickled, a Crawl-delay past the limit), None when it may be fetched."""
        if tries == 0 and not self.robots.allowed(url):
            return Outcome(url=url, error="robots", attempts=0,
                           error_detail="disallowed by robots.txt", fetched_at=_now())
        if tries == 0 and self.robots.failure(url):
            reason, detail = self.robots.failure(url)
            return Outcome(url=url, error=reason, error_detail=detail, attempts=0,
                           fetched_at=_now())
        delay, limit = self.robots.delay(url) or 0.0, self.settings.max_crawl_delay_s
        if delay > limit:
            return Outcome(url=url, attempts=0, fetched_at=_now(), error="robots",
                           error_detail=f"robots.txt Crawl-delay {delay:g}s exceeds the "
                                        f"limit ({limit:g}s)")
        return None

    def _before_hop(self, url: str, to: str) -> None:
        """``url`` redirected ``to``: a request like any other, which robots.txt of its origin
        may turn down and which waits its host's delay (its host may be another one). A
        robots.txt asked for now is a request to that host too: the conf delay before it."""
        self.answered[server_of(url)] = time.monotonic()
        why = unfetchable(to)
        if why:
            raise Refused(why[0], f"redirect to {to}: {why[1]}")
        host = server_of(to)
        if self.settings.respect_robots and host_of(to) not in self.robots.cache:
            self._wait_for(host, self.settings.delay_s)
            self.robots.allowed(to)
            self.answered[host] = time.monotonic()
        refused = self._robots_answer(to, 0)
        if refused is not None:
            raise Refused(refused.error, f"redirect to {to}: {refused.error_detail}")
        self._wait_for(host, self._delay(to))
        self.answered[host] = time.monotonic()  # a hop that fails still counts for its host

    def _wait_for(self, host: str, delay: float) -> None:
        time.sleep(max(0.0, self.answered.get(host, float("-inf")) + delay - time.monotonic()))

    def _fetch(self, queue: list[tuple[str, int]], url: str, tries: int) -> float:
        """One attempt at ``url``: its outcome kept, or the URL back on ``queue`` for a retry
        after its backoff (or the server's Retry-After)."""
        s = self.settings
        out, wait = fetch_one(self.session, url, s, self.validators.get(url), self.capture,
                              self._before_hop)
        out.attempts = tries + 1
        now = time.monotonic()
        self.answered[server_of(out.final_url or url)] = self.answered[server_of(url)] = now
        next_at = now + self._delay(url)
        if wait >= 0 and tries < s.max_retries:
            backoff = min(s.backoff_s * 2 ** tries, s.max_backoff_s)
            queue.append((url, tries + 1))
            return max(next_at, time.monotonic() + max(wait, backoff))
        self.results.append(out)
        return next_at


def fetch_schema(capture: bool) -> T.StructType:
    """The rows :func:`fetch_batches` gives: PAGES_SCHEMA, and CAPTURED_SCHEMA with ``capture``."""
    return T.StructType(PAGES_SCHEMA.fields + (CAPTURED_SCHEMA.fields if capture else []))


def fetch_batches(settings: FetchSettings, capture: bool = False
                  ) -> Callable[[Iterator[pd.DataFrame]], Iterator[pd.DataFrame]]:
    """A ``mapInPandas`` function: column ``url`` (and optionally a stored page's ``etag`` and
    ``last_modified``, sent as conditional headers) in, one :func:`fetch_schema` row per URL
    out."""
    names = fetch_schema(capture).names

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
        rows = [asdict(o) for o in fetch_partition(urls, settings, validators, capture)]
        yield pd.DataFrame(rows, columns=names)

    return run
