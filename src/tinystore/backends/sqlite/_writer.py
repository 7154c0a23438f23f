"""The one writer of a process: group commit.

Every write of a store (adds, claims, settlements, steps, renewals) is an
operation queued here and run in a transaction with every other operation
waiting at that moment, each in its own savepoint so that one's error
touches no other; one commit (one fsync) for all of them, and only then are
their futures resolved. A caller therefore returns only after its write is on
disk, and concurrent callers share the commit.

Whoever finds the write lock free runs the queue on its own thread (a
caller that would wait anyway, or a worker's event loop), except an awaited
call (``_handoff``), whose loop must not wait for the disk; the writer thread
runs what is queued while that lock is taken. Handing every operation to the
writer thread would cost a thread switch each, and make each SQLite call
there wait for a busy thread to give up the GIL.

A long operation (a chunk of ``cancel_many``) is submitted ``alone``: the
writer thread runs it in a transaction of its own, after a batch of what
was queued before it, whose callers are told first.

An operation that gives a queue work (jobs added or requeued, room freed)
or cancels a job says so (``work=`` at submit, or ``notify`` while it runs);
the commit logs those notices in ``tinystore_notices`` for other processes
(see ``_hearing``) and tells this process's listeners (``on_commit``) with a
``Notice`` before its callers' futures resolve, so that a caller returns
only once every worker of its process has heard. A commit that changed
nothing tells nobody. Whether another connection committed is seen in
``PRAGMA data_version`` of the writer's own connection: its own commits never
change that number.

A worker's event loop runs its own claim cycle inline too, when the lock is
free: a commit to a local file (one fsync, shared by the batch) costs less
than the two thread switches of handing it to the writer thread and back,
which measured 8-15 % of W2's throughput and 0.4-0.7 ms of W3's latency.
A backend over a network must not do this (see ``Backend``).

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
from .._base import Notice
from .._commits import CommitNotices
from .._handoff import may_run_inline
from ._connection import Connection, begin_immediate, path_of, timeout_of, translated
from ._sql import Q

log = logging.getLogger("tinystore.store")
# an operation's future, and its result or its error
Outcome = tuple["Future[Any]", Any, Optional[BaseException]]
MAX_OPERATIONS = 512  # per transaction, so that no commit holds the write lock long


NOTICES_KEPT_EVERY = 256  # commits with notices between prunes of the notice log


class Writer:
    def __init__(self, conn: Connection, on_commit: Callable[[Notice], None]):
        self._conn = conn
        self._on_commit = on_commit
        self._pending: deque[Any] = deque()
        self._cv = threading.Condition()
        self._closing = False
        self._closed = False
        self._write_lock = threading.Lock()  # held by whichever thread runs a transaction
        self.check: Callable[[sqlite3.Connection], None] = lambda conn: None  # after each commit (see _identity)
        self._version = conn.execute("PRAGMA data_version").fetchone()[0]
        self._foreign = False  # a BEGIN saw another connection's commit, not yet told by changed()
        self._notices = CommitNotices()  # the running transaction's
        self._noticing = 0
        self.owner: Optional[int] = None  # this process's registration, which its notices name
        self.transactions = 0  # write transactions begun, for tests and benchmarks
        self._thread = threading.Thread(target=self._loop, name="tinystore-writer", daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any, work: Optional[str] = None, source: Any = None,
               alone: bool = False) -> Future[Any]:
        """Queue ``fn(conn, *args)``; the future resolves after the commit that includes it.

        ``work`` names a queue the operation gives work to, for the notice of
        its commit (when it changed something); ``source``, who asked, so that
        it is not woken by its own write. When no transaction is running,
        this thread runs the queue itself now, unless it is an event loop's (``_handoff``). ``alone``: a long operation (a
        chunk of cancel_many) in a transaction of its own, handed to the
        writer thread, so that the writes queued before it commit first in a
        batch of their own, and their callers are told before it runs.
        """
        future: Future[Any] = Future()
        with self._cv:
            if self._closing:
                raise Closed("the store is closed")
            self._pending.append((fn, args, future, work, source, alone))
            if alone:
                self._cv.notify()
                return future
        if may_run_inline() and self._write_lock.acquire(blocking=False):
            ran: list[tuple[list[Any], tuple[Optional[Notice], list[Outcome]]]] = []
            try:
                while not ran or all(item[2] is not future for item in ran[-1][0]):
                    with self._cv:
                        batch = self._take(MAX_OPERATIONS)
                    if not batch:
                        break
                    ran.append((batch, self._run(batch)))
            finally:
                self._write_lock.release()
            for _, ended in ran:  # once the lock is free, so that whoever is told can write at once
                self._finish(*ended)
        with self._cv:
            if self._pending:  # queued while this thread wrote, or the lock was taken: the writer thread runs it
                self._cv.notify()
        return future

    @property
    def connection(self) -> sqlite3.Connection:
        """The writer's connection (a forked child keeps it open, see ``_identity``)."""
        return self._conn

    def notify(self, queue: str, job: Optional[int] = None, wake_source: bool = False) -> None:
        """From inside an operation: its commit gives ``queue`` work, or (``job``) cancels that job;
        ``wake_source``: work that whoever asked for the operation must be woken for too."""
        self._notices.notify(queue, job, wake_source)

    def _take(self, limit: int) -> list[Any]:
        """The next batch: up to ``limit`` operations in order, ending before one that runs alone, which is
        a batch by itself."""
        batch: list[Any] = []
        while self._pending and len(batch) < limit:
            alone = self._pending[0][5]
            if alone and batch:
                break
            batch.append(self._pending.popleft())
            if alone:
                break
        return batch

    def changed(self) -> bool:
        """Whether another connection committed since the writer last looked (polled, cheap).

        While a transaction runs, it is not asked: that transaction's BEGIN
        looks, and what it found is told at the next call.
        """
        if not self._write_lock.acquire(blocking=False):
            return False
        try:
            if self._closed:
                return False
            try:
                version = self._conn.execute("PRAGMA data_version").fetchone()[0]
            except sqlite3.Error as exc:
                raise translated(exc, path_of(self._conn), timeout_of(self._conn)) from None
            changed = version != self._version or self._foreign
            self._version, self._foreign = version, False
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
                ended = self._run(batch) if batch else None  # an inline run may have taken them meanwhile
            if ended is not None:
                self._finish(*ended)

    def _finish(self, notice: Optional[Notice], outcomes: list[Outcome]) -> None:
        """After a transaction, once the lock is free: tell its notice, then resolve its futures, so that
        a caller returns only once this process's workers and watchers have heard of its commit."""
        if notice is not None:
            self._on_commit(notice)
        for future, result, error in outcomes:
            if error is None:
                future.set_result(result)
            else:
                future.set_exception(error)

    def _run(self, batch: list[Any]) -> tuple[Optional[Notice], list[Outcome]]:
        """Run a batch in one transaction: its notice (None when it changed nothing), and each
        operation's future with its result or error, for ``_finish``."""
        conn = self._conn
        self.transactions += 1
        outcomes: list[Outcome] = []
        notices = self._notices = CommitNotices()
        # Alone in its transaction, an operation needs no savepoint: its error rolls the transaction back.
        alone = len(batch) == 1
        try:
            begin_immediate(conn)
            version = conn.execute("PRAGMA data_version").fetchone()[0]
            if version != self._version:
                self._foreign, self._version = True, version
            for fn, args, future, work, source, _ in batch:
                if not future.set_running_or_notify_cancel():
                    continue
                if not alone:
                    conn.execute("SAVEPOINT operation")
                before = conn.total_changes
                notices.begin(work)
                try:
                    outcomes.append((future, fn(conn, *args), None))
                except Exception as exc:  # one operation's error is its caller's, not the batch's
                    if translated(exc, conn.path) is not exc:
                        raise  # the store's own error: SQLite may have rolled everything back already
                    conn.execute("ROLLBACK" if alone else "ROLLBACK TO operation")
                    outcomes.append((future, None, unexpected(exc, conn.path, work)))
                else:
                    if conn.total_changes != before:
                        notices.wrote(source)
                if not alone:
                    conn.execute("RELEASE operation")
            if notices.queues or notices.cancelled:
                self._log_notices(conn, notices.queues, notices.cancelled)
            if conn.in_transaction:
                conn.execute("COMMIT")
            self.check(conn)  # raises where its callers must not be told it was kept
        except Exception as exc:
            log.debug("a write transaction failed: %s", exc)
            self._roll_back()
            # Each caller's error names its own queue.
            return None, [(future, None, translated(exc, path_of(conn), timeout_of(conn), work))
                          for fn, args, future, work, source, _ in batch if not future.done()]
        return notices.notice(), outcomes

    def _log_notices(self, conn: sqlite3.Connection, queues: dict[str, Any], cancelled: set[Any]) -> None:
        """Log a commit's notices for other processes, and keep the log short."""
        rows = [(self.owner, queue, None) for queue in queues] + [(self.owner, q, job) for q, job in cancelled]
        conn.executemany(Q.notice_insert, rows)
        self._noticing += 1
        if self._noticing % NOTICES_KEPT_EVERY == 0:
            conn.execute(Q.notices_prune)

    def _roll_back(self) -> None:
        try:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
        except sqlite3.Error:  # the transaction was rolled back already, or the disk refuses even that
            pass


def unexpected(exc: Exception, path: str, queue: Optional[str]) -> Exception:
    """An operation's own error. Operations run tinystore's SQL only, on its own tables: a database
    error there (a table or column missing) means they are not what this version made."""
    if not isinstance(exc, sqlite3.OperationalError):  # a constraint, or a bug of tinystore's: as it is
        return exc
    error = StoreCorrupt(f"the store {path} does not hold tinystore's tables as this version of tinystore "
                         f"made them ({exc}): they were changed by hand or by another version; nothing was "
                         f"written. Restore the file from a backup, or use the version that made it",
                         queue=queue)
    error.__cause__ = exc
    return error
