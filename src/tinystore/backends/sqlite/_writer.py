"""The one writer of a process: group commit.

Every write of a store (adds, claims, settlements, steps, renewals) is an
operation queued here and run in a transaction with every other operation
waiting at that moment, each in its own savepoint so that one's error
touches no other; one commit (one fsync) for all of them, and only then are
their futures resolved. A caller therefore returns only after its write is on
disk, and concurrent callers share the commit.

Whoever finds the write lock free runs the queue on its own thread (a
caller that would wait anyway, or a worker's event loop); the writer thread
runs what is queued while that lock is taken. Handing every operation to the
writer thread would cost a thread switch each, and make each SQLite call
there wait for a busy thread to give up the GIL.
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
        self.check: Callable[[sqlite3.Connection], None] = lambda conn: None  # after each commit (see _identity)
        self._thread = threading.Thread(target=self._loop, name="tinystore-writer", daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        """Queue ``fn(conn, *args)``; the future resolves after the commit that includes it.

        When no transaction is running, this thread runs the queue itself now.
        """
        future: Future = Future()
        with self._cv:
            if self._closing:
                raise Closed("the store is closed")
            self._pending.append((fn, args, future))
        changed = False
        if self._write_lock.acquire(blocking=False):
            try:
                while not future.done():
                    with self._cv:
                        batch = self._take(MAX_OPERATIONS)
                    if not batch:
                        break
                    changed |= self._run(batch)
            finally:
                self._write_lock.release()
        if changed:  # told once the lock is free, so that whoever wakes can write at once
            self._on_commit()
        with self._cv:
            if self._pending:  # queued while this thread wrote, or the lock was taken: the writer thread runs it
                self._cv.notify()
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
            with self._write_lock:  # an inline run on another thread finishes first
                self._conn.close()  # the last connection to close moves the WAL into the store file

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
                changed = bool(batch) and self._run(batch)  # an inline run may have taken them meanwhile
            if changed:
                self._on_commit()

    def _run(self, batch: list) -> bool:
        """Run a batch in one transaction; return whether the commit changed anything."""
        conn = self._conn
        outcomes = []
        changes = conn.total_changes
        # Alone in its transaction, an operation needs no savepoint: its error rolls the transaction back.
        alone = len(batch) == 1
        try:
            begin_immediate(conn)
            for fn, args, future in batch:
                if not future.set_running_or_notify_cancel():
                    continue
                if not alone:
                    conn.execute("SAVEPOINT operation")
                try:
                    outcomes.append((future, fn(conn, *args), None))
                except Exception as exc:  # one operation's error is its caller's, not the batch's
                    conn.execute("ROLLBACK" if alone else "ROLLBACK TO operation")
                    outcomes.append((future, None, exc))
                if not alone:
                    conn.execute("RELEASE operation")
            if conn.in_transaction:
                conn.execute("COMMIT")
            self.check(conn)  # raises where its callers must not be told it was kept
        except Exception as exc:
            log.error("a write transaction failed: %s", exc)
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            for fn, args, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return False
        for future, result, exc in outcomes:
            if exc is None:
                future.set_result(result)
            else:
                future.set_exception(exc)
        return conn.total_changes != changes  # a commit that changed nothing wakes nobody
