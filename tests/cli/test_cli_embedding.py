"""Serving inside a web app: ``start()``/``stop()`` for WSGI, ``serve_async`` in FastAPI's lifespan."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
from pathlib import Path

import tinystore
from clitools import TIMEOUT

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


class Heard(logging.Handler):
    """An event set when a record whose message starts with ``text`` is logged."""

    def __init__(self, text: str):
        super().__init__()
        self.text = text
        self.event = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith(self.text):
            self.event.set()


def test_stop_lets_the_running_handler_finish_and_claims_nothing_more(tmp_path: Path) -> None:
    store = tinystore.open(tmp_path / "app.db")
    emails = store.queue("emails", dedupe="1h")
    started, release = threading.Event(), threading.Event()
    ran: list[str] = []

    @emails.work
    def send(payload: dict, run: tinystore.Run) -> None:
        ran.append(run.id)
        started.set()
        assert release.wait(TIMEOUT)

    emails.add({}, id="a")
    emails.add({}, id="b")
    heard = Heard("stopping: claiming no more")
    logging.getLogger("tinystore.store").addHandler(heard)
    logging.getLogger("tinystore.store").setLevel(logging.INFO)
    try:
        store.start(workers=1)
        assert started.wait(TIMEOUT)
        stopping = threading.Thread(target=store.stop)
        stopping.start()
        assert heard.event.wait(TIMEOUT)
        release.set()
        stopping.join(TIMEOUT)
        assert not stopping.is_alive()
    finally:
        logging.getLogger("tinystore.store").removeHandler(heard)
        release.set()
        store.close()

    store = tinystore.open(tmp_path / "app.db")
    a, b = store.queue("emails").get("a"), store.queue("emails").get("b")
    assert ran == ["a"]
    assert (a.state, a.attempt, a.error) == ("done", 1, None)
    assert (b.state, b.attempt) == ("waiting", 0)
    store.close()


def test_stop_right_after_start_returns(tmp_path: Path) -> None:
    store = tinystore.open(tmp_path / "app.db")
    store.queue("emails").work(lambda payload, run: None)
    for _ in range(20):
        store.start()
        stopping = threading.Thread(target=store.stop)
        stopping.start()
        stopping.join(TIMEOUT)
        assert not stopping.is_alive()
    store.close()


def run_example(name: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(EXAMPLES / name), *args], capture_output=True, text=True,
                          timeout=TIMEOUT)


def test_the_wsgi_example_serves_a_request_runs_its_job_and_exits(tmp_path: Path) -> None:
    result = run_example("wsgi_app.py", str(tmp_path / "app.db"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    # The client's lines and the worker's come from two threads: only the client's keep their order.
    assert [line for line in lines if line.startswith("client")][0] == \
        'client  202 {"job": "welcome:ann@example.com", "state": "waiting"}'
    assert "worker  sending the welcome email to ann@example.com (attempt 1)" in lines
    assert lines[-2:] == ["client  welcome:ann@example.com is done", "stopped"]


def test_the_fastapi_example_runs_its_lifespan_with_or_without_fastapi(tmp_path: Path) -> None:
    result = run_example("fastapi_lifespan.py")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "worker  thumbnail of photo 7 (attempt 1)" in lines
    assert lines[-3:] == ["client  photo 7's thumbnail is done", "client  thumb-cat.jpg", "stopped"]
