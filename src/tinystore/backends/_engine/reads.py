"""The reads of the ``Backend`` interface, each in one read (a snapshot where the backend gives one)."""

from __future__ import annotations

from typing import Optional

from ..._options import QueueOptions
from .._base import AttemptRecord, BatchRow, Change, JobDetail, JobRow, Lease, Recent, Stats, Step, Watched
from .._counts import queue_counts
from .._reads import page_of
from .executor import Executor


def options(ex: Executor, queue: str) -> Optional[QueueOptions]:
    row = ex.one("queue_options", (queue,))
    return QueueOptions.kept(row[0]) if row else None


def queue_names(ex: Executor) -> list[str]:
    return [name for name, _ in ex.all("queue_names")]


def get(ex: Executor, queue: str, id: str) -> Optional[JobRow]:
    row = ex.one("job_by_id", (queue, id))
    return JobRow(*row) if row else None


def ahead(ex: Executor, row: JobRow, now: float) -> int:
    count: int = ex.row("ahead", {"queue": row.queue, "now": now, "priority": row.priority, "at": row.at,
                                  "seq": row.seq})[0]
    return count


def ahead_many(ex: Executor, queue: str, rows: list[JobRow], now: float) -> dict[int, int]:
    last = max(rows, key=lambda r: (-r.priority, r.at, r.seq))
    return dict(ex.all("ahead_many", {"queue": queue, "now": now, "priority": last.priority, "at": last.at,
                                      "seq": last.seq,
                                      "seqs": ex.array([r.seq for r in rows])}))


def jobs(ex: Executor, queue: str, state: Optional[str], grp: Optional[str], limit: int, after: Optional[str],
         now: float) -> list[JobRow]:
    name, filters = page_of(state, grp)
    rows = ex.all(name, {"queue": queue, "after": after or "", "grp": grp, "now": now, "limit": limit, **filters})
    return [JobRow(*r) for r in rows]


def stats(ex: Executor, now: float) -> Stats:
    counts = queue_counts(ex.all("queue_counts"), ex.all("expired_counts", {"now": now}),
                          ex.all("scheduled_counts", {"now": now}), ex.all("first_due"), now)
    recent = [Recent(*row) for row in ex.all("recent_counts", (int(now // 60) - 1,))]
    kept = ex.all("queue_names")
    paused = frozenset(name for name, text in kept if QueueOptions.kept(text).paused)
    return Stats([name for name, _ in kept], counts, recent, paused)


def detail(ex: Executor, seq: int) -> JobDetail:
    steps = [Step(*row) for row in ex.all("steps_of_job", (seq,))]
    lease = ex.one("lease_of_job", (seq,))
    attempts = [AttemptRecord(*row) for row in ex.all("attempts_of_job", (seq,))]
    return JobDetail(steps, Lease(*lease) if lease is not None else None, attempts)


def watched(ex: Executor, cursors: dict[int, int]) -> Watched:
    """Each watched job as its last change made it, and its changes after its cursor (read in one snapshot)."""
    rows = ex.all("jobs_by_seqs", (ex.array(list(cursors)),))
    after = ex.columns(jobs=list(cursors), cursors=list(cursors.values()))
    changes = [Change(*c) for c in ex.all("changes_since", after)]
    return Watched({r[0]: JobRow(*r) for r in rows}, changes)


def was_cancelled(ex: Executor, seq: int) -> bool:
    return ex.one("cancelled_get", (seq,)) is not None


def step_answer(ex: Executor, seq: int, name: str) -> Optional[str]:
    row = ex.one("step_get", (seq, name))
    return row[0] if row else None


def batch(ex: Executor, id: str, now: float) -> Optional[BatchRow]:
    row = ex.one("batch_get", {"id": id, "now": now})
    return BatchRow(*row) if row else None
