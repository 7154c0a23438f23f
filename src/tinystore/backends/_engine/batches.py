"""Batches: jobs of any queues that, once the batch is closed and every one of them has ended (done,
failed for good, or cancelled), add the batch's then job, once.

Every write that ends a job of a batch (a settlement, a lease that ran
out or whose process died, a cancel) tells ``ended`` in its own
transaction; so does a close (``close``). Each updates the batch's row, its
counts read back by the same statement: where the batch is closed and its
ended jobs reach its total, that transaction adds the then job through the
engine's add, and marks it added. The last end and the then job commit
together, or neither does; on PostgreSQL the row's lock makes a second end
of the same batch wait for the first's commit and read its counts, so two
ends written side by side never both add the then job, nor both miss it.

Joining a batch is the add's (``jobs.add``); a then job leaving takes its
batch with it (``jobs.remove``).
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any, Callable, Optional

from ..._settle import Decision, Done, Failed
from .._base import NewJob
from . import jobs
from .executor import Executor

Notify = Callable[..., None]
Ends = dict[str, list[int]]  # a batch's id: how many of its jobs ended done, failed, cancelled
OUTCOMES = ("done", "failed", "cancelled")


def create(ex: Executor, id: str, then: NewJob, queue: str, now: float) -> None:
    """A new open batch whose then job goes to ``queue`` as ``then`` says (its payload a JSON object's text)."""
    ex.run("batch_insert", (id, queue, then.payload, then.grp, then.priority, now))


def close(ex: Executor, id: str, now: float, notify: Notify) -> bool:
    """No more jobs join the batch; where every job of it ended already (or it has none), its then job is
    added now. False where the store keeps no batch of that id."""
    row = ex.one("batch_close", {"id": id, "now": now})
    if row is None:
        return False
    _then(ex, id, row, now, notify)
    return True


def ends() -> Ends:
    """An empty tally of ends, by batch."""
    return defaultdict(lambda: [0, 0, 0])


def tally(counts: Ends, batch: Optional[str], how: str) -> None:
    """One job of ``batch`` (None: of no batch) ended ``how`` (done, failed or cancelled)."""
    if batch is not None:
        counts[batch][OUTCOMES.index(how)] += 1


def ending(decision: Decision) -> Optional[str]:
    """Whether a decision ends its job, and how: done, failed (for good), or None where it runs again."""
    return "done" if isinstance(decision, Done) else "failed" if isinstance(decision, Failed) else None


def of(ex: Executor, seqs: list[int]) -> dict[int, str]:
    """The batches of these jobs, by seq, for those that belong to one."""
    return dict(ex.all("jobs_batches", (ex.array(seqs),))) if seqs else {}


def ended(ex: Executor, counts: Ends, now: float, notify: Notify) -> None:
    """Jobs of batches ended in this transaction: each batch's counts grow, and a closed batch whose every
    job has now ended gets its then job. Batches are updated in the order of their ids, so that two
    transactions ending jobs of the same batches lock their rows in the same order."""
    for batch in sorted(counts):
        done, failed, cancelled = counts[batch]
        row = ex.one("batch_ended", {"id": batch, "done": done, "failed": failed, "cancelled": cancelled})
        if row is not None:  # a batch gone with its then job: its late ends count nowhere
            _then(ex, batch, row, now, notify)


def job_ended(ex: Executor, batch: Optional[str], how: str, now: float, notify: Notify) -> None:
    """``ended`` for one job, of ``batch`` (None: of no batch, and nothing is written)."""
    if batch is not None:
        counts = ends()
        tally(counts, batch, how)
        ended(ex, counts, now, notify)


def retried(ex: Executor, seq: int) -> None:
    """A failed job runs again (``retry``): where its batch's then job was not added, its failure no
    longer counts and the batch waits for it again; where it was, the job runs on outside the batch."""
    row = ex.one("job_batch", (seq,))
    if row is None or row[0] is None:
        return
    if ex.one("batch_unfail", (row[0],)) is None:
        ex.run("job_leave_batch", (seq,))


def _then(ex: Executor, id: str, row: tuple[Any, ...], now: float, notify: Notify) -> None:
    """Add the batch's then job where it is closed, every job of it ended, and the then job not added."""
    closed_at, total, done, failed, cancelled, then_seq, queue, payload, grp, priority = row
    if closed_at is None or then_seq is not None or done + failed + cancelled < total:
        return
    body = json.loads(payload)
    body["batch"] = {"id": id, "done": done, "failed": failed, "cancelled": cancelled}
    text = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    (added,) = jobs.add(ex, queue, [NewJob(id, text, grp, now, priority=priority)], now)
    ex.run("batch_then", (added.row.seq, id))
    notify(queue, wake_source=True)  # its workers wake, in every process, the settling one's too
