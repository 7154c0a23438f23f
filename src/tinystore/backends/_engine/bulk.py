"""Acting on many jobs (``cancel_many``, ``retry_many``): a walk of the queue, one bounded chunk per transaction.

The core walks a queue's jobs chunk by chunk, each chunk one call here in
one transaction of the backend's writer, so that a million jobs never hold
the write lock for one long commit and the application's adds commit
between chunks. A chunk reads at most ``CHUNK`` rows in id order after the
cursor (the id the chunk before ended at), by the index of what the filter
lists (``_reads.page_of``: the failed jobs', the leases', a group's, else
the queue's ids), or looks up its share of the ids given. Those rows are
read again under the transaction's lock (``jobs_lock``: PostgreSQL locks
the rows, so that no claim takes one meanwhile) and each one that still
matches is acted on as ``work.cancel`` or ``work.retry_failed`` acts on
one job: leases dropped, steps and rows removed, cancellations marked and
counted in their batches, groups recomputed once per chunk; failed jobs
queued again, their batches told, their groups' heads told. The kept counts follow from the triggers on the jobs table.

A job is acted on at most once: the cursor only moves forwards, and only
jobs already in the store when the walk began (a seq up to ``Pick.last``)
are acted on, so jobs added meanwhile are neither chased nor cancelled.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any, Optional

from .._base import Chunk, JobRow, Pick
from .._reads import page_of
from . import batches, groups, jobs
from .executor import Executor
from .work import Notify

CHUNK = 250  # rows read per transaction: a chunk of cancels commits in 10-20 ms on a small machine (W12)


def last_seq(ex: Executor) -> int:
    last: int = ex.row("jobs_last_seq")[0]
    return last


def cancel(ex: Executor, queue: str, pick: Pick, after: str, now: float, notify: Notify) -> Chunk:
    rows, cursor = _chunk(ex, queue, pick, after, now)
    taken = [r for r in rows if r.state in ("queued", "running")]
    if not taken:
        return Chunk(0, cursor)
    seqs = [r.seq for r in taken]
    members = batches.of(ex, seqs)  # read before the rows leave
    ex.run("leases_drop_many", (ex.array(seqs),))
    jobs.remove(ex, seqs)
    ex.run("cancelled_mark_many", {"seqs": ex.array(seqs), "at": now})
    if members:  # each batch counts its jobs cancelled here, and gets its then job where they were its last
        counts = batches.ends()
        for batch in members.values():
            batches.tally(counts, batch, "cancelled")
        batches.ended(ex, counts, now, notify)
    grps = sorted({r.grp for r in taken if r.grp is not None})
    if grps:
        opts = groups.options(ex, queue)
        for grp in grps:
            groups.recompute(ex, queue, grp, opts, now)
    for r in taken:
        if r.state == "running":
            notify(queue, r.seq)  # its handler stops, wherever it runs; its place is free
    return Chunk(len(taken), cursor)


def retry(ex: Executor, queue: str, pick: Pick, after: str, now: float) -> Chunk:
    rows, cursor = _chunk(ex, queue, pick, after, now)
    failed = [r for r in rows if r.state == "failed"]
    if not failed:
        return Chunk(0, cursor)
    seqs = [r.seq for r in failed]
    ex.run("jobs_retry_failed_many", {"seqs": ex.array(seqs), "at": now})
    for seq in batches.of(ex, seqs):  # as retry does: each waited for again by its batch, or on its own
        batches.retried(ex, seq)
    grouped: list[dict[str, Any]] = [{"queue": queue, "grp": r.grp, "at": now, "seq": r.seq, "priority": r.priority}
                                     for r in failed if r.grp is not None]
    if grouped:
        ex.lock_groups(queue, sorted({g["grp"] for g in grouped}))
        ex.each("group_add", grouped)
    return Chunk(len(failed), cursor)


def _chunk(ex: Executor, queue: str, pick: Pick, after: str, now: float) -> tuple[list[JobRow], Optional[str]]:
    """The jobs of the chunk after ``after`` that ``pick`` names, as they are under this transaction's
    lock, and the id the next chunk begins after (None: this was the last)."""
    if pick.ids is not None:
        start = bisect_right(pick.ids, after)
        ids = pick.ids[start:start + CHUNK]
        found = (ex.one("job_by_id", (queue, id)) for id in ids)
        seen = [JobRow(*row) for row in found if row is not None]
        cursor = ids[-1] if start + CHUNK < len(pick.ids) else None
    else:
        name, _ = page_of(pick.state, pick.grp)
        # The walk reads every row of the index in turn, whatever its state: a chunk reads CHUNK rows at
        # most, however rare the jobs asked for are; each is judged below.
        rows = ex.all(name, {"queue": queue, "after": after, "grp": pick.grp, "now": now, "limit": CHUNK,
                             "stored": None, "due": None})
        seen = [JobRow(*row) for row in rows]
        cursor = seen[-1].id if len(seen) == CHUNK else None
    seqs = [r.seq for r in seen if r.seq <= pick.last and _matches(r, pick, now)]
    if not seqs:
        return [], cursor
    locked = [JobRow(*row) for row in ex.all("jobs_lock", (ex.array(seqs),))]
    return [r for r in locked if _matches(r, pick, now)], cursor


def _matches(row: JobRow, pick: Pick, now: float) -> bool:
    """Whether ``queue.jobs`` with the pick's filters lists this job now."""
    if row.expires is not None and row.expires <= now:
        return False  # gone, whether or not maintenance removed it yet (JOB-11)
    if pick.grp is not None and row.grp != pick.grp:
        return False
    if pick.state == "scheduled":
        return row.state == "queued" and row.at > now
    if pick.state == "waiting":
        return row.state == "queued" and row.at <= now
    return pick.state is None or row.state == pick.state
