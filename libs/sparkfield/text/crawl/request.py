"""HTTP requests with a total deadline and a size cap, and failures grouped by reason.

requests' timeouts bound each socket operation, not the request: a server that sends a byte
every few seconds holds a plain ``session.get`` as long as it likes. Here every request runs
under a ``Deadline``; when it is up, the socket in use is shut down, which ends a blocked read at
once, and the request fails with reason ``timeout``. The deadline covers connecting, redirects,
headers and body.

A body longer than its ``Content-Length`` is cut there by http.client without a word; the
response class here looks for bytes waiting past the declared end and the request's
``Deadline`` records it (``overlong``), so the page can be turned down instead of kept cut.

Failures are grouped under a few reason keys (``REASONS``); the exception text is kept as a
separate detail.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

REASONS = ("timeout", "dns", "refused", "tls", "connection", "redirects", "http_4xx",
           "http_5xx", "too_large", "not_html", "robots", "unsupported_url", "invalid_url",
           "bad_length", "empty", "unreadable", "request_error")

_ACTIVE = threading.local()  # the deadline of the request this thread is making


class DeadlineExceeded(requests.exceptions.Timeout):
    """The request's total deadline passed."""


class Deadline:
    """``with Deadline(s):`` bounds the requests made inside the block by this thread to ``s``
    seconds in all."""

    def __init__(self, seconds: float):
        self.seconds = float(seconds)
        self.expired = False
        self.conn: Any = None  # the connection of the request in flight
        self.sock: Any = None  # its socket, kept after http.client lets go of it
        self.overlong = False  # the last response's body ran past its Content-Length
        self._timer: threading.Timer | None = None
        self._left = self.seconds  # while the timer is stopped
        self._started = 0.0
        self._outer: Deadline | None = None

    def __enter__(self) -> Deadline:
        self._outer = getattr(_ACTIVE, "deadline", None)
        _ACTIVE.deadline = self
        self._start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop()
        _ACTIVE.deadline = self._outer

    def _start(self) -> None:
        self._timer = threading.Timer(self._left, self._fire)
        self._timer.daemon = True
        self._started = time.monotonic()
        self._timer.start()

    def _stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._left = max(0.0, self._left - (time.monotonic() - self._started))
            self._timer = None

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """The clock stops inside the block (a polite wait between redirects, the next host's
        robots.txt, asked under its own deadline) and runs on with the time that was left."""
        self._stop()
        try:
            yield
        finally:
            _ACTIVE.deadline = self
            self._start()

    def _fire(self) -> None:
        self.expired = True
        for sock in (getattr(self.conn, "sock", None), self.sock):
            if sock is not None:
                with contextlib.suppress(OSError):  # already closed
                    sock.shutdown(socket.SHUT_RDWR)

    def check(self) -> None:
        if self.expired:
            raise DeadlineExceeded(f"total deadline of {self.seconds:g}s exceeded")


def _bytes_waiting(fp: Any, sock: Any) -> bool:
    """Whether ``fp`` (a response's buffered socket reader) holds or can read at once one more
    byte; never waits."""
    timeout = sock.gettimeout()
    try:
        sock.settimeout(0.0)
        return bool(fp.peek(1))
    except (OSError, ValueError):  # nothing there (would block), or already closed
        return False
    finally:
        with contextlib.suppress(OSError):
            sock.settimeout(timeout)


class _LengthCheckedResponse(http.client.HTTPResponse):
    """Notes, on the thread's deadline, bytes waiting after the declared Content-Length once
    the body is read; such a connection is not used again."""

    def __init__(self, sock, *args, **kwargs):
        super().__init__(sock, *args, **kwargs)
        self._sock = sock

    def _close_conn(self) -> None:
        deadline = getattr(_ACTIVE, "deadline", None)
        if self.length == 0 and not self.chunked and self.fp is not None \
                and self._method != "HEAD" and self.status not in (204, 304) \
                and self.status >= 200 and _bytes_waiting(self.fp, self._sock):
            self.will_close = True
            if deadline is not None:
                deadline.overlong = True
            with contextlib.suppress(OSError):  # the pool then sees it dropped
                self._sock.shutdown(socket.SHUT_RDWR)
        super()._close_conn()


class _Tracked:
    """Connection mixin: registers itself with the thread's deadline for every request."""

    response_class = _LengthCheckedResponse

    def request(self, *args, **kwargs):
        deadline = getattr(_ACTIVE, "deadline", None)
        if deadline is not None:
            deadline.check()
            deadline.conn, deadline.sock = self, None
            deadline.overlong = False  # a redirect's body does not count for the page
        return super().request(*args, **kwargs)

    def getresponse(self, *args, **kwargs):
        deadline = getattr(_ACTIVE, "deadline", None)
        if deadline is not None:  # the response reads from this socket, even once the
            deadline.sock = self.sock  # connection has closed its own reference
        return super().getresponse(*args, **kwargs)


class _HTTPConnection(_Tracked, HTTPConnection):
    pass


class _HTTPSConnection(_Tracked, HTTPSConnection):
    pass


class _HTTPPool(HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


class _DeadlineAdapter(HTTPAdapter):
    def init_poolmanager(self, *args, **kwargs) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}


def new_session(user_agent: str, max_redirects: int) -> requests.Session:
    """A session whose requests honour a surrounding ``Deadline``."""
    session = requests.Session()
    adapter = _DeadlineAdapter()
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    session.headers["User-Agent"] = user_agent
    session.max_redirects = max_redirects
    return session


class TooLarge(Exception):
    pass


class Refused(Exception):
    """A request not made, under one of ``REASONS`` (a redirect robots.txt disallows)."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason, self.detail = reason, detail


def read_capped(response: requests.Response, max_bytes: int, deadline: Deadline,
                truncate: bool = False) -> bytes:
    """The body, at most ``max_bytes`` (more raises ``TooLarge``, or is cut with ``truncate``).
    A body ended by the deadline raises ``DeadlineExceeded`` rather than passing as complete."""
    buf = bytearray()
    for block in response.iter_content(65536):
        buf += block
        if len(buf) > max_bytes:
            if truncate:
                del buf[max_bytes:]
                break
            raise TooLarge(f"more than {max_bytes} bytes")
        deadline.check()
    deadline.check()
    return bytes(buf)


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception, its causes and the urllib3 errors wrapped in its args."""
    seen, todo = [], [exc]
    while todo and len(seen) < 12:
        e = todo.pop()
        if e is None or any(e is s for s in seen):
            continue
        seen.append(e)
        todo += [e.__cause__, e.__context__, getattr(e, "reason", None)]
        todo += [a for a in getattr(e, "args", ()) if isinstance(a, BaseException)]
    return seen


def classify(exc: BaseException, deadline: Deadline | None = None) -> tuple[str, str, bool]:
    """(reason key, detail, retryable) of a failed request."""
    from urllib3.exceptions import LocationParseError, NameResolutionError

    detail = f"{type(exc).__name__}: {str(exc)[:300]}"
    ex = requests.exceptions
    if (deadline is not None and deadline.expired) or isinstance(exc, DeadlineExceeded):
        seconds = deadline.seconds if deadline is not None else None
        return "timeout", f"total deadline of {seconds:g}s exceeded" if seconds else detail, False
    if isinstance(exc, TooLarge):
        return "too_large", str(exc), False
    if isinstance(exc, Refused):
        return exc.reason, exc.detail, False
    if isinstance(exc, ex.TooManyRedirects):
        return "redirects", detail, False
    if isinstance(exc, ex.SSLError):
        return "tls", detail, False
    if isinstance(exc, ex.Timeout):
        return "timeout", detail, True
    if isinstance(exc, (ex.InvalidURL, ex.MissingSchema, ex.InvalidSchema, LocationParseError)):
        return "invalid_url", detail, False
    chain = _chain(exc)
    text = " ".join(str(e) for e in chain).lower()
    if any(isinstance(e, NameResolutionError | socket.gaierror) for e in chain) or \
            "name or service not known" in text or "name resolution" in text:
        return "dns", detail, False
    if any(isinstance(e, ConnectionRefusedError) for e in chain) or "connection refused" in text:
        return "refused", detail, True
    if isinstance(exc, ex.ConnectionError | ex.ChunkedEncodingError | ex.ContentDecodingError
                  | ConnectionError):
        return "connection", detail, True
    return "request_error", detail, False


def http_reason(status: int) -> str:
    return f"http_{status // 100}xx"
