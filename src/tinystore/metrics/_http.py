"""``GET /metrics`` over HTTP, in a thread of its own: what ``tinystore worker --metrics-port`` serves."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from .._errors import Error
from ._prometheus import CONTENT_TYPE


def serve(read: Callable[[], str], port: int, host: str) -> ThreadingHTTPServer:
    """Serve ``read()`` at ``http://host:port/metrics`` until ``shutdown()``; port 0 takes a free one
    (``server_address`` says which)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] != "/metrics":
                self._answer(404, "not found: metrics are at /metrics\n")
                return
            try:
                body = read()
            except Error as exc:  # the store is closed, or cannot be read now
                self._answer(503, f"the store cannot be read: {exc}\n")
                return
            self._answer(200, body, CONTENT_TYPE)

        def _answer(self, status: int, body: str, kind: str = "text/plain; charset=utf-8") -> None:
            data = body.encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # a scrape every few seconds is not worth a line

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="tinystore-metrics", daemon=True).start()
    return server
