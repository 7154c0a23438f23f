"""Ending leases: settlements that name their attempt, expired leases, dead processes.

The attempt is the token: every statement that ends a lease names
``(job, attempt)``, so a settlement from an attempt that lost its lease finds
no lease and changes nothing (JOB-05). What becomes of each job is decided
by ``_settle``; here it is applied.
"""

from __future__ import annotations

from typing import Callable

from ..._options import QueueOptions
from ..._settle import LOST_LEASE, Decision, Done, Failed, Requeue, decide_lost, lost_in_bulk, outcome
from .._base import JobRow, Settlement
from . import batches, groups, jobs
from .executor import Executor, Later

Notify = Callable[..., None]
KEPT_ATTEMPTS = 20  # the attempts of a job whose start, end and error are kept (the last ones)


def end_settled(ex: Executor, settlements: list[Settlement]) -> Later:
    """Send the end of the leases that settlements name (``settle`` applies them): each lease still held,
    with its job's batch, read before done jobs leave.

    By lease, not by job: the settlements of a cycle may hold two attempts of one job, a stale one (its
    lease ran out and the same process claimed the job again while its handler still ran) beside the one
    that holds the lease."""
    tokens = ex.columns(jobs=[s.seq for s in settlements], attempts=[s.attempt for s in settlements])
    return ex.ahead("leases_end_many", tokens)


def settle(ex: Executor, queue: str, opts: QueueOptions, settlements: list[Settlement], ends: Later,
           now: float, notify: Notify) -> list[Settlement]:
    """Apply each settlement whose attempt still held its lease (``ends``, from ``end_settled``); return the
    stale ones.

    The leases end, done jobs leave and their groups are released with one
    statement each for the whole batch; other outcomes are applied job by job.
    The jobs of batches that ended count in their batches (``batches.ended``).
    """
    opts = groups.kept(ex, queue, opts)
    rows = ends.all()
    ended = {(seq, attempt) for seq, attempt, _ in rows}
    stale = [s for s in settlements if (s.seq, s.attempt) not in ended]
    live = [s for s in settlements if (s.seq, s.attempt) in ended]
    batch_of = {seq: batch for seq, _, batch in rows if batch is not None}
    members = {s.seq: batch_of[s.seq] for s in live if s.seq in batch_of and batches.ending(s.decision)}
    gone = {s.seq for s in live if isinstance(s.decision, Done) and s.decision.leaves}
    if gone:
        jobs.remove(ex, list(gone))
    for s in live:
        if s.seq not in gone:
            apply(ex, s.seq, s.decision)
            record(ex, s)
    if members:
        counts = batches.ends()
        for s in live:
            how = batches.ending(s.decision)
            if s.seq in members and how is not None:  # (every member ends)
                batches.tally(counts, members[s.seq], how)
        batches.ended(ex, counts, now, notify)
    groups.release(ex, queue, opts, [s.grp for s in live if s.grp is not None])
    outcomes = [outcome(s.decision) for s in live]
    done, failed = outcomes.count("done"), outcomes.count("failed")
    if done or failed:
        ex.run("count_add", (queue, int(now // 60), 0, done, failed))
    return stale


def record(ex: Executor, s: Settlement) -> None:
    """Keep the attempt's start, end and error with its job (which stays), and no more than the last
    ``KEPT_ATTEMPTS`` of them. An attempt given back unrun (a claim that stopped) is not one; one whose
    lease was lost is kept with no start (``began`` None)."""
    if s.ended is None:
        return
    error = s.decision.error if isinstance(s.decision, (Failed, Requeue)) else None
    ex.run("attempt_record", (s.seq, s.attempt, s.began, s.ended, error))
    ex.run("attempts_trim", (s.seq, s.attempt - KEPT_ATTEMPTS))


def apply(ex: Executor, seq: int, decision: Decision) -> None:
    """Apply a decision that keeps the job to a job whose lease has just ended (its group is released apart)."""
    if isinstance(decision, Done):
        ex.run("steps_delete", (seq,))
        ex.run("job_done", (decision.expires, decision.result, seq))
    elif isinstance(decision, Failed):
        ex.run("job_fail", (decision.error, decision.expires, seq))
    else:
        ex.run("job_requeue", {"seq": seq, "at": decision.at, "uncount": int(decision.uncount),
                               "reset": decision.reset, "error": decision.error, "result": decision.result})


def end_expired(ex: Executor, queue: str, opts: QueueOptions, now: float, notify: Notify, found: Later) -> int:
    """End the leases of a queue that ran out (``found``: the read ``leases_expired``, sent ahead); each
    attempt stays counted."""
    expired = found.all()
    if expired:
        opts = groups.kept(ex, queue, opts)
    for seq, attempt in expired:
        end_lost(ex, queue, opts, seq, attempt, now, notify)
    return len(expired)


def end_lost(ex: Executor, queue: str, opts: QueueOptions, seq: int, attempt: int, now: float,
             notify: Notify) -> None:
    """End one lease whose attempt will never settle."""
    if ex.one("lease_end", (seq, attempt)) is None:
        return
    row = ex.one("job_by_seq", (seq,))
    if row is not None:
        job = JobRow(*row)
        decision = decide_lost(attempt, opts, now, job.repeat, job.at)
        apply(ex, seq, decision)
        record(ex, Settlement(seq, attempt, job.grp, decision, began=None, ended=now))
        if isinstance(decision, Failed):  # failed for good: where it belongs to a batch, it ended there
            batches.job_ended(ex, ex.row("job_batch", (seq,))[0], "failed", now, notify)
        groups.release(ex, queue, opts, [job.grp] if job.grp is not None else [])
        if outcome(decision) == "failed":  # its last attempt: failed for good, counted as settle counts it
            ex.run("count_add", (queue, int(now // 60), 0, 0, 1))


def end_owner(ex: Executor, owner: int, options: Callable[[str], QueueOptions], now: float,
              notify: Notify) -> list[str]:
    """End every lease a process that died held, at once (DUR-03); the attempts stay counted.

    Jobs without a group are requeued or failed with one statement per queue
    (``owner_lost``, with the parameters of ``_settle.lost_in_bulk``), so
    recovering 100,000 leases costs a few statements, not 100,000. The jobs
    that failed for good count in the queue's failures of this minute, and
    in their batches, folded per batch. Returns the queues whose leases it ended.
    """
    queues = [queue for (queue,) in ex.all("owner_queues", (ex.array([owner]),))]
    for queue in queues:
        opts = options(queue)
        for seq, attempt in ex.all("owner_repeating", (owner, queue)):
            end_lost(ex, queue, opts, seq, attempt, now, notify)
        grps = {g for (g,) in ex.all("owner_groups", (owner, queue))}
        states = ex.all("owner_lost", {"owner": owner, "queue": queue, **lost_in_bulk(opts, now)})
        failed = sum(state == "failed" for state, _ in states)
        if failed:
            ex.run("count_add", (queue, int(now // 60), 0, 0, failed))
            counts = batches.ends()
            for state, batch in states:
                if state == "failed":
                    batches.tally(counts, batch, "failed")
            batches.ended(ex, counts, now, notify)
        ex.run("attempts_lost_owner", {"owner": owner, "queue": queue, "now": now, "error": LOST_LEASE})
        ex.run("owner_leases_end", (owner, queue))
        for grp in grps:
            groups.recompute(ex, queue, grp, opts, now)
    return queues
