"""Ending leases: settlements that name their attempt, expired leases, dead processes.

The attempt is the token: every statement that ends a lease names
``(job, attempt)``, so a settlement from an attempt that lost its lease finds
no lease and changes nothing (JOB-05).
"""

from __future__ import annotations

import json
import sqlite3
from typing import Callable

from ..._options import QueueOptions
from ..._settle import LOST_LEASE, Decision, Done, Failed, decide_lost, outcome
from .._base import JobRow, Settlement
from . import _groups, _jobs
from ._sql import Q


def settle(conn: sqlite3.Connection, queue: str, opts: QueueOptions, settlements: list[Settlement],
           now: float) -> list[Settlement]:
    """Apply each settlement whose attempt still holds its lease; return the stale ones.

    The leases end, done jobs leave and their groups are released with one
    statement each for the whole batch; other outcomes are applied job by job.
    """
    opts = _groups.kept(conn, queue, opts)
    tokens = json.dumps([[s.seq, s.attempt] for s in settlements])
    ended = {seq for (seq,) in conn.execute(Q.leases_end_many, {"tokens": tokens})}
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
        conn.execute(Q.count_add, (queue, int(now // 60), 0, done, failed))
    return stale


def apply(conn: sqlite3.Connection, seq: int, decision: Decision) -> None:
    """Apply a decision that keeps the job to a job whose lease has just ended (its group is released apart)."""
    if isinstance(decision, Done):
        conn.execute(Q.steps_delete, (seq,))
        conn.execute(Q.job_done, (decision.expires, decision.result, seq))
    elif isinstance(decision, Failed):
        conn.execute(Q.job_fail, (decision.error, decision.expires, seq))
    else:
        conn.execute(Q.job_requeue, {"seq": seq, "at": decision.at, "uncount": int(decision.uncount),
                                     "reset": int(decision.reset), "error": decision.error,
                                     "result": decision.result})


def end_expired(conn: sqlite3.Connection, queue: str, opts: QueueOptions, now: float) -> int:
    """End the leases of a queue that ran out; each attempt stays counted."""
    expired = conn.execute(Q.leases_expired, (queue, now)).fetchall()
    if expired:
        opts = _groups.kept(conn, queue, opts)
    for seq, attempt in expired:
        end_lost(conn, queue, opts, seq, attempt, now)
    return len(expired)


def end_lost(conn: sqlite3.Connection, queue: str, opts: QueueOptions, seq: int, attempt: int, now: float) -> None:
    """End one lease whose attempt will never settle."""
    if conn.execute(Q.lease_end, (seq, attempt)).rowcount == 0:
        return
    row = conn.execute(Q.job_by_seq, (seq,)).fetchone()
    if row is not None:
        job = JobRow(*row)
        decision = decide_lost(attempt, opts, now, job.repeat, job.at)
        apply(conn, seq, decision)
        _groups.release(conn, queue, opts, [job.grp] if job.grp is not None else [])
        if outcome(decision) == "failed":  # its last attempt: failed for good, counted as settle counts it
            conn.execute(Q.count_add, (queue, int(now // 60), 0, 0, 1))


def end_owner(conn: sqlite3.Connection, owner: int, options: Callable[[str], QueueOptions], now: float) -> list[str]:
    """End every lease a process that died held, at once (DUR-03); the attempts stay counted.

    Jobs without a group are requeued or failed with one statement per queue,
    so recovering 100,000 leases costs a few statements, not 100,000. The jobs
    that failed for good count in the queue's failures of this minute. The
    SQL (``owner_lost``) applies ``_settle.decide_lost`` to the whole batch.
    Returns the queues whose leases it ended.
    """
    queues = [queue for (queue,) in conn.execute(Q.owner_queues, (owner,)).fetchall()]
    for queue in queues:
        opts = options(queue)
        for seq, attempt in conn.execute(Q.owner_repeating, (owner, queue)).fetchall():
            end_lost(conn, queue, opts, seq, attempt, now)
        groups = {g for (g,) in conn.execute(Q.owner_groups, (owner, queue))}
        states = conn.execute(Q.owner_lost, {"owner": owner, "queue": queue, "attempts": opts.attempts,
                                             "now": now, "expires": now + opts.keep, "error": LOST_LEASE})
        failed = sum(state == "failed" for (state,) in states)
        if failed:
            conn.execute(Q.count_add, (queue, int(now // 60), 0, 0, failed))
        conn.execute(Q.owner_leases_end, (owner, queue))
        for grp in groups:
            _groups.recompute(conn, queue, grp, opts, now)
    return queues
