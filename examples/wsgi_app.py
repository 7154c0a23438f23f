"""Jobs beside a WSGI app (Flask, Django, or the standard library's wsgiref): ``start()`` and ``stop()``.

    python examples/wsgi_app.py [STORE_FILE]

``store.start()`` serves the queues on a background thread of the web
process; ``store.stop()`` shuts down as gracefully as SIGTERM does for
``tinystore worker``: no more claims, and running handlers finish within the
grace period. With Flask or Django it is the same two calls: ``start()`` once
the app is created (in each process, after any fork: no gunicorn
``--preload``), ``stop()`` or ``close()`` at exit.

This demo serves on 127.0.0.1, sends itself one request, waits until the job
it added is done, and exits.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
from typing import Any, Callable, Iterable
from urllib.request import Request, urlopen
from wsgiref.simple_server import WSGIRequestHandler, make_server

import tinystore

store = tinystore.open(sys.argv[1] if len(sys.argv) > 1 else os.path.join(tempfile.mkdtemp(), "app.db"))
emails = store.queue("emails", attempts=5)
printing = threading.Lock()  # the web thread and the handler thread both print


def say(text: str) -> None:
    with printing:
        print(text, flush=True)


@emails.work
def send_welcome(payload: dict, run: tinystore.Run) -> None:
    say(f"worker  sending the welcome email to {payload['to']} (attempt {run.attempt})")


def app(environ: dict, start_response: Callable[..., Any]) -> Iterable[bytes]:
    """POST /signup?to=ADDRESS adds a job and answers at once; the email goes out in the background."""
    to = environ.get("QUERY_STRING", "").partition("to=")[2] or "someone@example.com"
    job = emails.add({"to": to}, id=f"welcome:{to}")
    start_response("202 Accepted", [("Content-Type", "application/json")])
    return [json.dumps({"job": job.id, "state": job.state}).encode()]


class QuietHandler(WSGIRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


def main() -> None:
    store.start(workers=4)  # at startup: handlers run on a background thread of this process
    server = make_server("127.0.0.1", 0, app, handler_class=QuietHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    url = f"http://127.0.0.1:{server.server_port}/signup?to=ann@example.com"
    with urlopen(Request(url, method="POST")) as response:
        say(f"client  {response.status} {response.read().decode()}")
    for job in emails.watch("welcome:ann@example.com"):
        say(f"client  {job.id} is {job.state}")

    server.shutdown()
    store.stop()   # at exit: claim no more, let running handlers finish, settle them
    store.close()
    say("stopped")


if __name__ == "__main__":
    main()
