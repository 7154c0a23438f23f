"""Ending leases: settlements that name their attempt, expired leases, dead processes. Port of
sqlite/_leases; every function runs in a transaction holding the queue's lock.

The attempt is the token: every statement that ends a lease names
``(job, attempt)``, so a settlement from an attempt that lost its lease finds
no lease and changes nothing (JOB-05).
"""

from __future__ import annotations

from typing import Callable

from ..._options import QueueOptions
from ..._settle import LOST_LEASE, Decision, Done, Failed, decide_lost, outcome
from .._base import JobRow, Settlement
from . import _groups, _jobs
from ._connection import PgConn


def settle(conn: PgConn, queue: str, opts: QueueOptions, settlements: list[Settlement],
           now: float) -> list[Settlement]:
    """Apply each settlement whose attempt still holds its lease; return the stale ones."""
    q = conn.q
    opts = _groups.kept(conn, queue, opts)
    ended = {seq for (seq,) in conn.all(q.leases_end_many, {"jobs": [s.seq for s in settlements],
                                                            "attempts": [s.attempt for s in settlements]})}
    stale = [s for s in settlements if s.seq not in ended]
    live = [s for s in settlements if s.seq in ended]
    gone = {s.seq for s in live if isinstance(s.decision, Done) and s.decision.leaves}
    if gone:
        _jobs.remove(conn, list(gone))
    for s in live:
        if s.seq not in gone:
            apply(conn, s.seq, s.decision)
    _groups.release(conn, queue, opts, [s.grp for s in live if s.grp is not None])
    outcomes = [outcome(s.decision) for s in live]
    done, failed = outcomes.count("done"), outcomes.count("failed")
    if done or failed:
        conn.execute(q.count_add, (queue, int(now // 60), 0, done, failed))
    return stale


def apply(conn: PgConn, seq: int, decision: Decision) -> None:
    """Apply a decision that keeps the job to a job whose lease has just ended (its group is released apart)."""
    q = conn.q
    if isinstance(decision, Done):
        conn.execute(q.steps_delete, (seq,))
        conn.execute(q.job_done, (decision.expires, decision.result, seq))
    elif isinstance(decision, Failed):
        conn.execute(q.job_fail, (decision.error, decision.expires, seq))
    else:
        conn.execute(q.job_requeue, {"seq": seq, "at": decision.at, "uncount": int(decision.uncount),
                                     "reset": decision.reset, "error": decision.error,
                                     "result": decision.result})


def end_expired(conn: PgConn, queue: str, opts: QueueOptions, now: float) -> int:
    """End the leases of a queue that ran out; each attempt stays counted."""
    expired = conn.all(conn.q.leases_expired, (queue, now))
    if expired:
        opts = _groups.kept(conn, queue, opts)
    for seq, attempt in expired:
        end_lost(conn, queue, opts, seq, attempt, now)
    return len(expired)


def end_lost(conn: PgConn, queue: str, opts: QueueOptions, seq: int, attempt: int, now: float) -> None:
    """End one lease whose attempt will never settle."""
    q = conn.q
    if conn.execute(q.lease_end, (seq, attempt)).rowcount == 0:
        return
    row = conn.one(q.job_by_seq, (seq,))
    if row is not None:
        job = JobRow(*row)
        decision = decide_lost(attempt, opts, now, job.repeat, job.at)
        apply(conn, seq, decision)
        _groups.release(conn, queue, opts, [job.grp] if job.grp is not None else [])
        if outcome(decision) == "failed":  # its last attempt: failed for good, counted as settle counts it
            conn.execute(q.count_add, (queue, int(now // 60), 0, 0, 1))


def end_owner(conn: PgConn, owner: int, options: Callable[[str], QueueOptions], now: float) -> list[str]:
    """End every lease a process that died held, at once (DUR-03); the attempts stay counted.

    One statement per queue requeues or fails its jobs (``owner_lost`` applies
    ``_settle.decide_lost`` to the whole batch). The caller holds the locks of
    the queues it returns.
    """
    q = conn.q
    queues = [queue for (queue,) in conn.all(q.owner_queues, ([owner],))]
    for queue in queues:
        opts = options(queue)
        for seq, attempt in conn.all(q.owner_repeating, (owner, queue)):
            end_lost(conn, queue, opts, seq, attempt, now)
        groups = {g for (g,) in conn.all(q.owner_groups, (owner, queue))}
        states = conn.all(q.owner_lost, {"owner": owner, "queue": queue, "attempts": opts.attempts,
                                         "now": now, "expires": now + opts.keep, "error": LOST_LEASE})
        failed = sum(state == "failed" for (state,) in states)
        if failed:
            conn.execute(q.count_add, (queue, int(now // 60), 0, 0, failed))
        conn.execute(q.owner_leases_end, (owner, queue))
        for grp in groups:
            _groups.recompute(conn, queue, grp, opts, now)
    return queues
