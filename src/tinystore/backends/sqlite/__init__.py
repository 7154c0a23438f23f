"""The SQLite backend: a store is one file, written by one writer thread per process.

The algorithm (claims under limits, groups, leases, settlements, adds, reads)
is the engine's (``backends/_engine``); this package gives it a connection
and statements, and runs the store's file.

Files: ``_executor`` (the engine's executor on a SQLite connection: lists as
JSON, seqs, damaged rows), ``queries.sql`` (the statements whose text is
SQLite's own), ``_sql`` (loads them with the engine's, and the migrations),
``_connection`` (pragmas, waiting for the write lock, errors as tinystore's),
``_writer`` (group commit, notices), ``_hearing`` (other processes' commits),
``_appconn`` (the application's own connection), ``_liveness`` (process
locks), ``_identity`` (one file, one name, one process: links, a file deleted
or replaced while open, forks), ``_check``, ``_readonly``, ``_files``,
``_damage`` (an operator's commands on a file), ``_daily_check`` (maintenance's
look for damage).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional

from ..._errors import Closed, Error, InvalidArgument
from ..._options import QueueOptions
from ..._transaction import Transaction
from .._appconn import join_transaction
from .._targets import LOCK_TIMEOUT
from .._base import (Backend, BatchRow, Cycle, FailureListener, JobDetail, JobRow, NewJob, Notice,
                     NoticeListener, Pick, Settlement, Stats, Watched)
from .._engine import groups as _engine_groups
from .._engine import jobs as _engine_jobs
from .._engine import batches, bulk, leases, reads, work
from . import _appconn, _daily_check, _identity
from ._connection import (begin_immediate, check_file, connect, corrupt, is_busy, naming, not_a_database,
                          not_a_database_said, poll_for_the_write_lock, translated)
from ._liveness import Identity, LockFile
from .._release import RELEASE, refuse_later
from ._sql import MIGRATIONS, Q
from ._hearing import Hearing
from ._executor import SQLiteExecutor
from ._reads import SQLiteReads
from ._writer import Writer

DURABILITY = {"full": "FULL", "normal": "NORMAL", "off": "OFF"}  # PRAGMA synchronous
log = logging.getLogger("tinystore.store")


class SQLiteBackend(SQLiteReads, Backend):
    def __init__(self, path: str, durability: str = "full", lock_timeout: float = LOCK_TIMEOUT):
        if durability not in DURABILITY:
            raise InvalidArgument(f"durability={durability!r} must be one of {', '.join(DURABILITY)}")
        synchronous = DURABILITY[durability]
        self.path = self.location = os.path.abspath(path)
        # By the file's real name: a process that opened it through a symbolic link must lock, and be
        # seen alive, in the same lock file as one that used its own name (as SQLite resolves links too).
        self._real = os.path.realpath(self.path)
        self._lock_path = self._real + "-tinystore.lock"
        self._synchronous = synchronous
        self._lock_timeout = lock_timeout
        self._on_notice: NoticeListener = lambda notice: None
        self._hearing: Optional[Hearing] = None
        self._pid = os.getpid()  # the process the store belongs to: a forked child only lets go of it
        self._owner: Optional[int] = None
        check_file(self.path)
        created = not os.path.exists(self.path)
        if created:
            _identity.refuse_orphan_wal(self.path, self._real)
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
        # One file, one name, and its own WAL: refused before SQLite opens anything (see _identity).
        found = Identity.of(_identity.check_names(self.path, self._real))
        _identity.check_not_inherited(self.path, found)
        self._old_locks: list[LockFile] = []  # lock files this registration held its byte in before
        self._relocking = False
        lock = LockFile.existing(self._lock_path)
        conn = None
        try:
            if lock is not None:
                _identity.guard_wal(self.path, self._real, found, lock)
            conn = connect(self.path, synchronous, lock_timeout)
            self.file = Identity.of(os.stat(self._real))  # the file opened (an overlay copies it up here)
            conn.execute("PRAGMA schema_version").fetchone()  # reads page 1: refuses garbage before writing
            if conn.execute("PRAGMA journal_mode = WAL").fetchone()[0].lower() != "wal":
                raise InvalidArgument(f"{self.path} cannot be put in WAL mode")
            self._migrate(conn)
            lock = lock or LockFile(self._lock_path)  # made once the file proved to be a store
            lock.record(self.file)
        except BaseException as exc:
            if conn is not None:
                conn.close()
            if lock is not None:
                lock.close()
            if created and os.path.getsize(self.path) == 0:
                os.remove(self.path)  # a refused open leaves nothing behind (a full disk at open, say)
            if not created and not_a_database_said(exc):
                other = not_a_database(self.path)
                if other is not None:
                    raise other from None
            if isinstance(exc, sqlite3.DatabaseError):
                # Busy: another connection held the write lock past lock_timeout (a new file's first
                # writer, say, while WAL mode is being set).
                raise (translated(exc, self.path, lock_timeout) if is_busy(exc) else corrupt(self.path, exc)) from None
            raise
        self._lock = lock
        self._watch = _identity.FileWatch(self.path, self._real, self.file)
        self._here = _identity.Here(self.file)
        poll_for_the_write_lock(conn)
        self._writer = Writer(conn, lambda notice: self._on_notice(notice))
        self._writer.check = self._after_commit
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._options: dict[str, QueueOptions] = {}
        _identity.opened(self)

    # Lifecycle

    def _migrate(self, conn: sqlite3.Connection) -> None:
        begin_immediate(conn)
        try:
            conn.execute("CREATE TABLE IF NOT EXISTS tinystore_migrations"
                         " (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)")
            done = {v for (v,) in conn.execute("SELECT version FROM tinystore_migrations")}
            refuse_later(f"the store {self.path}", done, MIGRATIONS[-1][0])
            for version, script in MIGRATIONS:
                if version not in done:
                    for statement in _statements(script):
                        conn.execute(statement)
                    conn.execute("INSERT INTO tinystore_migrations (version) VALUES (?)", (version,))
            conn.execute(Q.release_opened, (RELEASE, MIGRATIONS[-1][0]))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def register(self, now: float) -> int:
        lock, here = self._lock, self._here
        held: list[int] = []

        def op(conn: sqlite3.Connection) -> int:
            owner: int = conn.execute(Q.process_insert, here.row(now, lock)).fetchone()[0]
            try:
                # Held before the commit makes the row visible. A byte held already is a process's that is
                # not registered (its row was removed while it lived): this registration takes another id.
                while not lock.hold(owner):
                    owner = conn.execute(Q.process_move, (owner,)).fetchone()[0]
                held.append(owner)
                self._end_dead_in(conn, now, owner)
            except BaseException:
                if held:
                    lock.release(held.pop())
                raise
            return owner
        try:
            self._owner = self._writer.owner = self.submit(op).result()
        except BaseException:
            for owner in held:  # the commit failed after the byte was taken
                lock.release(owner)
            raise
        return self._owner

    def _end_dead_in(self, conn: sqlite3.Connection, now: float, owner: Optional[int]) -> int:
        """In a write transaction: end the leases and the registration of every process found dead."""
        dead = 0
        for row in conn.execute(Q.process_list).fetchall():
            other = row[0]
            if other != owner and not self._here.alive(row, self._lock):
                ex = SQLiteExecutor(conn)
                for queue in leases.end_owner(ex, other, lambda name: _engine_groups.options(ex, name), now,
                                               self._writer.notify):
                    self._writer.notify(queue)  # their jobs wait again, and their places are free
                work.leave(ex, other)
                dead += 1
        return dead

    def end_dead(self, now: float) -> int:
        with self._read() as conn:  # a read first: a write transaction only when someone died
            rows = conn.execute(Q.process_list).fetchall()
        if all(row[0] == self._owner or self._here.alive(row, self._lock) for row in rows):
            return 0
        ended: int = self.submit(self._end_dead_in, now, self._owner).result()
        return ended

    def _after_commit(self, conn: sqlite3.Connection) -> None:
        """After each commit of the writer, before its callers hear of it: is the file still there?

        One ``os.stat`` of the store's path (``StoreGone`` from the first
        difference on), and one of the lock file's: a live process whose lock
        file was deleted or replaced holds its byte in the new one from its
        next write on, so that opens find it alive by its byte again.
        """
        self._watch.check()
        if self._owner is not None and not self._relocking and self._lock.moved():
            self._relocking = True
            try:
                self._writer.submit(self._relock)  # runs right after this transaction
            except Closed:
                self._relocking = False

    def _relock(self, conn: sqlite3.Connection) -> None:
        try:
            owner = self._owner
            if owner is None:  # the registration ended (a close) since the relock was asked for
                return
            new = LockFile(self._lock_path)
            if new.identity == self._lock.identity:
                new.close()
                return
            if not new.hold(owner):
                new.close()
                log.warning("the lock file %s was replaced, and this process's byte there is held by another "
                            "process: opens elsewhere tell whether it is alive by its pid", self._lock_path)
                return
            conn.execute(Q.process_relock, (new.identity.dev, new.identity.ino, owner))
            new.record(self.file)
            self._old_locks.append(self._lock)  # kept until close: this registration's row may name it still
            self._lock = new
        finally:
            self._relocking = False

    def forked(self) -> bool:
        """Whether this is a forked child's copy of a store its parent opened (see _identity)."""
        return os.getpid() != self._pid

    def _usable(self) -> None:
        if self.forked():
            raise _identity.forked_error(self.path, self._pid)
        if self._watch.gone is not None:
            self._watch.check()

    def inherited_connections(self) -> list[sqlite3.Connection]:
        """Every connection of the store, for a forked child to keep and never close (see _identity)."""
        return [self._writer.connection, *self._readers]

    def close(self) -> None:
        if self.forked():
            return  # a forked child's copy: the registration, writer and connections are the parent's
        if self._hearing is not None:
            self._hearing.close()
            self._hearing = None
        locks = [self._lock, *self._old_locks]
        if self._owner is not None:
            owner = self._owner

            def leave(conn: sqlite3.Connection) -> None:
                work.leave(SQLiteExecutor(conn), owner)
                # Released before the commit, while no other process can register: released after it, a
                # process opening meanwhile would be given this id and find its byte still locked.
                for lock in locks:
                    lock.release(owner)
            try:
                self.submit(leave).result()
            except Error as exc:  # the file is gone: there is no registration left to end
                log.debug("closing %s: %s", self.path, exc)
            for lock in locks:
                lock.release(owner)
            self._owner = None
        self._writer.close()
        with self._readers_lock:
            for conn in self._readers:
                conn.close()
            self._readers.clear()
        for lock in locks:
            lock.close()
        _identity.closed(self)

    def submit(self, fn: Callable[..., Any], *args: Any, work: Optional[str] = None, source: Any = None,
               alone: bool = False) -> Future[Any]:
        """A write for the writer; ``work`` a queue it gives work to, for its commit's notice, ``source``
        who asked, ``alone`` in a transaction of its own (see ``Writer.submit``)."""
        self._usable()
        return self._writer.submit(fn, *args, work=work, source=source, alone=alone)

    # Notices

    def listen(self, on_notice: NoticeListener, on_error: FailureListener) -> None:
        self._on_notice = on_notice
        cursor = self.query(Q.notices_last)[0][0]  # read now: every later commit is heard
        self._hearing = Hearing(cursor, self._writer.changed, self._hearing_connection, lambda: self._owner,
                                on_notice, on_error)

    def _hearing_connection(self) -> sqlite3.Connection:
        if self.forked():
            raise _identity.forked_error(self.path, self._pid)
        conn = connect(self.path, self._synchronous, self._lock_timeout)
        with self._readers_lock:
            self._readers.append(conn)  # a forked child keeps it (see inherited_connections)
        return conn

    def _thread_connection(self) -> sqlite3.Connection:
        """This thread's connection, for reads and for store.transaction()."""
        if self.forked():
            raise _identity.forked_error(self.path, self._pid)
        conn = getattr(self._local, "conn", None)
        if conn is None:
            self._watch.check()  # a file gone is StoreGone, not "cannot open"
            conn = connect(self.path, self._synchronous, self._lock_timeout)
            self._local.conn = conn
            with self._readers_lock:
                self._readers.append(conn)
        return conn

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """This thread's connection, in one read transaction; the store's own errors as tinystore's."""
        conn = self._thread_connection()
        if conn.in_transaction:  # inside this thread's store.transaction(): read what it wrote
            yield conn
            return
        try:
            conn.execute("BEGIN")  # deferred: it takes no lock, and cannot be busy
            try:
                yield conn
            finally:
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            error = translated(exc, self.path, self._lock_timeout)
            if error is exc:
                raise
            raise error from exc

    @contextmanager
    def _about(self, queue: str) -> Iterator[None]:
        """The store's errors met within name ``queue``."""
        try:
            yield
        except Error as exc:
            if exc.queue is not None:
                raise
            raise naming(exc, queue) from exc.__cause__

    # Queues

    def load_options(self, queue: str) -> Optional[QueueOptions]:
        with self._about(queue), self._read() as conn:
            return reads.options(SQLiteExecutor(conn), queue)

    def save_options(self, queue: str, options: QueueOptions) -> Future[Any]:
        return self.submit(lambda conn: work.save_options(SQLiteExecutor(conn), queue, options), work=queue)

    def set_paused(self, queue: str, paused: bool) -> Future[Any]:
        return self.submit(lambda conn: work.set_paused(SQLiteExecutor(conn), queue, paused), work=queue)

    def queue_names(self) -> list[str]:
        with self._read() as conn:
            return reads.queue_names(SQLiteExecutor(conn))

    # Jobs

    def add(self, queue: str, jobs: list[NewJob], now: float, tx: Optional[Transaction] = None) -> Future[Any]:
        if tx is None:
            return self.submit(lambda conn: _engine_jobs.add(SQLiteExecutor(conn), queue, jobs, now), work=queue)
        future: Future[Any] = Future()
        try:
            added = _engine_jobs.add(SQLiteExecutor(tx.connection, locked=False), queue, jobs, now)
            # Told by this process at its commit (store.transaction()), else heard by every process.
            tx.connection.execute(Q.notice_insert, (self._owner if tx.told is not None else None, queue, None))
            if tx.told is not None:
                tx.told.add(queue)
            future.set_result(added)
        except sqlite3.Error as exc:
            error = translated(exc, self.path, self._lock_timeout, queue)
            if error is exc:
                raise
            raise error from exc
        return future

    def declare(self, queue: str, job: NewJob, now: float) -> Future[Any]:
        return self.submit(lambda conn: _engine_jobs.declare(SQLiteExecutor(conn), queue, job, now), work=queue)

    def get(self, queue: str, id: str) -> Optional[JobRow]:
        with self._about(queue), self._read() as conn:
            return reads.get(SQLiteExecutor(conn), queue, id)

    def ahead(self, row: JobRow, now: float) -> int:
        with self._about(row.queue), self._read() as conn:
            return reads.ahead(SQLiteExecutor(conn), row, now)

    def ahead_many(self, queue: str, rows: list[JobRow], now: float) -> dict[int, int]:
        with self._about(queue), self._read() as conn:
            return reads.ahead_many(SQLiteExecutor(conn), queue, rows, now)

    def watch_begin(self, owner: int, seq: int) -> Future[Any]:
        return self.submit(lambda conn: conn.execute(Q.watched_insert, (seq, owner)))

    def watch_end(self, owner: int, seq: int) -> Future[Any]:
        return self.submit(lambda conn: work.watch_end(SQLiteExecutor(conn), owner, seq))

    def watched(self, cursors: dict[int, int]) -> Watched:
        with self._read() as conn:  # one snapshot: each row is what its last change made it
            return reads.watched(SQLiteExecutor(conn), cursors)

    def was_cancelled(self, seq: int) -> bool:
        with self._read() as conn:
            return reads.was_cancelled(SQLiteExecutor(conn), seq)

    def create_batch(self, id: str, then: NewJob, queue: str, now: float) -> Future[Any]:
        return self.submit(lambda conn: batches.create(SQLiteExecutor(conn), id, then, queue, now))

    def close_batch(self, id: str, now: float) -> Future[Any]:
        return self.submit(lambda conn: batches.close(SQLiteExecutor(conn), id, now, self._writer.notify))

    def batch(self, id: str, now: float) -> Optional[BatchRow]:
        with self._read() as conn:
            return reads.batch(SQLiteExecutor(conn), id, now)

    def cancel(self, queue: str, id: str, now: float) -> Future[Any]:
        return self.submit(lambda conn: work.cancel(SQLiteExecutor(conn), queue, id, now, self._writer.notify),
                           work=queue)

    def retry_failed(self, queue: str, id: str, now: float) -> Future[Any]:
        return self.submit(lambda conn: work.retry_failed(SQLiteExecutor(conn), queue, id, now), work=queue)

    def last_seq(self) -> int:
        with self._read() as conn:
            return bulk.last_seq(SQLiteExecutor(conn))

    def cancel_chunk(self, queue: str, pick: Pick, after: str, now: float) -> Future[Any]:
        # Alone: in a transaction of its own, after the writes waiting before it (adds), which commit
        # without waiting for the chunk; the next chunk is asked for only once this one committed.
        return self.submit(lambda conn: bulk.cancel(SQLiteExecutor(conn), queue, pick, after, now,
                                                    self._writer.notify), work=queue, alone=True)

    def retry_chunk(self, queue: str, pick: Pick, after: str, now: float) -> Future[Any]:
        return self.submit(lambda conn: bulk.retry(SQLiteExecutor(conn), queue, pick, after, now), work=queue,
                           alone=True)

    def jobs(self, queue: str, state: Optional[str], grp: Optional[str], limit: int, after: Optional[str],
             now: float) -> list[JobRow]:
        with self._about(queue), self._read() as conn:
            return reads.jobs(SQLiteExecutor(conn), queue, state, grp, limit, after, now)

    def stats(self, now: float) -> Stats:
        with self._read() as conn:
            return reads.stats(SQLiteExecutor(conn), now)

    def detail(self, seq: int) -> JobDetail:
        with self._read() as conn:
            return reads.detail(SQLiteExecutor(conn), seq)

    # Workers

    def cycle(self, queue: str, owner: int, settlements: list[Settlement], want: int,
              now: "float | Callable[[], float]", source: Any = None) -> Future[Any]:
        def op(conn: sqlite3.Connection) -> Cycle:
            # The clock is read once the write lock is held: the leases are taken, and the starts counted
            # for the rate windows (LIM-03), at that time, not at one read before waiting for the lock.
            t = now() if callable(now) else now
            return work.cycle(SQLiteExecutor(conn), queue, owner, settlements, want, t, self._writer.notify)
        return self.submit(op, source=source)

    def renew(self, queue: str, owner: int, expires: float, seqs: list[int]) -> Future[Any]:
        return self.submit(lambda conn: work.renew(SQLiteExecutor(conn), queue, owner, expires, seqs))

    def progress(self, seq: int, attempt: int, value: str) -> Future[Any]:
        return self.submit(lambda conn: work.progress(SQLiteExecutor(conn), seq, attempt, value))

    def step_answer(self, seq: int, name: str) -> Optional[str]:
        with self._read() as conn:
            return reads.step_answer(SQLiteExecutor(conn), seq, name)

    def keep_step(self, seq: int, attempt: int, name: str, answer: str) -> Future[Any]:
        return self.submit(lambda conn: work.keep_step(SQLiteExecutor(conn), seq, attempt, name, answer))

    def transact(self, lease: tuple[int, int], name: str, fn: Callable[[Transaction], Any],
                 encode: Callable[[Any], str]) -> tuple[bool, str]:
        with self.transaction() as tx:  # BEGIN IMMEDIATE: the lease and the step are read under the write lock
            return work.transact(SQLiteExecutor(tx.connection), tx, lease, name, fn, encode)

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """One write transaction on this thread's connection; commit on success, roll back on error."""
        conn = self._thread_connection()
        if conn.in_transaction:
            raise InvalidArgument("a store.transaction() is already open in this thread")
        begin_immediate(conn)
        told: set[str] = set()
        tx = Transaction(conn, told=told)
        try:
            yield tx
            self._watch.check()  # a commit to a file no longer at the path would be lost
            conn.execute("COMMIT")
        except BaseException as exc:
            try:
                if conn.in_transaction:  # SQLite rolls back by itself after some errors (no space, I/O)
                    conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            tx.closed = True
            error = translated(exc, self.path, self._lock_timeout) if isinstance(exc, sqlite3.Error) else exc
            if error is exc:
                raise
            raise error from exc
        tx.closed = True
        self._on_notice(Notice({queue: None for queue in told}))

    def in_transaction(self) -> bool:
        conn = getattr(self._local, "conn", None)
        return conn is not None and conn.in_transaction

    def query(self, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
        with self._read() as conn:
            return conn.execute(sql, params).fetchall()

    def adopt(self, conn: Any, queue: str) -> Transaction:
        connection = _appconn.sqlite_connection_of(conn, queue)
        _appconn.check_same_file(connection, self.path, queue)
        join_transaction(conn)
        return Transaction(connection)

    def maintain(self, now: float, batch: int = 500, progress: Optional[Callable[[int], None]] = None) -> int:
        def op(conn: sqlite3.Connection) -> int:
            seqs = [s for (s,) in conn.execute(Q.expired_jobs, (now, batch)).fetchall()]
            _engine_jobs.remove(SQLiteExecutor(conn), seqs)
            return len(seqs)
        removed = 0
        while True:  # one short transaction per batch: the write lock is never held long
            count: int = self.submit(op).result()
            removed += count
            if progress is not None:
                progress(removed)
            if count < batch:
                break
        self.submit(lambda conn: work.prune(SQLiteExecutor(conn), now)).result()
        if self.submit(_daily_check.take, now).result():  # once a day for the store, in one process
            with self._read() as conn:
                _daily_check.run(conn, self.path)
        return removed


def _statements(script: str) -> list[str]:
    """Split a migration into statements; a trigger's body, with its own ';', stays whole."""
    statements, part = [], ""
    for line in script.splitlines():
        if line.strip().startswith("--"):
            continue
        part += line + "\n"
        if sqlite3.complete_statement(part):
            statements.append(part.strip())
            part = ""
    if part.strip():
        statements.append(part.strip())
    return statements
