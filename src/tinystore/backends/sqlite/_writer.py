"""The one writer of a process: group commit.

Every write of a store (adds, claims, settlements, steps, renewals) is an
operation queued here. The writer thread runs all the operations waiting at
that moment in one transaction, each in its own savepoint so that one's error
touches no other, commits once (one fsync for all of them), and only then
resolves their futures. A caller therefore returns only after its write is on
disk, and concurrent callers share the commit.

A worker's event loop runs its claim cycles with ``run_inline`` instead: on
its own thread, taking along whatever else is queued. Handing each cycle to
the writer thread would make every SQLite call there wait for the loop
thread to give up the GIL.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections import deque
from concurrent.futures import Future
from typing import Any, Callable

from ..._errors import Closed
from ._connection import begin_immediate

log = logging.getLogger("tinystore.store")
MAX_OPERATIONS = 512  # per transaction, so that no commit holds the write lock long


class Writer:
    def __init__(self, conn: sqlite3.Connection, on_commit: Callable[[], None]):
        self._conn = conn
        self._on_commit = on_commit
        self._pending: deque = deque()
        self._cv = threading.Condition()
        self._closing = False
        self._write_lock = threading.Lock()  # held by whichever thread runs a transaction
        self._thread = threading.Thread(target=self._loop, name="tinystore-writer", daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        """Queue ``fn(conn, *args)``; the future resolves after the commit that includes it."""
        future: Future = Future()
        with self._cv:
            if self._closing:
                raise Closed("the store is closed")
            self._pending.append((fn, args, future))
            self._cv.notify()
        return future

    def run_inline(self, fn: Callable[..., Any], *args: Any) -> Future:
        """Run ``fn(conn, *args)`` on this thread now, sharing the commit with what is queued."""
        future: Future = Future()
        with self._write_lock:
            with self._cv:
                if self._closing:
                    raise Closed("the store is closed")
                batch = [(fn, args, future)] + self._take(MAX_OPERATIONS - 1)
            self._run(batch)
        return future

    def _take(self, limit: int) -> list:
        return [self._pending.popleft() for _ in range(min(len(self._pending), limit))]

    def close(self) -> None:
        """Finish what is queued, then stop."""
        with self._cv:
            self._closing = True
            self._cv.notify()
        if threading.current_thread() is not self._thread:
            self._thread.join()

    def _loop(self) -> None:
        while True:
            with self._cv:
                while not self._pending and not self._closing:
                    self._cv.wait()
                if not self._pending:
                    return
            with self._write_lock:
                with self._cv:
                    batch = self._take(MAX_OPERATIONS)
                if batch:  # an inline run may have taken them meanwhile
                    self._run(batch)

    def _run(self, batch: list) -> None:
        conn = self._conn
        outcomes = []
        changes = conn.total_changes
        try:
            begin_immediate(conn)
            for fn, args, future in batch:
                if not future.set_running_or_notify_cancel():
                    continue
                conn.execute("SAVEPOINT operation")
                try:
                    outcomes.append((future, fn(conn, *args), None))
                    conn.execute("RELEASE operation")
                except Exception as exc:  # one operation's error is its caller's, not the batch's
                    conn.execute("ROLLBACK TO operation")
                    conn.execute("RELEASE operation")
                    outcomes.append((future, None, exc))
            conn.execute("COMMIT")
        except Exception as exc:
            log.error("a write transaction failed: %s", exc)
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            for fn, args, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        for future, result, exc in outcomes:
            if exc is None:
                future.set_result(result)
            else:
                future.set_exception(exc)
        if conn.total_changes != changes:  # a commit that changed nothing wakes nobody
            self._on_commit()
