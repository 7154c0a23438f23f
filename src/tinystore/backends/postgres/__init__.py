"""The PostgreSQL backend: the same store in a schema of a PostgreSQL database.

Files: ``_connection`` (connections, session settings, errors as
tinystore's), ``_writer`` (group commit on one connection and thread, the
queues' advisory locks, notices), ``_keeper`` (the connection a process
keeps: its liveness lock, LISTEN), ``_executor`` (the engine's executor on a
psycopg connection: arrays, identity seqs, the options read once per
transaction), ``queries.sql`` (the statements whose text is PostgreSQL's
own), ``_sql`` (loads them with the engine's, and the migrations, for one
schema), ``_existing`` (an operator's open of a store that must exist).

The algorithm (claims under limits, groups, leases, settlements, adds,
reads) is the engine's (``backends/_engine``), the same as SQLite's.

Connections of one store, per process: the writer's (every write of
tinystore's own), the keeper's (liveness lock and LISTEN), and a small pool
of readers (reads in autocommit; ``store.transaction()`` holds one for its
block on the thread that opened it).

Behind a pooler: a store whose URL reaches the server through a pooler in
transaction mode (PgBouncer), found at open (``_connection.behind_pooler``)
or said by ``direct=`` (a second URL, which reaches the server itself), keeps
no session state on the pooled connections (``_connection.begin``). Its
writer and readers use the pooled URL: adds, reads, the application's
transactions, and claims and settlements too (they need nothing of a
session). What needs a session of its own (the keeper: the liveness lock,
LISTEN) is made on the direct URL, and only when it is first needed: when
a worker starts, a job is watched, or other processes' commits are to be
heard (``serving``). Until then the process holds no lease and watches
nothing, so it is not registered (its owner id is drawn all the same, and
names its notices); a process of producers only never connects directly.
Without ``direct=`` a worker or a watch is refused with one error saying so.
A registration made this way has no writer's session named by it (its
writer is pooled), so a process whose keeper connection alone was lost may
be found dead meanwhile: it registers again as it reconnects, as after
being found dead.

Durability (``tinystore.open(durability=)``): "full" commits with
``synchronous_commit = on`` (the server has the commit on disk, and on its
synchronous standbys where configured, before ``add`` returns); "normal" and
"off" with ``synchronous_commit = off``: a crash of the server may lose the
last commits (a fraction of a second of them), and never corrupts the
database. ``lock_timeout`` is the session's ``lock_timeout``: how long a
write waits for a queue's lock (or a row's) held by another transaction
before ``Locked``.

Processes write a queue side by side (see ``_writer``): adds, settlements
and the claims of a queue without limits take no queue lock; the claim of a
queue with limits takes the queue's advisory lock in a short transaction of
its own. An add inside the application's transaction (``tx=``, ``conn=``)
takes no queue lock either; where its jobs have a group, their group's lock
is held until the application commits or rolls back, and claims of that
group wait for it; where they join a batch, the batch's row is locked as
long, and the ends of that batch's jobs (settlements, cancels, a close)
wait for it: keep such transactions short.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import weakref
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any, Callable, Collection, Iterable, Iterator, Optional

import psycopg
from psycopg import pq
from psycopg_pool import ConnectionPool, PoolTimeout

from ..._errors import Closed, Conflict, Error, InvalidArgument, Unavailable
from ..._options import QueueOptions
from ..._transaction import Transaction
from .._appconn import driver_connection, join_transaction
from .._base import (Added, Backend, BatchRow, Cycle, FailureListener, JobDetail, JobRow, NewJob, Notice,
                     NoticeListener, Pick, Settlement, Stats, Watched)
from .._engine import groups as _engine_groups
from .._engine import jobs as _engine_jobs
from .._engine import batches, bulk, leases, reads, work
from .._engine.claim import limited
from .._release import RELEASE, refuse_later
from .._targets import LOCK_TIMEOUT
from . import _sql
from ._connection import (PgConn, Where, begin, behind_pooler, configure, connect, dial, is_connection_error,
                          raise_translated, translated)
from ._executor import PgExecutor
from ._keeper import GRACE, Keeper
from ._reads import PostgresReads
from ._writer import Writer

DURABILITY = ("full", "normal", "off")
POOL_MAX = 16  # reader connections per store and process, at most
ADD_UNKNOWN = ("the connection was lost while the add committed: the jobs may or may not have been added; "
               "with ids, adding them again is safe (an id adds once)")
COMMIT_UNKNOWN = "the connection was lost during COMMIT: the transaction may or may not have been committed"
PAST_GRACE = 0.05  # seconds a suspect is looked at again after its grace, so that the server's now() is past it too
log = logging.getLogger("tinystore.store")


class PostgresBackend(PostgresReads, Backend):
    def __init__(self, url: str, schema: str = "tinystore", durability: str = "full",
                 lock_timeout: float = LOCK_TIMEOUT, direct: Optional[str] = None):
        if durability not in DURABILITY:
            raise InvalidArgument(f"durability={durability!r} must be one of {', '.join(DURABILITY)}")
        self._where = Where(url, schema)
        self._direct = Where(direct, schema) if direct is not None else None  # the keeper's, behind a pooler
        self.location = self._where.location
        self.q = _sql.schema(schema)
        self._durability = durability
        self._lock_timeout = lock_timeout
        # Per queue, the options its last cycle read where they keep no limit and no pause: the next cycle
        # with nothing to settle sends its take with its first reads (work.take_early). Writer thread only.
        self._unlimited: dict[str, str] = {}
        self._pid = os.getpid()
        self._owner: Optional[int] = None
        self._registration: Optional[tuple[Any, ...]] = None  # the processes row, written when the keeper is made
        self._keeper: Optional[Keeper] = None
        self._keeping = threading.Lock()  # one keeper, made at register or, behind a pooler, when first needed
        # Processes whose lock is gone, still within their grace at the last look (end_dead): by owner, when
        # (monotonic) they may be found dead, and the queues where they hold leases (dead_due).
        self._suspects: dict[int, tuple[float, frozenset[str]]] = {}
        self._on_error: Optional[FailureListener] = None
        self._closed = False
        self._on_notice: NoticeListener = lambda notice: None
        self._local = threading.local()
        self._adopted: "weakref.WeakKeyDictionary[Any, bool]" = weakref.WeakKeyDictionary()
        self._watching: set[int] = set()  # the jobs this process watches (see _keeper)
        conn = dial(self._where, opening=True)
        try:
            self._where.pooled = direct is not None or behind_pooler(conn)
            if self._where.pooled:
                conn.prepare_threshold = None  # (the pool's and the writer's connections are made so)
            configure(conn, durability, lock_timeout, self._where.pooled)
            self._migrate(conn)
        except psycopg.Error as exc:
            conn.close()
            error = translated(exc, self._where)
            raise Error(f"cannot open the store in {self._where.server()}, schema {schema!r}: {error}") from None
        except BaseException:
            conn.close()
            raise
        self._server = self._identity(conn)
        self._begin = begin(self._where, durability, lock_timeout)
        self._writer = Writer(self._writer_connection, self._where, lambda notice: self._on_notice(notice),
                              PgConn(conn, self.q), self._begin)
        self._pool = ConnectionPool(
            url, min_size=1, max_size=POOL_MAX, open=True, name=f"tinystore-{schema}",
            kwargs={"autocommit": True, **self._where.connect_kwargs()},
            configure=lambda c: configure(c, durability, lock_timeout, self._where.pooled),
            check=ConnectionPool.check_connection, timeout=max(1.0, min(lock_timeout, 30.0)))

    # Lifecycle

    def _migrate(self, conn: psycopg.Connection) -> None:
        """Numbered migrations, each applied once, under a transaction-level advisory lock of the schema
        so that processes opening it at once do not race (CREATE SCHEMA IF NOT EXISTS alone may).

        READ COMMITTED whatever the database's default: a migration that counts the jobs kept (004) must
        see those committed while it waited for its locks, not a snapshot taken before."""
        q = self.q
        with conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
            conn.execute(q.migrate_lock, (q.live_key,))
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {q.quoted}")
            conn.execute(q.migrations_table)
            done = {v for (v,) in conn.execute(q.migrations_done)}
            migrations = q.migrations()
            refuse_later(f"the store in {self._where.server()}, schema {q.name!r},", done, migrations[-1][0])
            for version, script in migrations:
                if version not in done:
                    conn.execute(script)
                    conn.execute(q.migration_insert, (version,))
            conn.execute(q.release_opened, (RELEASE, migrations[-1][0]))

    def _identity(self, conn: psycopg.Connection) -> tuple[Any, ...]:
        """Which server and database a connection is to."""
        row = conn.execute(self.q.server_identity).fetchone()
        assert row is not None  # the query answers one row
        return tuple(row)

    def _raw_connection(self) -> psycopg.Connection:
        return connect(self._where, self._durability, self._lock_timeout)

    def _writer_connection(self) -> PgConn:
        conn = self._raw_connection()
        if self._owner is not None and not self._where.pooled:  # its session names its registration (see
            # processes_unlocked); a pooled one has no session of its own to name
            try:
                conn.execute(self.q.writer_name, (self._owner, self.q.name))
            except psycopg.Error as exc:
                conn.close()
                raise translated(exc, self._where) from None
        return PgConn(conn, self.q)

    def register(self, now: float) -> int:
        self._usable()
        q = self.q
        owner: int = self.submit(lambda conn: conn.row(q.process_next_id)[0]).result()
        self._registration = (owner, os.getpid(), socket.gethostname(), now, now)
        self._owner = self._writer.owner = owner  # before the insert: a writer connection made again names it
        if not self._where.pooled:
            self._keep()
        self.end_dead(now)
        return owner

    def serving(self) -> None:
        """Behind a pooler: the keeper, on the direct URL, made now where it is not yet; refused without one."""
        self._usable()
        if self._keeper is not None:
            return
        if self._direct is None:
            w = self._where
            raise Error(f"the store's URL reaches {w.host}:{w.port}, database {w.dbname!r}, through a connection "
                        f"pooler: workers and watches need a session of their own on the server (a session "
                        f"advisory lock, LISTEN), which a pooler in transaction mode cannot keep; open the store "
                        f"with tinystore.open(url, direct=URL), URL reaching the server without the pooler")
        with self._keeping:
            if self._keeper is None:
                self._keep()

    def _keep(self) -> None:
        """Register this process: its liveness lock (and LISTEN) on the keeper connection, then its row.
        The lock is held before the row is visible: no process can find this one dead meanwhile."""
        q = self.q
        owner, row = self._owner, self._registration
        assert owner is not None and row is not None
        try:
            keeper = Keeper(self._keeper_connection, q, self._direct or self._where, owner, row,
                            lambda: sorted(self._watching))
        except psycopg.Error as exc:
            raise_translated(exc, self._direct or self._where)

        def insert(conn: PgConn) -> None:
            conn.execute(q.process_insert, row)
            if not self._where.pooled:
                conn.execute(q.writer_name, (owner, q.name))
        self._keeper = keeper
        try:
            self.submit(insert).result()
        except BaseException:  # not registered: a later start tries again (at open, the store is closed)
            self._keeper = None
            keeper.close()
            raise
        keeper.registered = True  # its heartbeat may now say that the row's process lives
        if self._on_error is not None:
            keeper.listen(self._on_notice, self._on_error)

    def _keeper_connection(self) -> psycopg.Connection:
        """The keeper's connection: the direct URL's where given (which must reach the store's server and
        database, without a pooler), else the store's."""
        direct = self._direct
        if direct is None:
            return self._raw_connection()
        conn = connect(direct, self._durability, self._lock_timeout)
        try:
            if behind_pooler(conn):
                raise Error(f"direct= reaches {direct.host}:{direct.port}, database {direct.dbname!r}, through a "
                            f"connection pooler too: it must reach the server itself")
            if self._identity(conn) != self._server:
                raise Error(f"direct= reaches {direct.server()}, which is not the server and database of the "
                            f"store's URL ({self._where.server()})")
        except BaseException:
            conn.close()
            raise
        return conn

    def end_dead(self, now: float) -> int:
        """End the leases of registered processes whose liveness lock no session holds (DUR-03).

        A read finds them (``pg_locks``, and no session named by their writer
        in ``pg_stat_activity``: a process whose keeper connection alone was
        lost is alive), with what is left of their grace (``_keeper.GRACE``):
        one whose sessions were all ended a moment ago is connecting again, its
        handlers running. Those past it are dead: one write transaction
        confirms each with ``pg_try_advisory_xact_lock`` (held until it
        commits, so that a process coming back meanwhile re-registers only
        after its leases and registration were ended) and its heartbeat read
        again, ends its leases as ``_engine.leases.end_owner`` does, removes
        its registration and watches, and notifies its queues. Those within it
        stay suspect until it ends (``dead_due``). A machine that vanished is
        noticed once the server drops its connection. For a few seconds after
        this process's own keeper connection was made again it finds nobody
        dead (``_keeper.GRACE``): a server restart drops every process's lock
        at once, and the live ones take theirs again.
        """
        self._usable()
        q = self.q
        own = self._owner
        with self._read() as conn:
            unlocked = conn.all(q.processes_unlocked, {"own": own if own is not None else -1, "key": q.live_key,
                                                       "schema": q.name, "grace": GRACE})
        # This process's own connection was down just now: so may theirs have been (_keeper.GRACE); while it
        # is down, look again a grace later.
        unsettled = min(self._keeper.unsettled_for(), GRACE) if self._keeper is not None else 0.0
        dead = [other for other, left, _ in unlocked if left <= 0 and not unsettled]
        began = time.monotonic()
        # The dead stay suspect until their transaction committed: where it fails, the next look is due now.
        self._suspects = {other: (began + (0.0 if other in dead else max(left, unsettled) + PAST_GRACE),
                                  frozenset(queues)) for other, left, queues in unlocked}

        def op(conn: PgConn) -> int:
            found = 0
            for other in dead:
                if not conn.row(q.live_try, (q.live_key, other))[0]:
                    continue  # alive: it took its lock again since the read (or another look ends it now)
                if not conn.row(q.process_stale, (other, GRACE))[0]:
                    continue  # alive: it said it lives since the read (and lost its lock again)
                ex = PgExecutor(conn)
                for queue in leases.end_owner(ex, other, lambda name: _engine_groups.options(ex, name), now,
                                               self._writer.notify):
                    self._writer.notify(queue)  # their jobs wait again, and their places are free
                work.leave(ex, other)
                found += 1
            return found
        if not dead:
            return 0
        found: int = self.submit(op).result()
        self._suspects = {other: suspect for other, suspect in self._suspects.items() if other not in dead}
        return found

    def dead_due(self, queues: Optional[Iterable[str]] = None) -> Optional[float]:
        suspects: Collection[tuple[float, frozenset[str]]] = self._suspects.values()
        if queues is not None:
            wanted = set(queues)
            suspects = [(due, held) for due, held in suspects if held & wanted]
        if not suspects:
            return None
        return max(0.0, min(due for due, _ in suspects) - time.monotonic())

    def forked(self) -> bool:
        return os.getpid() != self._pid

    def _usable(self) -> None:
        if self.forked():
            raise Error(f"the store {self.location!r} was opened by process {self._pid}, and this is a forked "
                        f"child of it: open the store again in the child")
        if self._closed:
            raise Closed(f"the store {self.location!r} is closed")

    def close(self) -> None:
        if self.forked() or self._closed:
            return  # a forked child's copy: the registration and connections are the parent's
        q = self.q
        owner = self._owner
        if owner is not None:
            def leave(conn: PgConn) -> None:
                work.leave(PgExecutor(conn), owner)
            if self._keeper is not None:
                self._keeper.registered = False  # never made again from now on
            try:
                self.submit(leave).result()  # before the lock goes: nobody finds this process dead meanwhile
            except Error as exc:
                log.debug("closing %s: %s", self.location, exc)
            self._owner = None
        self._closed = True
        if self._keeper is not None:
            self._keeper.close()
            self._keeper = None
        self._writer.close()
        self._pool.close()

    def submit(self, fn: Callable[..., Any], *args: Any, queues: Any = (), work: Optional[str] = None,
               source: Any = None, unknown: Optional[str] = None, alone: bool = False, bare: bool = False) -> Future[Any]:
        if self.forked():
            self._usable()
        return self._writer.submit(fn, *args, queues=queues, work=work, source=source, unknown=unknown,
                                   alone=alone, bare=bare)

    # Notices

    def listen(self, on_notice: NoticeListener, on_error: FailureListener) -> None:
        self._on_notice = on_notice
        self._on_error = on_error
        if self._keeper is None and self._direct is not None:
            self.serving()  # hearing other processes is LISTEN: the keeper's, made now (it listens then)
        elif self._keeper is not None:
            self._keeper.listen(on_notice, on_error)

    # Reads

    @contextmanager
    def _read(self, snapshot: bool = False, queue: Optional[str] = None) -> Iterator[PgConn]:
        """A connection for reads: this thread's store.transaction()'s, else a pooled one in autocommit
        (``snapshot``: in one read-only repeatable-read transaction). tinystore's errors as its own."""
        self._usable()
        tx = getattr(self._local, "tx", None)
        if tx is not None:  # inside this thread's store.transaction(): read what it wrote
            try:
                yield tx
            except psycopg.Error as exc:
                raise_translated(exc, self._where, queue)
            return
        try:
            with self._pool.connection() as raw:
                conn = PgConn(raw, self.q)
                if snapshot:
                    raw.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                    try:
                        yield conn
                    finally:
                        if raw.info.transaction_status != pq.TransactionStatus.UNKNOWN:
                            raw.execute("ROLLBACK")
                else:
                    yield conn
        except PoolTimeout as exc:
            raise Unavailable(f"no connection to {self._where.server()} could be had: {exc}", queue=queue) from None
        except psycopg.Error as exc:
            raise_translated(exc, self._where, queue)

    # Queues

    def load_options(self, queue: str) -> Optional[QueueOptions]:
        with self._read(queue=queue) as conn:
            return reads.options(PgExecutor(conn), queue)

    def save_options(self, queue: str, options: QueueOptions) -> Future[Any]:
        return self.submit(lambda conn: work.save_options(PgExecutor(conn), queue, options), work=queue,
                           queues=[queue])

    def set_paused(self, queue: str, paused: bool) -> Future[Any]:
        # Under the queue's lock, as save_options: one after the other, never beside a limited claim.
        return self.submit(lambda conn: work.set_paused(PgExecutor(conn), queue, paused), work=queue,
                           queues=[queue])

    def queue_names(self) -> list[str]:
        with self._read() as conn:
            return reads.queue_names(PgExecutor(conn))

    # Jobs

    def add(self, queue: str, jobs: list[NewJob], now: float, tx: Optional[Transaction] = None) -> Future[Any]:
        if tx is None:
            # One statement where it can be (see PgExecutor.insert_jobs); jobs that join a batch lock and
            # count its row beside their insert, in a transaction.
            bare = all(job.batch is None for job in jobs)
            return self.submit(lambda conn: _engine_jobs.add(PgExecutor(conn), queue, jobs, now), work=queue,
                               unknown=ADD_UNKNOWN, bare=bare)
        self._usable()
        conn = tx.connection if isinstance(tx.connection, PgConn) else PgConn(tx.connection, self.q)
        raw = conn.raw
        future: Future[Any] = Future()
        try:
            if raw.autocommit and raw.info.transaction_status == pq.TransactionStatus.IDLE:
                with raw.transaction():  # an application connection in autocommit, outside a transaction
                    added = self._add_in(conn, queue, jobs, now, tx)
            else:
                added = self._add_in(conn, queue, jobs, now, tx)
        except psycopg.Error as exc:
            raise_translated(exc, self._where, queue)
        if tx.told is not None:
            tx.told.add(queue)
        future.set_result(added)
        return future

    def _add_in(self, conn: PgConn, queue: str, jobs: list[NewJob], now: float, tx: Transaction) -> list[Added]:
        """An add in the application's transaction; its notice is sent when it commits."""
        q = self.q
        added = _engine_jobs.add(PgExecutor(conn), queue, jobs, now)
        # Told by this process at its commit (store.transaction()), else heard by every process.
        owner = self._owner if tx.told is not None else None
        conn.execute(q.notify_one, (q.channel, json.dumps({"o": owner, "q": queue})))
        return added

    def declare(self, queue: str, job: NewJob, now: float) -> Future[Any]:
        return self.submit(lambda conn: _engine_jobs.declare(PgExecutor(conn), queue, job, now), work=queue,
                           queues=[queue], unknown=ADD_UNKNOWN)

    def get(self, queue: str, id: str) -> Optional[JobRow]:
        with self._read(queue=queue) as conn:
            return reads.get(PgExecutor(conn), queue, id)

    def ahead(self, row: JobRow, now: float) -> int:
        with self._read(queue=row.queue) as conn:
            return reads.ahead(PgExecutor(conn), row, now)

    def ahead_many(self, queue: str, rows: list[JobRow], now: float) -> dict[int, int]:
        with self._read(queue=queue) as conn:
            return reads.ahead_many(PgExecutor(conn), queue, rows, now)

    def jobs(self, queue: str, state: Optional[str], grp: Optional[str], limit: int, after: Optional[str],
             now: float) -> list[JobRow]:
        with self._read(queue=queue) as conn:
            return reads.jobs(PgExecutor(conn), queue, state, grp, limit, after, now)

    def detail(self, seq: int) -> JobDetail:
        with self._read(snapshot=True) as conn:
            return reads.detail(PgExecutor(conn), seq)

    def create_batch(self, id: str, then: NewJob, queue: str, now: float) -> Future[Any]:
        return self.submit(lambda conn: batches.create(PgExecutor(conn), id, then, queue, now))

    def close_batch(self, id: str, now: float) -> Future[Any]:
        return self.submit(lambda conn: batches.close(PgExecutor(conn), id, now, self._writer.notify))

    def batch(self, id: str, now: float) -> Optional[BatchRow]:
        with self._read(snapshot=True) as conn:
            return reads.batch(PgExecutor(conn), id, now)

    def cancel(self, queue: str, id: str, now: float) -> Future[Any]:
        return self.submit(lambda conn: work.cancel(PgExecutor(conn), queue, id, now, self._writer.notify),
                           work=queue)

    def retry_failed(self, queue: str, id: str, now: float) -> Future[Any]:
        return self.submit(lambda conn: work.retry_failed(PgExecutor(conn), queue, id, now), work=queue)

    def last_seq(self) -> int:
        with self._read() as conn:
            return bulk.last_seq(PgExecutor(conn))

    def cancel_chunk(self, queue: str, pick: Pick, after: str, now: float) -> Future[Any]:
        # In a transaction of its own (alone): the rows it locks hold up no other operation's commit.
        return self.submit(lambda conn: bulk.cancel(PgExecutor(conn), queue, pick, after, now, self._writer.notify),
                           work=queue, alone=True)

    def retry_chunk(self, queue: str, pick: Pick, after: str, now: float) -> Future[Any]:
        return self.submit(lambda conn: bulk.retry(PgExecutor(conn), queue, pick, after, now), work=queue,
                           alone=True)

    def stats(self, now: float) -> Stats:
        with self._read(snapshot=True) as conn:
            return reads.stats(PgExecutor(conn), now)

    def maintain(self, now: float, batch: int = 500, progress: Optional[Callable[[int], None]] = None) -> int:
        q = self.q

        def op(conn: PgConn, queue: str) -> int:
            seqs = [s for (s,) in conn.all(q.expired_jobs, (queue, now, batch))]
            _engine_jobs.remove(PgExecutor(conn), seqs)
            return len(seqs)
        with self._read() as conn:
            queues = [name for (name,) in conn.all(q.expired_queues, (now,))]
        removed = 0
        for queue in sorted(queues):
            while True:  # one short transaction per batch: no row lock is held long
                count = self.submit(op, queue).result()
                removed += count
                if progress is not None:
                    progress(removed)
                if count < batch:
                    break
        if not queues and progress is not None:
            progress(0)

        names = self.queue_names()

        def prune(conn: PgConn) -> None:
            work.prune(PgExecutor(conn), now)
            for name in names:  # a queue no worker claims from: its jobs per state folded here
                conn.execute(q.counts_fold, {"queue": name, "key": q.fold_key})
        self.submit(prune).result()
        return removed

    # Watching (JOB-13)

    def watch_begin(self, owner: int, seq: int) -> Future[Any]:
        # Under the job's row lock, as SQLite's single writer orders it: a transaction that changes the
        # job either committed before (the watcher's first read sees what it did) or changes it after this
        # commit, and its trigger then sees the job watched and logs the change. Without it, a change made
        # before this commit and committed after it would be neither logged nor told.
        def op(conn: PgConn) -> None:
            conn.execute(self.q.job_share, (seq,))
            conn.execute(self.q.watched_insert, (seq, owner))
        self.serving()  # a watch is heard by LISTEN, and removed with the registration of a process that died
        self._watching.add(seq)
        return self.submit(op)

    def watch_end(self, owner: int, seq: int) -> Future[Any]:
        self._watching.discard(seq)
        return self.submit(lambda conn: work.watch_end(PgExecutor(conn), owner, seq))

    def watched(self, cursors: dict[int, int]) -> Watched:
        with self._read(snapshot=True) as conn:  # one snapshot: each row is what its last change made it
            return reads.watched(PgExecutor(conn), cursors)

    def was_cancelled(self, seq: int) -> bool:
        with self._read() as conn:
            return reads.was_cancelled(PgExecutor(conn), seq)

    # Workers

    def cycle(self, queue: str, owner: int, settlements: list[Settlement], want: int,
              now: "float | Callable[[], float]", source: Any = None) -> Future[Any]:
        """Settle, expire and, for a queue without limits, claim, in the writer's batch with no queue lock;
        a queue with limits claims in a transaction of its own under its lock (see _writer)."""
        done: Future[Any] = Future()

        def settle(conn: PgConn) -> "Cycle | tuple[Any, ...]":
            t = now() if callable(now) else now
            conn.execute(self.q.counts_fold, {"queue": queue, "key": self.q.fold_key})  # (migration 004)
            ex = PgExecutor(conn)
            early = work.take_early(ex, queue, owner, settlements, want, t, self._unlimited.get(queue))
            opts, stale = work.settle_expired(ex, queue, settlements, t, self._writer.notify, early)
            seen = work.unlimited_options(ex, queue, opts)
            if seen is None:
                self._unlimited.pop(queue, None)
            else:
                self._unlimited[queue] = seen
            if want <= 0 or not limited(opts) or opts.paused or (early is not None and early.taken(ex)):
                return work.claim_due(ex, queue, opts, owner, want, t, stale, early)  # (a pause takes nothing)
            return opts, stale

        def claim(conn: PgConn, opts: QueueOptions, stale: list[Settlement]) -> Cycle:
            # The clock is read once the queue's lock is held: the leases are taken, and the starts counted
            # for the rate windows (LIM-03), at that time, not at one read before waiting for the lock.
            self._writer.lock(conn, queue)
            if self._durability == "full":  # the lock is not held across the disk's wait (see flush)
                conn.execute("SET LOCAL synchronous_commit = off")
            t = now() if callable(now) else now
            return work.claim_due(PgExecutor(conn, serial=True), queue, opts, owner, want, t, stale)

        def flush(conn: PgConn) -> None:
            # A limited claim commits without waiting for the disk, so that the queue's lock is held only
            # for the count and the take. Its attempts are counted durably (JOB-04) before its handlers
            # start: this durable commit flushes the log up to it and beyond.
            conn.execute(self.q.flush_log)

        def claimed(second: Future[Any]) -> None:
            try:
                result = second.result()
                if not result.claimed or self._durability != "full":
                    done.set_result(result)
                    return
                third = self.submit(flush, bare=True)
            except BaseException as exc:
                done.set_exception(exc)
                return
            third.add_done_callback(lambda f: _copy(f, done, result))

        def settled(first: Future[Any]) -> None:
            try:
                result = first.result()
                if isinstance(result, Cycle):
                    done.set_result(result)
                    return
                second = self.submit(claim, *result, source=source, alone=True)
            except BaseException as exc:
                done.set_exception(exc)
                return
            second.add_done_callback(claimed)
        self.submit(settle, source=source).add_done_callback(settled)
        return done

    def renew(self, queue: str, owner: int, expires: float, seqs: list[int]) -> Future[Any]:
        return self.submit(lambda conn: work.renew(PgExecutor(conn), queue, owner, expires, seqs), bare=True)

    def progress(self, seq: int, attempt: int, value: str) -> Future[Any]:
        # No queue lock (the core does not name the queue, and it writes nothing that limits and order
        # read): the lease's row lock (lease_held_for_write) orders it with whatever ends the attempt.
        return self.submit(lambda conn: work.progress(PgExecutor(conn), seq, attempt, value))

    def step_answer(self, seq: int, name: str) -> Optional[str]:
        with self._read() as conn:
            return reads.step_answer(PgExecutor(conn), seq, name)

    def keep_step(self, seq: int, attempt: int, name: str, answer: str) -> Future[Any]:
        return self.submit(lambda conn: work.keep_step(PgExecutor(conn), seq, attempt, name, answer))  # see progress

    def transact(self, lease: tuple[int, int], name: str, fn: Callable[[Transaction], Any],
                 encode: Callable[[Any], str]) -> tuple[bool, str]:
        with self.transaction() as tx:
            return work.transact(PgExecutor(tx.connection), tx, lease, name, fn, encode, own=self._own)

    @contextmanager
    def _own(self) -> Iterator[None]:
        """tinystore's own statements in the application's transaction: psycopg's errors as tinystore's."""
        try:
            yield
        except psycopg.errors.UniqueViolation:
            raise Conflict("the step was kept by another attempt meanwhile; the transaction was rolled back") from None
        except psycopg.Error as exc:
            raise_translated(exc, self._where)

    # The application's own rows

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """One write transaction on a pooled connection held by this thread for the block; commit on
        success, roll back on error. The application's SQL errors stay psycopg's."""
        self._usable()
        if getattr(self._local, "tx", None) is not None:
            raise InvalidArgument("a store.transaction() is already open in this thread")
        try:
            raw = self._pool.getconn()
        except PoolTimeout as exc:
            raise Unavailable(f"no connection to {self._where.server()} could be had: {exc}") from None
        conn = PgConn(raw, self.q)
        tx = Transaction(conn, told=set())
        try:
            try:
                for statement in self._begin:
                    raw.execute(statement)
            except psycopg.Error as exc:
                raise_translated(exc, self._where)
            self._local.tx = conn
            try:
                yield tx
            except BaseException as exc:
                self._local.tx = None
                tx.closed = True
                _roll_back(raw)
                if isinstance(exc, psycopg.Error) and is_connection_error(exc, raw):
                    raise translated(exc, self._where) from exc
                raise
            self._local.tx = None
            tx.closed = True
            try:
                raw.execute("COMMIT")
            except psycopg.Error as exc:
                _roll_back(raw)
                if is_connection_error(exc, raw):
                    raise translated(exc, self._where, unknown=COMMIT_UNKNOWN) from exc
                raise  # a deferred constraint of the application's: its error
        finally:
            self._local.tx = None
            self._pool.putconn(raw)
        self._on_notice(Notice({queue: None for queue in tx.told or ()}))

    def in_transaction(self) -> bool:
        return getattr(self._local, "tx", None) is not None

    def query(self, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
        self._usable()
        tx = getattr(self._local, "tx", None)
        if tx is not None:
            rows: list[tuple[Any, ...]] = tx.execute(sql, params).fetchall()
            return rows
        try:
            with self._pool.connection() as raw:
                return PgConn(raw, self.q).execute(sql, params).fetchall()
        except PoolTimeout as exc:
            raise Unavailable(f"no connection to {self._where.server()} could be had: {exc}") from None
        except psycopg.Error as exc:
            if is_connection_error(exc):
                raise translated(exc, self._where) from exc
            raise  # the application's SQL: its error

    def adopt(self, conn: Any, queue: str) -> Transaction:
        self._usable()
        raw = _psycopg_connection_of(conn, queue)
        join_transaction(conn)
        known = self._adopted.get(raw)
        if known is None:
            try:
                known = self._identity(raw) == self._server
            except psycopg.Error as exc:
                raise_translated(exc, self._where, queue)
            self._adopted[raw] = known
        if not known:
            raise InvalidArgument(f"conn= is a connection to another server or database, not to the store's "
                                  f"{self._where.server()}", queue=queue)
        return Transaction(PgConn(raw, self.q))


def _copy(source: Future[Any], target: Future[Any], result: Any = None) -> None:
    """A future's outcome told to another (``result`` in place of its own, where given)."""
    exc = source.exception()
    if exc is None:
        target.set_result(source.result() if result is None else result)
    else:
        target.set_exception(exc)


def _roll_back(raw: psycopg.Connection) -> None:
    try:
        if not raw.closed and not raw.broken:
            raw.execute("ROLLBACK")
    except psycopg.Error:
        pass


def _psycopg_connection_of(conn: Any, queue: str) -> psycopg.Connection:
    """The psycopg connection behind ``conn``: itself, or what a SQLAlchemy Connection or Session wraps."""
    dbapi = driver_connection(conn)
    if isinstance(dbapi, psycopg.Connection):
        return dbapi
    raise InvalidArgument(f"conn= must be a psycopg 3 connection (not an async one), or a SQLAlchemy Connection "
                          f"or Session on postgresql+psycopg://, not {type(conn).__name__}", queue=queue)
