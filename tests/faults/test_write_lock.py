"""A process stopped while it holds the store's write lock makes the others wait at most ``lock_timeout``.

The holder is a real process in a ``store.transaction()``, stopped with
SIGSTOP; the waiting ones are this process's stores. Past ``lock_timeout``
a write raises ``tinystore.Locked`` (an ``Unavailable``, so a ``tinystore.Error``)
that says what holds it up; a worker waits it out.
"""

from __future__ import annotations

import inspect
import os
import signal
import sqlite3
import threading
import time
from typing import Any, Callable, Iterator

import pytest

import tinystore
from helpers import kill_child, start_child, wait_for_line

HOLDER = '''
import sys, time
import tinystore

store = tinystore.open(sys.argv[1])
with store.transaction() as tx:
    tx.execute("CREATE TABLE IF NOT EXISTS app_rows (x)")
    tx.execute("INSERT INTO app_rows VALUES (1)")
    print("holding", flush=True)
    time.sleep(120)
'''


class Holder:
    def __init__(self, path: str):
        self.proc = start_child(HOLDER, path)
        wait_for_line(self.proc, "holding")
        os.kill(self.proc.pid, signal.SIGSTOP)

    def end(self) -> None:
        """SIGCONT, then SIGKILL: the kernel drops its locks, and its transaction never committed."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            kill_child(self.proc)


@pytest.fixture
def hold(store_path: str) -> Iterator[Callable[[], Holder]]:
    holders: list[Holder] = []

    def start() -> Holder:
        holders.append(Holder(store_path))
        return holders[-1]

    yield start
    for h in holders:
        h.end()


def outcome_within(seconds: float, fn: Callable[[], Any]) -> tuple[Any, float]:
    """What ``fn()`` returned or raised, and how long it took; fails if it takes longer than ``seconds``."""
    result: list[Any] = []
    began = time.monotonic()

    def call() -> None:
        try:
            result.append(fn())
        except BaseException as exc:  # noqa: BLE001 - the outcome is what the test looks at
            result.append(exc)
    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still waiting after {seconds:g}s"
    return result[0], time.monotonic() - began


def assert_says_locked(error: Any, timeout: str) -> None:
    assert isinstance(error, tinystore.Locked), repr(error)
    assert isinstance(error, tinystore.Unavailable) and isinstance(error, tinystore.Error)
    text = str(error)
    assert "another process has held the write lock" in text and f"for more than {timeout}" in text, text
    assert "lock_timeout" in text and "nothing was written" in text, text


def test_open_waits_for_a_stopped_process_holding_the_write_lock_no_longer_than_lock_timeout_then_raises_Locked(
        store_path: str, hold: Callable[[], Holder]) -> None:
    tinystore.open(store_path).close()
    hold()
    error, took = outcome_within(15, lambda: tinystore.open(store_path, lock_timeout="500ms"))
    assert_says_locked(error, "0.5s")
    assert 0.5 <= took < 5


def test_add_waits_no_longer_than_lock_timeout_raises_Locked_having_written_nothing_and_adds_once_the_lock_is_free(
        store_path: str, hold: Callable[[], Holder]) -> None:
    store = tinystore.open(store_path, lock_timeout=0.5)
    emails = store.queue("emails")
    holder = hold()
    try:
        error, took = outcome_within(15, lambda: emails.add({"to": "ann"}, id="welcome:ann"))
        assert_says_locked(error, "0.5s")
        assert 0.5 <= took < 5
        error, _ = outcome_within(15, lambda: store.execute("INSERT INTO app_rows VALUES (2)"))
        assert_says_locked(error, "0.5s")  # store.transaction() waits the same
        assert emails.get("welcome:ann") is None
        holder.end()
        assert emails.add({"to": "ann"}, id="welcome:ann").added
        assert store.query("SELECT name FROM sqlite_master WHERE name = 'app_rows'") == []  # never committed
    finally:
        store.close()


def test_lock_timeout_is_30s_unless_open_is_given_a_duration(store_path: str) -> None:
    assert inspect.signature(tinystore.open).parameters["lock_timeout"].default == 30.0
    tinystore.open(store_path, lock_timeout="2s").close()
    with pytest.raises(tinystore.InvalidArgument, match="lock_timeout"):
        tinystore.open(store_path, lock_timeout="soon")


def test_a_worker_waits_out_a_stopped_process_holding_the_write_lock_and_runs_the_job_once_it_is_gone(
        store_path: str, hold: Callable[[], Holder]) -> None:
    store = tinystore.open(store_path, lock_timeout=0.3)
    jobs = store.queue("jobs")
    ran = threading.Event()
    jobs.work(lambda payload, run: ran.set())
    holder = hold()
    store.start()
    try:
        time.sleep(1.0)  # the worker's claims fail meanwhile, Locked each time
        holder.end()
        jobs.add({}, id="j1")
        assert ran.wait(15)
        assert store._background is not None and store._background.is_alive()
    finally:
        store.close()


def test_open_of_a_new_file_whose_first_writer_holds_its_lock_raises_Locked_not_a_sqlite3_error(
        tmp_path: Any) -> None:
    path = str(tmp_path / "app.db")
    app = sqlite3.connect(path, isolation_level=None)  # the application made the file, in its own journal mode
    try:
        app.execute("BEGIN IMMEDIATE")
        app.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
        with pytest.raises(tinystore.Locked, match="lock_timeout"):
            tinystore.open(path, lock_timeout="100ms")  # putting the file in WAL mode waits for that lock
        app.execute("COMMIT")
    finally:
        app.close()
    with tinystore.open(path) as store:  # once it is free, the open goes on
        assert store.queues() == []
