"""The writes of the ``Backend`` interface, each one transaction of the backend's writer: a claim cycle,
cancels, retries, renewals, progress, steps, options and pauses, and run.transaction's check of its lease.

``notify(queue, job)`` is the writer's: the commit tells every process that
the queue has work (or that the job was cancelled).
"""

from __future__ import annotations

import json
from contextlib import nullcontext
from dataclasses import replace
from typing import Any, Callable, ContextManager, Optional

from ..._errors import Conflict
from ..._options import QueueOptions
from ..._settle import gives_work
from ..._transaction import Transaction
from .._base import Cycle, JobRow, Settlement
from . import batches, claim, groups, jobs, leases
from .executor import Executor

Notify = Callable[..., None]


def cycle(ex: Executor, queue: str, owner: int, settlements: list[Settlement], want: int, now: float,
          notify: Notify, seen: Optional[str] = None) -> Cycle:
    """Settle, end the leases that ran out, claim: one transaction of one queue. ``seen``: see ``take_early``."""
    early = take_early(ex, queue, owner, settlements, want, now, seen)
    opts, stale = settle_expired(ex, queue, settlements, now, notify, early)
    return claim_due(ex, queue, opts, owner, want, now, stale, early)


def take_early(ex: Executor, queue: str, owner: int, settlements: list[Settlement], want: int, now: float,
               seen: Optional[str]) -> Optional[claim.Take]:
    """A cycle with nothing to settle, of a queue whose options this process last read as ``seen`` (text),
    keeping no limit and no pause: a driver that takes at once sends its take first, with the cycle's
    other reads (one round trip, then COMMIT). It takes nothing where the options kept changed since."""
    if seen is None or settlements or want <= 0 or not ex.takes_at_once:
        return None
    text = None if seen == DEFAULTS else seen
    lease = (QueueOptions.kept(text) if text is not None else QueueOptions()).lease
    return claim.Take(ex, queue, owner, want, now, lease, text, early=True)


DEFAULTS = ""  # ``seen`` for a queue that keeps no options: the defaults, which have no limit


def unlimited_options(ex: Executor, queue: str, opts: QueueOptions) -> Optional[str]:
    """What a later cycle passes as ``seen``: the options kept (text, or ``DEFAULTS``), where they keep no
    limit and no pause; else None."""
    if claim.limited(opts) or opts.paused:
        return None
    text = ex.kept_options(queue)
    return DEFAULTS if text is None else text


def settle_expired(ex: Executor, queue: str, settlements: list[Settlement], now: float,
                   notify: Notify, early: Optional[claim.Take] = None) -> tuple[QueueOptions, list[Settlement]]:
    """A cycle's first half: settle, end the leases that ran out; the queue's options as kept, and the
    stale settlements. A backend whose claims of a limited queue take a lock runs the claim apart."""
    # Its reads sent together (one round trip where a read crosses a network): the options as kept
    # (another process may have changed them), the leases settled, the leases that ran out.
    ex.options_ahead(queue)
    ends = leases.end_settled(ex, settlements) if settlements else None
    found = ex.ahead("leases_expired", (queue, now))
    opts = groups.options(ex, queue)
    stale = leases.settle(ex, queue, opts, settlements, ends, now, notify) if ends is not None else []
    expired = leases.end_expired(ex, queue, opts, now, notify, found)
    if early is not None and expired:
        early.expired = True
    if expired or gives_work(settlements, stale, opts):
        notify(queue)  # jobs requeued, places freed: other processes may claim
    return opts, stale


def claim_due(ex: Executor, queue: str, opts: QueueOptions, owner: int, want: int, now: float,
              stale: list[Settlement], early: Optional[claim.Take] = None) -> Cycle:
    """A cycle's second half: claim up to ``want`` due jobs, and when to look again."""
    claimed, slides, sent = claim.claim(ex, queue, opts, owner, want, now, early) if want > 0 else ([], None, None)
    wake = None
    if len(claimed) < want:
        times = [w for w in (slides, claim.next_wake(ex, queue, now, sent)) if w is not None]
        wake = min(times) if times else None
    return Cycle(claimed, stale, wake, opts)


def save_options(ex: Executor, queue: str, options: QueueOptions) -> None:
    """Keep a queue's options; its pause stays as kept (only ``set_paused`` changes it)."""
    before = groups.options(ex, queue)
    options = replace(options, paused=before.paused)
    ex.run("queue_save", (queue, json.dumps(options.to_json())))
    ex.forget_options(queue)
    if (before.group_concurrency, before.group_rate) != (options.group_concurrency, options.group_rate):
        groups.refresh(ex, queue, options)


def set_paused(ex: Executor, queue: str, paused: bool) -> Optional[bool]:
    """Pause or resume a queue: kept with its options, read by every claim. Whether that changed it (a
    paused queue is not paused again); None where the store keeps no queue of that name. Its commit's
    notice (``work=``) wakes every process's runners of the queue."""
    if ex.kept_options(queue) is None:
        return None
    kept = groups.options(ex, queue)
    if kept.paused == paused:
        return False
    options = replace(kept, paused=paused)
    ex.run("queue_save", (queue, json.dumps(options.to_json())))
    ex.forget_options(queue)
    return True


def cancel(ex: Executor, queue: str, id: str, now: float, notify: Notify) -> Optional[JobRow]:
    row = ex.one("job_by_id", (queue, id))
    if row is None or row[5] not in ("queued", "running"):
        return None
    # Read again under the row's lock (PostgreSQL; SQLite's one writer holds the file's): a settlement
    # that committed since the read above is seen, and its job is not also counted as cancelled.
    locked = ex.all("jobs_lock", (ex.array([row[0]]),))
    if not locked or locked[0][5] not in ("queued", "running"):
        return None
    job = JobRow(*locked[0])
    (batch,) = ex.row("job_batch", (job.seq,))
    ex.run("lease_drop", (job.seq,))
    jobs.remove(ex, [job.seq])
    ex.run("cancelled_mark", (job.seq, now))
    batches.job_ended(ex, batch, "cancelled", now, notify)
    if job.grp is not None:
        groups.recompute(ex, queue, job.grp, groups.options(ex, queue), now)
    notify(queue, job.seq)  # its handler stops, wherever it runs; its place is free
    return job


def retry_failed(ex: Executor, queue: str, id: str, now: float) -> bool:
    row = ex.one("job_by_id", (queue, id))
    if row is None or row[5] != "failed" or (row[10] is not None and row[10] <= now):
        return False
    ex.run("job_retry_failed", (now, row[0]))
    batches.retried(ex, row[0])
    if row[4] is not None:
        ex.lock_groups(queue, [row[4]])
        ex.run("group_add", {"queue": queue, "grp": row[4], "at": now, "seq": row[0], "priority": row[13]})
    return True


def renew(ex: Executor, queue: str, owner: int, expires: float, seqs: list[int]) -> set[tuple[int, int]]:
    """Renew a process's leases of a queue: the (job, attempt) of those among ``seqs`` it still holds."""
    wanted = set(seqs)
    return {(seq, attempt) for seq, attempt in ex.all("lease_renew", (expires, owner, queue)) if seq in wanted}


def progress(ex: Executor, seq: int, attempt: int, value: str) -> bool:
    if not ex.hold_lease(seq, attempt):
        return False
    ex.run("job_progress", (value, seq))
    return True


def keep_step(ex: Executor, seq: int, attempt: int, name: str, answer: str) -> bool:
    if not ex.hold_lease(seq, attempt):
        return False
    ex.run("step_keep", (seq, name, attempt, answer))
    return True


def transact(ex: Executor, tx: Transaction, lease: tuple[int, int], name: str, fn: Callable[[Transaction], Any],
             encode: Callable[[Any], str], own: Callable[[], ContextManager[Any]] = nullcontext) -> tuple[bool, str]:
    """run.transaction (JOB-14) inside the application's transaction ``tx``: the step's kept answer, or
    ``fn``'s, kept with the application's rows, while the attempt's lease is held.

    ``own``: around tinystore's own statements (not ``fn``, whose errors are the application's), where
    the driver's errors are tinystore's.
    """
    seq, attempt = lease
    with own():
        held = ex.own_lease(seq, attempt)
        kept = ex.one("step_get", (seq, name)) if held else None
    if not held:
        raise Conflict("the attempt no longer holds its lease; the transaction was rolled back")
    if kept is not None:
        return True, kept[0]
    answer = encode(fn(tx))
    with own():
        ex.run("step_insert", (seq, name, attempt, answer))  # a unique key: never kept twice
    return False, answer


def watch_end(ex: Executor, owner: int, seq: int) -> None:
    ex.run("watched_delete", (seq, owner))
    ex.run("changes_prune_job", {"job": seq})


def leave(ex: Executor, owner: int) -> None:
    """A process's registration ends, with what it watched."""
    ex.run("watched_delete_owner", (owner,))
    ex.run("process_delete", (owner,))


def prune(ex: Executor, now: float) -> None:
    """Maintenance's pruning: cancellation marks, changes nobody watches, per-minute counts past a day."""
    ex.run("cancelled_prune", (now - 3600,))
    ex.run("changes_prune")
    ex.run("counts_prune", (int(now // 60) - 1440,))
