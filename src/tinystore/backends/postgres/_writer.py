"""The one writer of a process: group commit on its own connection and thread.

Every write of a store (adds, claims, settlements, steps, renewals) is an
operation queued here and run by the writer thread in one transaction with
every other operation waiting at that moment, so that one's error touches
no other (see below); one COMMIT for all of them, and only then are their
futures resolved. A write never runs on the caller's thread: a
round trip to the server must not stall a worker's event loop.

Round trips are what a write costs over a network. A transaction runs in
pipeline mode: its statements go to the server where an operation reads an
answer, and the rest with the notices and COMMIT (``_pipelined``); only
where an operation of a batch fails is the batch run again one statement at
a time, each operation in a savepoint (``_batch``). A bare operation alone
runs in autocommit, one statement (``_bare``, below).

What serialises what, across processes (no lock spans a claim cycle):

- Adds, settlements, renewals, expiries and the claims of a queue without
  limits take no queue lock. A claim locks the rows it picks with ``FOR
  UPDATE SKIP LOCKED`` (``_sql.SKIP_LOCKED``) and takes only those still
  queued (``take``), so claims of many processes never wait for each
  other: each takes due jobs in start order among the rows no other claim
  holds (JOB-01 per claim).
- The claim of a queue with limits (``concurrency``, ``rate``, ``group_*``)
  is an operation run ``alone``: its own short transaction, after the
  batch's, that takes the queue's transaction-level advisory lock,
  ``pg_advisory_xact_lock(<queue key of the schema>, hashtext(queue))``,
  counts and takes, and commits without waiting for the disk (a durable
  commit follows before its handlers start: ``PostgresBackend.cycle``).
  The counts of live leases and of starts in the rate windows cannot
  change upwards until it has committed the leases it took (only claims
  add to them, one at a time), so two processes can never both take the
  last place (LIM-01..03). A settlement that ends a
  lease meanwhile only makes the count read high for a moment.
- A group's row (its running count and head) is changed under the group's
  own advisory lock (``PgExecutor.lock_groups``), taken before its row is
  read or written, so that a head read again always sees the adds that
  committed before it.
- Declarations of a schedule and saves of options take the queue's lock
  (``queues=``), so that they are applied one after another and never
  beside a limited claim.

An operation that writes with one statement and sends its own notice (an
add of jobs without a group, a renewal) is ``bare``: where it is alone in
its batch, it runs in autocommit, without BEGIN and COMMIT, so that it
costs one round trip to the server (the statement is its own transaction).
One that finds it needs more than one statement after all raises
``Transact`` before it writes, and runs again in a transaction.

A batch takes the locks its operations declare (``queues=``) at BEGIN, in
sorted order; an operation that finds it needs a queue's lock while it runs
(``lock``) takes it then; a deadlock that may cause, or a serialization
failure, is detected by the server and the whole batch is run again here, up
to ``RETRIES`` times.

Notices: an operation that gives a queue work (jobs added or requeued, room
freed) or cancels a job says so (``work=`` at submit, or ``notify`` while it
runs); the transaction sends each with ``pg_notify`` on the store's channel,
naming this process's owner id, so that other processes hear it when it
commits (``_keeper``) and this one skips it when it hears it back; this
process's listeners are told the commit's ``Notice`` directly, after COMMIT
and before its callers' futures resolve. A commit that changed nothing
tells nobody.

Errors leave as tinystore's (``_connection.translated``): a connection lost
fails the whole batch with ``Unavailable`` (during COMMIT, saying that it may
or may not have been written) and the next batch connects again; an
operation's own error fails that operation only.
"""

from __future__ import annotations

import json
import logging
import select
import threading
from collections import deque
from concurrent.futures import Future
from contextlib import nullcontext
from typing import Any, Callable, Iterable, Optional

import psycopg

from ..._errors import Closed, Error
from .._base import Notice
from .._commits import CommitNotices
from ._connection import RETRIED, PgConn, Where, is_connection_error, translated

log = logging.getLogger("tinystore.store")
# an operation's future, and its result or its error
Outcome = tuple["Future[Any]", Any, Optional[BaseException]]
MAX_OPERATIONS = 512  # per transaction, so that no commit holds the queues' locks long
RETRIES = 8  # runs of a batch that met a deadlock or a serialization failure
MAYBE = "the connection was lost during COMMIT: it may or may not have been written"
PIPELINE = psycopg.Pipeline.is_supported()  # libpq 14 and later (psycopg[binary] has it): else one by one


class Transact(Exception):
    """Raised by a bare operation run alone in autocommit that needs a transaction: it wrote nothing."""


def notice_text(owner: Optional[int], queue: str, job: Optional[int] = None) -> str:
    """A notice as sent on the store's channel: the process that sent it, the queue, a job cancelled."""
    return json.dumps({"o": owner, "q": queue} if job is None else {"o": owner, "q": queue, "j": job})


class Writer:
    def __init__(self, connect: Callable[[], PgConn], where: Where, on_commit: Callable[[Notice], None],
                 conn: Optional[PgConn] = None, begin: tuple[str, ...] = ("BEGIN",)):
        self._connect = connect
        self._begin_sql = begin  # BEGIN, with the session's settings through a pooler (_connection.begin)
        self._where = where
        self._on_commit = on_commit
        self._conn: Optional[PgConn] = conn
        self._pending: deque[Any] = deque()
        self._cv = threading.Condition()
        self._closing = False
        self._notices = CommitNotices()  # the running transaction's
        self.owner: Optional[int] = None  # this process's registration, which its notices name
        self.transactions = 0  # write transactions begun, for tests and benchmarks
        # Where a list: each transaction adds to work[0] the rows its statements read and wrote in the
        # schema's tables (pg_stat_xact_user_tables, after BEGIN and before COMMIT): what a claim costs,
        # for tests (kits.writer_work; SQLite's counterpart is its virtual machine's steps).
        self.work: Optional[list[int]] = None
        self._thread = threading.Thread(target=self._loop, name="tinystore-pg-writer", daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any, queues: Iterable[str] = (), work: Optional[str] = None,
               source: Any = None, unknown: Optional[str] = None, alone: bool = False, bare: bool = False) -> Future[Any]:
        """Queue ``fn(conn, *args)``; the future resolves after the commit that includes it.

        ``queues``: whose locks it needs; ``work`` a queue it gives work to,
        for the notice of its commit; ``source``, who asked, so that it is not
        woken by its own write; ``unknown``, what to say when the connection
        is lost during the COMMIT; ``alone``: in a transaction of its own,
        after the batch's, so that the locks it takes are held for it only;
        ``bare``: one statement that sends its own notice, run in autocommit
        where the batch holds it alone (see above).
        """
        future: Future[Any] = Future()
        locks = set(queues)
        with self._cv:
            if self._closing:
                raise Closed(f"the store {self._where.location!r} is closed")
            self._pending.append((fn, args, future, work, source, locks, unknown, bare and not locks, alone))
            self._cv.notify()
        return future

    def notify(self, queue: str, job: Optional[int] = None, wake_source: bool = False) -> None:
        """From inside an operation: its commit gives ``queue`` work, or (``job``) cancels that job;
        ``wake_source``: work that whoever asked for the operation must be woken for too."""
        self._notices.notify(queue, job, wake_source)

    def lock(self, conn: PgConn, queue: str) -> None:
        """From inside an operation: take ``queue``'s lock now, where the batch does not hold it yet."""
        if queue not in conn.locked:
            conn.execute(conn.q.lock_queue, (conn.q.queue_key, queue))
            conn.locked.add(queue)

    def close(self) -> None:
        """Finish what is queued, then stop."""
        with self._cv:
            self._closing = True
            self._cv.notify()
        if threading.current_thread() is not self._thread:
            self._thread.join()
        if self._conn is not None:
            try:
                self._conn.raw.close()
            except psycopg.Error:
                pass
            self._conn = None

    def _loop(self) -> None:
        while True:
            with self._cv:
                while not self._pending and not self._closing:
                    self._cv.wait()
                if not self._pending:
                    return
                batch = [self._pending.popleft() for _ in range(min(len(self._pending), MAX_OPERATIONS))]
            batch = [item for item in batch if item[2].set_running_or_notify_cancel()]
            shared = [item[:8] for item in batch if not item[8]]
            alone = [[item[:8]] for item in batch if item[8]]
            for transaction in ([shared] if shared else []) + alone:
                self._commit(transaction)

    def _commit(self, batch: list[Any]) -> None:
        """One transaction of operations: run, committed, its notice told, then its futures resolved."""
        try:
            notice, outcomes = self._run(batch)
        except BaseException as exc:  # a bug of this module: no caller may wait forever
            log.exception("the writer failed")
            notice, outcomes = None, [(item[2], None, exc) for item in batch]
        if notice is not None:
            try:
                self._on_commit(notice)
            except Exception:
                log.exception("a listener failed on a notice")
        for future, result, error in outcomes:
            if error is None:
                future.set_result(result)
            else:
                future.set_exception(error)

    def _connection(self) -> PgConn:
        conn = self._conn
        if conn is None or conn.retired or conn.raw.closed or conn.raw.broken or _dropped(conn.raw):
            if conn is not None:
                conn.raw.close()
            self._conn = None
            self._conn = conn = self._connect()
        return conn

    def _run(self, batch: list[Any]) -> tuple[Optional[Notice], list[Outcome]]:
        """Run a batch in one transaction, again where the server asks for it: its notice (None when it
        changed nothing), and each operation's future with its result or error."""
        tries = reconnects = 0
        while True:
            tries += 1
            try:
                conn = self._connection()
            except Error as exc:
                return None, [(item[2], None, exc) for item in batch]
            stage = ["begin"]
            try:
                return self._transaction(conn, batch, stage)
            except psycopg.Error as exc:
                self._roll_back(conn)
                if exc.sqlstate in RETRIED and tries < RETRIES:
                    log.debug("a write transaction is run again: %s", exc)
                    continue
                lost = is_connection_error(exc, conn.raw)
                if lost:
                    conn.raw.close()
                    self._conn = None
                    # Lost before COMMIT was sent: the server rolled the transaction back, and the batch
                    # runs again on a new connection (a stale one, a server restarted since the last batch).
                    if stage[0] != "commit" and reconnects < 2:
                        reconnects += 1
                        continue
                log.debug("a write transaction failed: %s", exc)
                return None, [(future, None, translated(exc, self._where, work,
                                                        (unknown or MAYBE) if stage[0] == "commit" else None))
                              for fn, args, future, work, source, locks, unknown, bare in batch]
            except BaseException:  # not the server's: the transaction must not stay open for the next batch
                self._roll_back(conn)
                raise

    def _transaction(self, conn: PgConn, batch: list[Any], stage: list[Any]) -> tuple[Optional[Notice], list[Outcome]]:
        self.transactions += 1
        conn.owner = self.owner
        if len(batch) == 1 and batch[0][7] and self.work is None:
            try:
                return self._bare(conn, batch[0], stage)
            except Transact:
                stage[0] = "begin"
        return self._pipelined(conn, batch, stage)

    def _begin(self, conn: PgConn, locks: set[str], stage: list[Any]) -> int:
        """BEGIN and the locks declared; the work measured so far (``work``)."""
        q = conn.q
        for statement in self._begin_sql:
            conn.execute(statement)
        began: int = conn.row(q.work_done, (q.name,))[0] if self.work is not None else 0
        conn.locked = set()
        conn.options = {}
        for queue in sorted(locks):
            self.lock(conn, queue)
        stage[0] = "run"
        return began

    def _end(self, conn: PgConn, told: Iterable[tuple[Any, ...]], began: int, stage: list[Any],
             unsure: bool = False) -> None:
        """The notices sent, and COMMIT. ``unsure``: whether the transaction wrote is not known yet (a
        pipeline's answers come after): they are sent only if it did."""
        q = conn.q
        payloads = sorted({notice_text(self.owner, queue, job) for queue, job, *_ in told})  # (queue, job[, wake])
        if payloads:
            conn.execute(q.notify_written if unsure else q.notify_many, (q.channel, payloads))
        if self.work is not None:  # a difference: the view may hold counts of earlier transactions not yet flushed
            self.work[0] += conn.row(q.work_done, (q.name,))[0] - began
        stage[0] = "commit"
        conn.execute("COMMIT")

    def _pipelined(self, conn: PgConn, batch: list[Any], stage: list[Any]) -> tuple[Optional[Notice], list[Outcome]]:
        """The batch in one transaction in pipeline mode: statements are sent where an operation reads an
        answer, and the rest with the notices and COMMIT. An error fails an operation alone in its
        transaction; in a batch of several, where any fails, the batch is rolled back and run again one
        statement at a time (``_batch``), so that the error fails only its own operation."""
        notices = self._notices = CommitNotices()
        ran = []  # per operation: its future, result, source, what it told, and its first statement sent
        with conn.raw.pipeline() if PIPELINE else nullcontext() as pipeline:
            conn.sent = []
            try:
                began = self._begin(conn, set().union(*(item[5] for item in batch)), stage)
                for fn, args, future, work, source, locks, unknown, bare in batch:
                    notices.begin(work)
                    first = len(conn.sent)
                    result = fn(conn, *args)
                    ran.append((future, result, source, notices.told(), first))
                self._end(conn, [told for item in ran for told in item[3]], began, stage, unsure=True)
                if pipeline is not None:
                    pipeline.sync()
            except Exception as exc:
                conn.sent = None
                if pipeline is not None:
                    _drain(pipeline)
                    # After a failed pipeline psycopg may count as prepared a statement the server does not
                    # hold ('prepared statement "_pg3_N" does not exist' at its next use; seen with claims and
                    # cancel_many's locked chunks side by side, BULK-06): nothing is prepared on this
                    # connection any more, and the next batch gets a new one.
                    conn.raw.prepare_threshold = None
                    conn.retired = True
                if isinstance(exc, psycopg.Error) and (exc.sqlstate in RETRIED or is_connection_error(exc, conn.raw)):
                    raise  # run again, or failed (lost once COMMIT was sent: maybe written)
                error = exc  # an operation's own (one sent with COMMIT may raise there: COMMIT did not run)
            else:
                ends = [item[4] for item in ran[1:]] + [len(conn.sent)]
                for (future, result, source, told, first), end in zip(ran, ends):
                    if conn.count_sent(first, end):
                        notices.wrote(source, told)
                conn.sent = None
                return notices.notice(), [(item[0], item[1], None) for item in ran]
        conn.execute("ROLLBACK")
        if len(batch) == 1:
            return None, [(batch[0][2], None, _own(error, self._where, batch[0][3]))]
        stage[0] = "begin"
        return self._batch(conn, batch, stage)

    def _batch(self, conn: PgConn, batch: list[Any], stage: list[Any]) -> tuple[Optional[Notice], list[Outcome]]:
        """Operations in one transaction, each in its own savepoint so that one's error touches no other,
        their statements run one by one."""
        began = self._begin(conn, set().union(*(item[5] for item in batch)), stage)
        outcomes: list[Outcome] = []
        notices = self._notices = CommitNotices()
        for fn, args, future, work, source, locks, unknown, bare in batch:
            conn.execute("SAVEPOINT operation")
            before = conn.changes
            notices.begin(work)
            try:
                result = fn(conn, *args)
            except Exception as exc:
                if isinstance(exc, psycopg.Error) and (exc.sqlstate in RETRIED or is_connection_error(exc, conn.raw)):
                    raise  # the whole batch: run again, or failed
                conn.execute("ROLLBACK TO SAVEPOINT operation")
                outcomes.append((future, None, _own(exc, self._where, work)))
                conn.execute("RELEASE SAVEPOINT operation")
                continue
            outcomes.append((future, result, None))
            if conn.changes != before:
                notices.wrote(source)
            conn.execute("RELEASE SAVEPOINT operation")
        self._end(conn, [(queue, None) for queue in notices.queues] + sorted(notices.cancelled), began, stage)
        return notices.notice(), outcomes

    def _bare(self, conn: PgConn, item: tuple[Any, ...], stage: list[Any]) -> tuple[Optional[Notice], list[Outcome]]:
        """A bare operation alone in autocommit: its one statement is its transaction, its notice sent by it."""
        fn, args, future, work, source, locks, unknown, bare = item
        notices = self._notices = CommitNotices()
        notices.begin(work)
        before = conn.changes
        stage[0] = "commit"  # a connection lost from here on: the statement may or may not have committed
        conn.bare = True
        try:
            result = fn(conn, *args)
        except Exception as exc:
            if isinstance(exc, Transact) or (isinstance(exc, psycopg.Error) and (
                    exc.sqlstate in RETRIED or is_connection_error(exc, conn.raw))):
                raise
            return None, [(future, None, _own(exc, self._where, work))]
        finally:
            conn.bare = False
        if conn.changes != before:
            notices.wrote(source)
        return notices.notice(), [(future, result, None)]

    def _roll_back(self, conn: PgConn) -> None:
        try:
            if not conn.raw.closed and not conn.raw.broken:
                conn.execute("ROLLBACK")
        except psycopg.Error:
            pass


def _dropped(raw: psycopg.Connection) -> bool:
    """Whether the server closed an idle connection (a restart, a terminated session), read from what it
    sent meanwhile without sending anything: a bare statement's error would leave its commit in doubt."""
    for _ in range(3):  # its last message, then the end of the stream
        if not select.select([raw.fileno()], [], [], 0)[0]:
            break
        try:
            raw.pgconn.consume_input()
        except psycopg.OperationalError:
            return True
    return raw.closed


def _drain(pipeline: psycopg.Pipeline) -> None:
    """A pipeline whose transaction failed: the answers still due read and let go, so that it ends cleanly."""
    for _ in range(2):  # the statements after the error come back aborted, then the sync
        try:
            pipeline.sync()
            return
        except psycopg.Error:
            pass


def _own(exc: Exception, where: Where, queue: Optional[str]) -> Exception:
    """An operation's own error: psycopg's as tinystore's; a tinystore error, or a bug, as it is."""
    error = translated(exc, where, queue)
    if error is not exc:
        error.__cause__ = exc
    return error  # type: ignore[return-value]
