"""Job rows coming and going: adds (seqs handed out once, ids kept once) and removals."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace

from .._base import Added, JobRow, NewJob
from ._sql import Q


def add(conn: sqlite3.Connection, queue: str, jobs: list[NewJob], now: float,
        locked: bool = True) -> list[Added]:
    """Insert jobs; an id that names a kept job adds nothing and returns that job (JOB-10).

    ``locked``: the transaction already holds the write lock (the writer's
    own): no other can hand out seqs meanwhile, so the next ones are read and
    no counter is written. An application's transaction may not hold it yet
    (a read would not take it): it reserves them with a write.
    """
    if locked:
        first = conn.execute(Q.seq_next).fetchone()[0]
    else:
        first = conn.execute(Q.seqs_reserve, (len(jobs),)).fetchone()[0] - len(jobs) + 1
    rows = [(seq, queue, job.id, job.payload, job.grp, job.at, job.repeat) for seq, job in enumerate(jobs, first)]
    # One statement for the batch: a row whose id is taken is skipped, and looked at below.
    inserted = conn.executemany(Q.job_insert, rows).rowcount
    if inserted == len(rows):
        added = [Added(_new_row(row), True) for row in rows]
    else:
        present = {r[0] for r in conn.execute(Q.jobs_by_seqs, (json.dumps([row[0] for row in rows]),))}
        added = [Added(_new_row(row), True) if row[0] in present else _add_taken(conn, row, now) for row in rows]
    grouped = [{"queue": queue, "grp": a.row.grp, "at": a.row.at, "seq": a.row.seq} for a in added
               if a.added and a.row.grp]
    if grouped:
        conn.executemany(Q.group_add, grouped)
    return added


def declare(conn: sqlite3.Connection, queue: str, job: NewJob, now: float) -> Added:
    """A schedule's job as its newest declaration says (see ``Backend.declare``). The writer holds the
    write lock, so declarations of several processes are applied one after another."""
    row = conn.execute(Q.job_by_id, (queue, job.id)).fetchone()
    existing = JobRow(*row) if row is not None else None
    if existing is None or existing.state in ("done", "failed"):
        if existing is not None:
            remove(conn, [existing.seq])
        return add(conn, queue, [job], now)[0]
    payload = existing.payload.decode("utf-8", "replace") if isinstance(existing.payload, bytes) else existing.payload
    if (payload, existing.repeat) == (job.payload, job.repeat):
        return Added(existing, False)
    at = job.at if existing.state == "queued" and existing.repeat != job.repeat else existing.at
    conn.execute(Q.job_declare, {"seq": existing.seq, "payload": job.payload, "repeat": job.repeat, "at": at})
    return Added(replace(existing, payload=job.payload, repeat=job.repeat, at=at), False)


def remove(conn: sqlite3.Connection, seqs: list[int]) -> None:
    """Jobs leave the queue with their steps; the floor keeps their seqs from being handed out again."""
    if not seqs:
        return
    listed = json.dumps(seqs)
    conn.execute(Q.steps_delete_many, (listed,))
    conn.execute(Q.jobs_delete_many, (listed,))
    conn.execute(Q.sequence_floor, {"seq": max(seqs)})


def _new_row(row: tuple) -> JobRow:
    seq, queue, id, payload, grp, at, repeat = row
    return JobRow(seq, queue, id, payload, grp, "queued", at, 0, None, None, None, None, repeat)


def _add_taken(conn: sqlite3.Connection, row: tuple, now: float) -> Added:
    """A job whose id a kept job has: that job, or, where it is past keep or dedupe, the new one (JOB-11)."""
    _, queue, id, *_ = row
    existing = JobRow(*conn.execute(Q.job_by_id, (queue, id)).fetchone())
    if existing.expires is None or existing.expires > now:
        return Added(existing, False)
    remove(conn, [existing.seq])
    conn.execute(Q.job_insert, row)
    return Added(_new_row(row), True)
