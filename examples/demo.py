"""A first look: jobs added, run, retried after a failure, and a worker dying with its job taken over.

Run it with `python examples/demo.py`; it works on a temporary store file.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time

import tinystore

start = time.monotonic()


def say(text: str) -> None:
    print(f"{time.monotonic() - start:6.2f}s  {text}", flush=True)


def jobs_run_and_retry(path: str) -> None:
    store = tinystore.open(path)
    emails = store.queue("emails", backoff=("200ms", "1s"), attempts=3)
    all_done = threading.Event()
    finished: set[str] = set()

    @emails.work
    def send(payload: dict, run: tinystore.Run) -> None:
        say(f"send {payload['to']!r}, attempt {run.attempt}")
        if payload["to"] == "flaky@example.com" and run.attempt == 1:
            raise ConnectionError("the mail server hung up")
        finished.add(run.id)
        if len(finished) == 3:
            all_done.set()

    for to in ("ada@example.com", "flaky@example.com", "grace@example.com"):
        job = emails.add({"to": to}, id=f"welcome:{to}")
        say(f"added {job.id} ({job.state}, {job.ahead} ahead)")

    store.start()  # serve on a background thread
    all_done.wait(timeout=30)
    store.stop()
    gone = emails.get("welcome:flaky@example.com") is None
    say(f"all three sent, the flaky one after a retry; done jobs leave the queue at once: {gone}")
    store.close()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "demo.db")
        say(f"store: {path}")
        jobs_run_and_retry(path)
    # Next: the chapter's scenario, in which a worker dies and another takes its job over.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    import replies
    replies.main([])
