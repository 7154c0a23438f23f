"""Job rows coming and going: adds (ids kept once, JOB-10), declarations of schedules, removals."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional

from ..._errors import InvalidArgument
from .._base import Added, JobRow, NewJob
from .executor import Executor


def add(ex: Executor, queue: str, jobs: list[NewJob], now: float) -> list[Added]:
    """Insert jobs in order; an id that names a kept job adds nothing and returns that job (JOB-10).

    Jobs that join a batch join it only where it is kept and open (else ``InvalidArgument``, before
    anything is written); a job whose id names a kept job adds nothing, and joins nothing.
    """
    batches = sorted({job.batch for job in jobs if job.batch is not None})
    for batch in batches:
        _check_open(ex, queue, jobs, batch)
    added = []
    for job, (seq, written) in zip(jobs, ex.insert_jobs(queue, jobs)):
        if written:
            assert seq is not None  # a job written has its seq
            added.append(Added(_new_row(seq, queue, job), True))
        else:
            added.append(_add_taken(ex, queue, job, seq, now))
    grouped: list[dict[str, Any]] = [
        {"queue": queue, "grp": a.row.grp, "at": a.row.at, "seq": a.row.seq, "priority": a.row.priority}
        for a in added if a.added and a.row.grp is not None]
    if grouped:
        ex.lock_groups(queue, [g["grp"] for g in grouped])
        ex.each("group_add", grouped)
    for batch in batches:
        joined = sum(a.added for job, a in zip(jobs, added) if job.batch == batch)
        if joined:
            ex.run("batch_grow", (joined, batch))
    return added


def _check_open(ex: Executor, queue: str, jobs: list[NewJob], batch: str) -> None:
    """Refuse jobs joining a batch the store does not keep, or one closed (its row locked meanwhile)."""
    row = ex.one("batch_join", (batch,))
    if row is not None and row[0] is None:
        return
    why = "is closed: no job may join it" if row is not None else "is not kept by the store (or left with its then job)"
    one = jobs[0] if len(jobs) == 1 else None
    raise InvalidArgument(f"batch {batch!r} {why}; nothing was added", queue=queue,
                          job_id=one.id if one and one.named else None, new_job=bool(one and not one.named))


def declare(ex: Executor, queue: str, job: NewJob, now: float) -> Added:
    """A schedule's job as its newest declaration says (see ``Backend.declare``). No other write of the
    queue runs beside it, so declarations of several processes are applied one after another."""
    row = ex.one("job_by_id", (queue, job.id))
    existing = JobRow(*row) if row is not None else None
    if existing is None or existing.state in ("done", "failed"):
        if existing is not None:
            remove(ex, [existing.seq])
        return add(ex, queue, [job], now)[0]
    payload = existing.payload.decode("utf-8", "replace") if isinstance(existing.payload, bytes) else existing.payload
    if (payload, existing.repeat) == (job.payload, job.repeat):
        return Added(existing, False)
    at = job.at if existing.state == "queued" and existing.repeat != job.repeat else existing.at
    ex.run("job_declare", {"seq": existing.seq, "payload": job.payload, "repeat": job.repeat, "at": at})
    return Added(replace(existing, payload=job.payload, repeat=job.repeat, at=at), False)


def remove(ex: Executor, seqs: list[int]) -> None:
    """Jobs leave the queue with their steps and the attempts kept."""
    if not seqs:
        return
    listed = ex.array(seqs)
    ex.run("steps_delete_many", (listed,))
    ex.run("attempts_delete_many", (listed,))
    ex.run("jobs_delete_many", (listed,))
    ex.run("batches_delete_then", (listed,))  # a batch is kept as long as its then job
    ex.jobs_left(seqs)


def _new_row(seq: int, queue: str, job: NewJob) -> JobRow:
    return JobRow(seq, queue, job.id, job.payload, job.grp, "queued", job.at, 0, None, None, None, None, job.repeat,
                  job.priority)


def _add_taken(ex: Executor, queue: str, job: NewJob, seq: Optional[int], now: float) -> Added:
    """A job whose id a kept job has: that job, or, where it is past keep or dedupe, the new one (JOB-11)."""
    existing = JobRow(*ex.row("job_by_id", (queue, job.id)))
    if existing.expires is None or existing.expires > now:
        return Added(existing, False)
    remove(ex, [existing.seq])
    return Added(_new_row(ex.insert_job(queue, job, seq), queue, job), True)
