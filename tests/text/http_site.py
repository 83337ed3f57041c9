"""A quiet request handler for the local HTTP servers the text tests crawl."""

from __future__ import annotations

import time
from http.server import BaseHTTPRequestHandler


class QuietHandler(BaseHTTPRequestHandler):
    """Logs nothing and answers with :meth:`_send`, which notes when the reply began
    (``replied_at``): a client that waits for each reply cannot send its next request before."""

    replied_at: float | None = None

    def log_message(self, *args) -> None:
        pass

    def _send(self, code: int, body: bytes = b"", ctype: str = "text/html; charset=utf-8",
              headers: dict[str, str] | None = None) -> None:
        self.replied_at = time.monotonic()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if body:
            self.wfile.write(body)
