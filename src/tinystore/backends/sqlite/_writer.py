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

A commit that changed something is told to ``on_commit`` with the queues
its operations changed (each with the object that asked, its ``source``), so
that a worker wakes only the runners of those queues. An operation that did
not name its queue makes the notice say nothing (``None``: any queue may have
changed), as does a commit of another connection, which the writer sees in
``PRAGMA data_version`` of its own connection: its own commits never change
that number, so nothing needs absorbing and no other process's commit is
mistaken for one of ours.

The database's and the file system's errors leave here as tinystore errors
(``_connection.translated``): an error of the store itself (no space, an I/O
error, a read-only file, damage) fails the whole transaction, since SQLite may
have rolled it back already; an operation's own error (a constraint, a
refused argument) fails that operation only.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections import deque
from concurrent.futures import Future
from typing import Any, Callable, Optional

from ..._errors import Closed, StoreCorrupt
from ._connection import _path, _timeout, begin_immediate, translated

log = logging.getLogger("tinystore.store")
MAX_OPERATIONS = 512  # per transaction, so that no commit holds the write lock long


class _Any:
    def __repr__(self) -> str:
        return "ANY"


ANY: Any = _Any()  # an operation that does not say which queue it changes: any may have
NOTHING: Any = object()  # what _run returns for a commit that changed nothing

Notice = Optional[dict]  # {queue: source, or None for several}; None when it cannot say


class Writer:
    def __init__(self, conn: sqlite3.Connection, on_commit: Callable[[Notice], None]):
        self._conn = conn
        self._on_commit = on_commit
        self._pending: deque = deque()
        self._cv = threading.Condition()
        self._closing = False
        self._closed = False
        self._write_lock = threading.Lock()  # held by whichever thread runs a transaction
        self.check: Callable[[sqlite3.Connection], None] = lambda conn: None  # after each commit (see _identity)
        self._version = conn.execute("PRAGMA data_version").fetchone()[0]
        self.transactions = 0  # write transactions begun, for tests and benchmarks
        self._thread = threading.Thread(target=self._loop, name="tinystore-writer", daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any, queue: Any = ANY, source: Any = None) -> Future:
        """Queue ``fn(conn, *args)``; the future resolves after the commit that includes it.

        ``queue`` names the queue the operation may change, for the notice of
        its commit (``None``: none that a worker waits on; ``ANY``, the
        default: it cannot say); ``source``, who asked, so that it is not
        woken by its own write. When no transaction is running, this thread
        runs the queue itself now.
        """
        future: Future = Future()
        with self._cv:
            if self._closing:
                raise Closed("the store is closed")
            self._pending.append((fn, args, future, queue, source))
        notices = []
        if self._write_lock.acquire(blocking=False):
            try:
                while not future.done():
                    with self._cv:
                        batch = self._take(MAX_OPERATIONS)
                    if not batch:
                        break
                    notice = self._run(batch)
                    if notice is not NOTHING:
                        notices.append(notice)
            finally:
                self._write_lock.release()
        for notice in notices:  # told once the lock is free, so that whoever wakes can write at once
            self._on_commit(notice)
        with self._cv:
            if self._pending:  # queued while this thread wrote, or the lock was taken: the writer thread runs it
                self._cv.notify()
        return future

    def _take(self, limit: int) -> list:
        return [self._pending.popleft() for _ in range(min(len(self._pending), limit))]

    def changed(self) -> bool:
        """Whether another connection committed since the writer last looked (polled, cheap).

        While a transaction runs, it is not asked: the next transaction's
        BEGIN looks, and tells what it finds with its own commit.
        """
        if not self._write_lock.acquire(blocking=False):
            return False
        try:
            if self._closed:
                return False
            try:
                version = self._conn.execute("PRAGMA data_version").fetchone()[0]
            except sqlite3.Error as exc:
                raise translated(exc, _path(self._conn), _timeout(self._conn)) from None
            changed, self._version = version != self._version, version
            return changed
        finally:
            self._write_lock.release()

    def close(self) -> None:
        """Finish what is queued, then stop."""
        with self._cv:
            self._closing = True
            self._cv.notify()
        if threading.current_thread() is not self._thread:
            self._thread.join()
            with self._write_lock:  # an inline run on another thread finishes first
                self._closed = True
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
                notice = self._run(batch) if batch else NOTHING  # an inline run may have taken them meanwhile
            if notice is not NOTHING:
                self._on_commit(notice)

    def _run(self, batch: list) -> Any:
        """Run a batch in one transaction; return its notice, or NOTHING when the commit changed nothing."""
        conn = self._conn
        self.transactions += 1
        outcomes = []
        touched: Notice = {}
        changed = foreign = False
        # Alone in its transaction, an operation needs no savepoint: its error rolls the transaction back.
        alone = len(batch) == 1
        try:
            begin_immediate(conn)
            version = conn.execute("PRAGMA data_version").fetchone()[0]
            foreign, self._version = version != self._version, version
            for fn, args, future, queue, source in batch:
                if not future.set_running_or_notify_cancel():
                    continue
                if not alone:
                    conn.execute("SAVEPOINT operation")
                before = conn.total_changes
                try:
                    outcomes.append((future, fn(conn, *args), None))
                except Exception as exc:  # one operation's error is its caller's, not the batch's
                    if translated(exc, conn.path) is not exc:
                        raise  # the store's own error: SQLite may have rolled everything back already
                    conn.execute("ROLLBACK" if alone else "ROLLBACK TO operation")
                    outcomes.append((future, None, unexpected(exc, conn.path, queue)))
                else:
                    if conn.total_changes != before:
                        changed = True
                        if touched is not None:
                            touched = _touch(touched, queue, source)
                if not alone:
                    conn.execute("RELEASE operation")
            if conn.in_transaction:
                conn.execute("COMMIT")
            self.check(conn)  # raises where its callers must not be told it was kept
        except Exception as exc:
            log.debug("a write transaction failed: %s", exc)
            self._roll_back()
            for fn, args, future, queue, source in batch:  # each caller's error names its own queue
                if not future.done():
                    future.set_exception(translated(exc, _path(conn), _timeout(conn),
                                                    queue if isinstance(queue, str) else None))
            return None if foreign else NOTHING
        for future, result, exc in outcomes:
            if exc is None:
                future.set_result(result)
            else:
                future.set_exception(exc)
        if foreign:
            return None
        return touched if changed else NOTHING  # a commit that changed nothing wakes nobody

    def _roll_back(self) -> None:
        try:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
        except sqlite3.Error:  # the transaction was rolled back already, or the disk refuses even that
            pass


def unexpected(exc: Exception, path: str, queue: Any) -> Exception:
    """An operation's own error. Operations run tinystore's SQL only, on its own tables: a database
    error there (a table or column missing) means they are not what this version made."""
    if not isinstance(exc, sqlite3.OperationalError):  # a constraint, or a bug of tinystore's: as it is
        return exc
    error = StoreCorrupt(f"the store {path} does not hold tinystore's tables as this version of tinystore "
                         f"made them ({exc}): they were changed by hand or by another version; nothing was "
                         f"written. Restore the file from a backup, or use the version that made it",
                         queue=queue if isinstance(queue, str) else None)
    error.__cause__ = exc
    return error


def _touch(touched: dict, queue: Any, source: Any) -> Notice:
    """Add one operation's queue to a commit's notice; None once any operation could not say."""
    if queue is ANY:
        return None
    if queue is not None:
        touched[queue] = source if touched.get(queue, source) is source else None
    return touched
