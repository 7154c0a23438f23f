"""Job rows coming and going: adds (ids kept once) and removals. Port of sqlite/_jobs.

Seqs come from the jobs table's identity column, drawn by the insert while
the transaction holds the queue's advisory lock (see ``_writer``): within a
queue, seq order is add order and commit order (JOB-01). A sequence never
hands a value out twice, so SQLite's floor of seqs has no counterpart.
"""

from __future__ import annotations

from dataclasses import replace

from .._base import Added, JobRow, NewJob
from ._connection import PgConn


def add(conn: PgConn, queue: str, jobs: list[NewJob], now: float) -> list[Added]:
    """Insert jobs; an id that names a kept job adds nothing and returns that job (JOB-10).
    The caller holds the queue's lock."""
    q = conn.q
    written = dict((id, seq) for seq, id in conn.all(q.jobs_insert, {
        "queue": queue, "ids": [j.id for j in jobs], "payloads": [j.payload for j in jobs],
        "grps": [j.grp for j in jobs], "ats": [j.at for j in jobs], "repeats": [j.repeat for j in jobs]}))
    added: list[Added] = []
    first: set[str] = set()
    for job in jobs:
        seq = written.get(job.id)
        if seq is not None and job.id not in first:
            first.add(job.id)
            added.append(Added(_new_row(seq, queue, job), True))
        else:  # its id was taken: by a kept job, or by this batch's first job of that id
            first.add(job.id)
            added.append(_add_taken(conn, queue, job, now))
    grouped = [{"queue": queue, "grp": a.row.grp, "at": a.row.at, "seq": a.row.seq} for a in added
               if a.added and a.row.grp is not None]
    if grouped:
        conn.executemany(q.group_add, grouped)
    return added


def declare(conn: PgConn, queue: str, job: NewJob, now: float) -> Added:
    """A schedule's job as its newest declaration says (see ``Backend.declare``). The caller holds the
    queue's lock, so declarations of several processes are applied one after another."""
    row = conn.one(conn.q.job_by_id, (queue, job.id))
    existing = JobRow(*row) if row is not None else None
    if existing is None or existing.state in ("done", "failed"):
        if existing is not None:
            remove(conn, [existing.seq])
        return add(conn, queue, [job], now)[0]
    if (existing.payload, existing.repeat) == (job.payload, job.repeat):
        return Added(existing, False)
    at = job.at if existing.state == "queued" and existing.repeat != job.repeat else existing.at
    conn.execute(conn.q.job_declare, {"seq": existing.seq, "payload": job.payload, "repeat": job.repeat, "at": at})
    return Added(replace(existing, payload=job.payload, repeat=job.repeat, at=at), False)


def remove(conn: PgConn, seqs: list[int]) -> None:
    """Jobs leave the queue with their steps."""
    if not seqs:
        return
    conn.execute(conn.q.steps_delete_many, (seqs,))
    conn.execute(conn.q.jobs_delete_many, (seqs,))


def _new_row(seq: int, queue: str, job: NewJob) -> JobRow:
    return JobRow(seq, queue, job.id, job.payload, job.grp, "queued", job.at, 0, None, None, None, None, job.repeat)


def _add_taken(conn: PgConn, queue: str, job: NewJob, now: float) -> Added:
    """A job whose id a kept job has: that job, or, where it is past keep or dedupe, the new one (JOB-11)."""
    existing = JobRow(*conn.one(conn.q.job_by_id, (queue, job.id)))
    if existing.expires is None or existing.expires > now:
        return Added(existing, False)
    remove(conn, [existing.seq])
    seq = conn.one(conn.q.job_insert, (queue, job.id, job.payload, job.grp, job.at, job.repeat))[0]
    return Added(_new_row(seq, queue, job), True)
