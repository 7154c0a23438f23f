"""``tinystore worker --metrics-port``: a real worker process, scraped over HTTP while its jobs run.

The handlers write a witness row into the store for each attempt they
begin and for how each ends; the counts scraped from the worker must agree
with those rows and with what the store says of its jobs at the end.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from cli.clitools import Worker
from scrape import samples

import tinystore

DEADLINE = 60  # bounds a broken test; a passing one polls until what it waits for is there

APP = '''
import os

import tinystore

store = tinystore.open(os.environ["TINYSTORE_TEST_DB"])
GATE = int(os.environ["TINYSTORE_TEST_GATE"])
fine = store.queue("fine", dedupe="1h")
fan_out = store.queue("fan-out_2", dedupe="1h")
flaky = store.queue("flaky", dedupe="1h", attempts=3, backoff=("10ms", "10ms"))
doomed = store.queue("doomed", attempts=2, backoff=("10ms", "10ms"))
held = store.queue("held", dedupe="1h")


def witness(run, what):
    store.execute("insert into witness (queue, job, attempt, what) values (?, ?, ?, ?)",
                  (run.queue, run.id, run.attempt, what))


@fine.work
def fine_handler(payload, run):
    witness(run, "began")
    fan_out.add({}, id=f"from-{run.id}")  # added by the worker: its own count
    witness(run, "done")


@fan_out.work
async def fan_out_handler(payload, run):
    witness(run, "began")
    witness(run, "done")


@flaky.work
def flaky_handler(payload, run):
    witness(run, "began")
    first = not store.query("select 1 from witness where job = ? and what != 'began'", (run.id,))
    if first and payload["how"] == "raise":
        witness(run, "raised")
        raise ValueError("not this time")
    if first and payload["how"] == "retry":
        witness(run, "retry")
        return run.retry("10ms")
    if first and payload["how"] == "snooze":
        witness(run, "snooze")
        return run.snooze("10ms")
    witness(run, "done")


@doomed.work
def doomed_handler(payload, run):
    witness(run, "began")
    witness(run, "raised")
    raise ValueError("never")


@held.work
def held_handler(payload, run):
    witness(run, "began")
    os.read(GATE, 1)  # the test writes a byte when it has scraped the worker while this runs
    witness(run, "done")
'''


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[dict[str, Any]]:
    (tmp_path / "app_jobs.py").write_text(textwrap.dedent(APP))
    gate_read, gate_write = os.pipe()
    env = dict(os.environ, PYTHONUNBUFFERED="1", TINYSTORE_TEST_DB=str(tmp_path / "store.db"),
               TINYSTORE_TEST_GATE=str(gate_read))
    yield {"path": tmp_path, "env": env, "gate_read": gate_read, "gate_write": gate_write}
    os.close(gate_read)
    os.close(gate_write)


def start_worker(folder: dict[str, Any], *args: str) -> Worker:
    proc = subprocess.Popen([sys.executable, "-m", "tinystore.cli", "worker", "app_jobs:store", *args],
                            cwd=folder["path"], env=folder["env"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            pass_fds=(folder["gate_read"],))
    return Worker(proc)


def scrape(url: str) -> tuple[dict[tuple, float], str]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return samples(response.read().decode("utf-8")), response.headers["Content-Type"]


def scrape_until(url: str, ready: Callable[[dict[tuple, float]], bool]) -> dict[tuple, float]:
    """Scrape until ``ready`` says the samples show what the test waits for."""
    deadline = time.monotonic() + DEADLINE
    while True:
        got, _ = scrape(url)
        if ready(got):
            return got
        assert time.monotonic() < deadline, f"the scrapes never showed it; the last:\n{got}"


def count(got: dict[tuple, float], name: str, queue: str) -> float:
    return got[(f"tinystore_jobs_{name}_total", queue)]


def test_a_scrape_of_a_running_worker_counts_what_its_handlers_did(folder: dict[str, Any]) -> None:
    store = tinystore.open(folder["env"]["TINYSTORE_TEST_DB"])
    try:
        store.execute("create table if not exists witness (queue text, job text, attempt int, what text)")
        store.queue("fine", dedupe="1h").add_many([{} for _ in range(20)])
        store.queue("flaky", dedupe="1h", attempts=3, backoff=("10ms", "10ms")).add_many(
            [{"how": how} for how in ("raise", "raise", "retry", "snooze", "ok")])
        store.queue("doomed", attempts=2, backoff=("10ms", "10ms")).add_many([{}, {}, {}])
        store.queue("held", dedupe="1h").add({}, id="h1")

        worker = start_worker(folder, "--metrics-port", "0")
        try:
            port = re.search(r"metrics at http://127\.0\.0\.1:(\d+)/metrics", worker.wait_for("metrics at", "err"))
            url = f"http://127.0.0.1:{port.group(1)}/metrics"

            # While h1 runs: the other queues settle; h1 has started, has not ended, and the store has it running.
            queues = ("fine", "fan-out_2", "flaky", "doomed")
            got = scrape_until(url, lambda got: count(got, "started", "held") == 1
                               and got.get(("tinystore_jobs_running", "held")) == 1
                               and count(got, "done", "fan-out_2") == 20
                               and all(ended(got, q) == count(got, "started", q) for q in queues)
                               and count(got, "failed", "doomed") == 3 and count(got, "done", "flaky") == 5)
            assert got[("tinystore_run_seconds_count", "held")] == 0
            check_against_the_witness(store, got, queues)
            assert count(got, "added", "fan-out_2") == 20  # the worker added them; the test added the others
            assert count(got, "added", "fine") == 0
            _, kind = scrape(url)
            assert kind == "text/plain; version=0.0.4; charset=utf-8"

            os.write(folder["gate_write"], b"x")  # h1 may end
            got = scrape_until(url, lambda got: count(got, "done", "held") == 1
                               and got[("tinystore_jobs_running", "held")] == 0)
            assert got[("tinystore_run_seconds_count", "held")] == 1
            with pytest.raises(urllib.error.HTTPError) as elsewhere:
                urllib.request.urlopen(url.replace("/metrics", "/other"), timeout=10)
            assert elsewhere.value.code == 404
        finally:
            worker.signal(signal.SIGTERM)
            assert worker.wait() == 0
    finally:
        store.close()


def ended(got: dict[tuple, float], queue: str) -> float:
    return sum(count(got, name, queue) for name in ("done", "failed", "retried", "snoozed"))


def check_against_the_witness(store: tinystore.Store, got: dict[tuple, float], queues: tuple[str, ...]) -> None:
    """Every attempt a handler began is started, timed and waited for; each ending is counted as what it was;
    the store keeps as many done and failed jobs as were counted."""
    rows = store.query("select queue, what, count(*) from witness group by queue, what")
    witnessed = {(queue, what): n for queue, what, n in rows}
    stats = store.stats()
    for q in queues:
        began = witnessed.get((q, "began"), 0)
        assert began > 0
        assert count(got, "started", q) == began
        assert got[("tinystore_run_seconds_count", q)] == began
        assert got[("tinystore_run_seconds_bucket", q, "+Inf")] == began
        assert got[("tinystore_claim_delay_seconds_count", q)] == began
        assert count(got, "done", q) == witnessed.get((q, "done"), 0) == stats[q]["done"]
        assert count(got, "snoozed", q) == witnessed.get((q, "snooze"), 0)
    doomed_raised = witnessed[("doomed", "raised")]
    assert (count(got, "failed", "doomed"), stats["doomed"]["failed"]) == (3, 3)
    assert count(got, "retried", "doomed") == doomed_raised - 3  # each job's last error fails it for good
    assert count(got, "retried", "flaky") == witnessed[("flaky", "raised")] + witnessed[("flaky", "retry")] == 3


def test_a_metrics_port_that_is_taken_stops_the_worker_saying_so(folder: dict[str, Any]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        worker = start_worker(folder, "--metrics-port", str(taken.getsockname()[1]))
        line = worker.wait_for("cannot serve metrics", "err")
        assert worker.wait() != 0
    assert "127.0.0.1" in line
