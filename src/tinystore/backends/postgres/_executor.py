"""The engine's executor on a psycopg connection (``_engine.executor``).

Lists are PostgreSQL arrays (psycopg adapts a Python list). Seqs come from
the jobs table's identity column, drawn by the insert: the adds of one
process commit in seq order (its one writer), so its jobs of equal time are
claimed in the order it added them (JOB-01); two processes adding at the same
moment take no lock, and their jobs are claimed in the order their commits
make them visible. A sequence never hands a value out twice, so SQLite's
floor of seqs has no counterpart. PostgreSQL keeps only valid UTF-8 text, so
no claimed row is unreadable here.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import psycopg

from .._base import Claimed, NewJob
from .._engine.executor import Executor, Later
from ._connection import PgConn
from ._writer import Transact, notice_text


class Sent(Later):
    """A statement sent in the writer's pipeline: its answer comes with the next read's (psycopg syncs the
    pipeline when a cursor is fetched from), so reads sent together cost one round trip."""

    def __init__(self, cur: psycopg.Cursor):
        self._cur = cur
        self._fetched: Optional[list[tuple[Any, ...]]] = None

    def all(self) -> list[tuple[Any, ...]]:
        if self._fetched is None:
            self._fetched = self._cur.fetchall()
        return self._fetched


class PgExecutor(Executor):
    """``conn`` in a transaction; its statements are its schema's (``conn.q``). ``serial``: the transaction
    holds the queue's lock, so its picks skip no row (``_sql.PICKS``)."""

    takes_at_once = True

    def __init__(self, conn: PgConn, serial: bool = False):
        self.conn = conn
        self.q = {**conn.q.statements, **conn.q.serial_picks} if serial else conn.q.statements

    def one(self, name: str, params: Any = ()) -> Optional[tuple[Any, ...]]:
        return self.conn.execute(self.q[name], params).fetchone()

    def all(self, name: str, params: Any = ()) -> list[tuple[Any, ...]]:
        return self.conn.execute(self.q[name], params).fetchall()

    def ahead(self, name: str, params: Any = ()) -> Later:
        return Sent(self.conn.execute(self.q[name], params))

    def run(self, name: str, params: Any = ()) -> None:
        self.conn.execute(self.q[name], params)

    def each(self, name: str, rows: list[Any]) -> None:
        self.conn.executemany(self.q[name], rows)

    def array(self, values: Sequence[Any]) -> list[Any]:
        return list(values)

    def columns(self, **columns: list[Any]) -> dict[str, Any]:
        return {name: list(values) for name, values in columns.items()}

    def update_groups(self, queue: str, changes: dict[str, int], limit: int) -> None:
        # One statement per group, found by its whole key (see groups_update in queries.sql).
        self.conn.executemany(self.q["groups_update"], [{"queue": queue, "grp": grp, "change": change,
                                                         "limit": limit} for grp, change in changes.items()])

    def taken(self, row: tuple[Any, ...]) -> Claimed:
        return Claimed(*row)

    def insert_jobs(self, queue: str, jobs: list[NewJob]) -> list[tuple[Optional[int], bool]]:
        columns = {"queue": queue, "ids": [j.id for j in jobs], "payloads": [j.payload for j in jobs],
                   "grps": [j.grp for j in jobs], "ats": [j.at for j in jobs], "repeats": [j.repeat for j in jobs],
                   "priorities": [j.priority for j in jobs], "batches": [j.batch for j in jobs]}
        if self.conn.bare:
            return self._insert_alone(queue, jobs, columns)
        written = dict((id, seq) for seq, id in self.all("jobs_insert", columns))
        seqs: list[tuple[Optional[int], bool]] = []
        for job in jobs:  # a batch's second job of an id finds its id taken by the first
            seq = written.pop(job.id, None)
            seqs.append((seq, seq is not None))
        return seqs

    def _insert_alone(self, queue: str, jobs: list[NewJob], columns: dict[str, Any]) -> list[tuple[Optional[int], bool]]:
        """An add that is its own transaction (the writer's bare operation): one statement writes every job
        and sends the notice, or writes nothing, and the add runs again in a transaction (``Transact``):
        where a job has a group (its row is written too), or an id is kept (which may be past its time).
        Without a kept id, an id taken meanwhile fails the statement (no ON CONFLICT): nothing written."""
        if any(j.grp is not None for j in jobs):
            raise Transact
        try:
            rows = self.all("jobs_insert_alone", {**columns, "channel": self.conn.q.channel,
                                                  "notice": notice_text(self.conn.owner, queue)})
        except psycopg.errors.UniqueViolation:
            raise Transact from None
        if len(rows) < len(jobs):
            raise Transact
        written = {id: seq for seq, id, _ in rows}
        return [(written[j.id], True) for j in jobs]

    def insert_job(self, queue: str, job: NewJob, seq: Optional[int]) -> int:
        written: int = self.row("job_insert", (queue, job.id, job.payload, job.grp, job.at, job.repeat,
                                               job.priority, job.batch))[0]
        return written

    def lock_groups(self, queue: str, grps: Sequence[str]) -> None:
        if grps:
            self.conn.execute(self.conn.q.lock_groups, (self.conn.q.group_key, queue, list(grps)))

    def kept_options(self, queue: str) -> Optional[str]:
        """Read once per writer transaction (``PgConn.options``): one transaction claims under the limits
        it read first, and a change committed meanwhile binds the next one."""
        cache = self.conn.options
        if cache is not None and queue in cache:
            kept = cache[queue]
            if isinstance(kept, Later):  # sent ahead (options_ahead)
                row = kept.one()
                kept = cache[queue] = row[0] if row else None
            found: Optional[str] = kept
            return found
        text = super().kept_options(queue)
        if cache is not None:
            cache[queue] = text
        return text

    def options_ahead(self, queue: str) -> None:
        cache = self.conn.options
        if cache is not None and queue not in cache:
            cache[queue] = self.ahead("queue_options", (queue,))

    def forget_options(self, queue: str) -> None:
        if self.conn.options is not None:
            self.conn.options.pop(queue, None)

    def own_lease(self, seq: int, attempt: int) -> bool:
        """run.transaction: the lease's row locked until the commit: nothing ends the lease meanwhile (a
        settlement, an expiry, a cancel of another process waits for it). No queue lock: the
        application's code may run long, and claims of other processes must not wait for it."""
        return self.one("lease_lock", (seq, attempt)) is not None
