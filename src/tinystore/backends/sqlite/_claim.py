"""Claiming due jobs in one write transaction: limits checked, attempts counted, leases taken.

The count of live leases and of starts in the rate windows is read in the
same transaction that takes new leases, so two processes never both take the
last place (LIM-01..03).
"""

from __future__ import annotations

import heapq
import itertools
import sqlite3
from typing import Iterator, Optional

from ..._options import QueueOptions
from .._base import Claimed
from . import _groups
from ._sql import Q


def claim(conn: sqlite3.Connection, queue: str, opts: QueueOptions, owner: int, want: int,
          now: float) -> tuple[list[Claimed], Optional[float]]:
    """Claim up to ``want`` due jobs in start order; also return when the rate window slides, if it is full."""
    room, slides = _queue_room(conn, queue, opts, now)
    want = min(want, room)
    if want <= 0:
        return [], slides
    if opts.group_rate is not None:
        for (grp,) in conn.execute(Q.groups_woken, (queue, now)).fetchall():
            _groups.recompute(conn, queue, grp, opts, now)
    picked = _pick(conn, queue, opts, want, now)
    if not picked:
        return [], None
    rows = conn.execute(Q.take, (_groups.seqs_json(seq for _, seq, _ in picked),)).fetchall()
    conn.execute(Q.lease_insert, (owner, now + opts.lease, _groups.seqs_json(r[0] for r in rows)))
    claimed = sorted((Claimed(*r) for r in rows), key=lambda c: (c.at, c.seq))
    _record_starts(conn, queue, opts, claimed, now)
    return claimed, None


def _queue_room(conn: sqlite3.Connection, queue: str, opts: QueueOptions, now: float) -> tuple[int, Optional[float]]:
    room, slides = 1 << 30, None
    if opts.concurrency is not None:
        room = opts.concurrency - conn.execute(Q.lease_count, (queue,)).fetchone()[0]
    if opts.rate is not None:
        count, period = opts.rate
        used, oldest = conn.execute(Q.starts_in_window, (queue, now - period)).fetchone()
        if used >= count:
            slides = oldest + period
        room = min(room, count - used)
    return room, slides


def _pick(conn: sqlite3.Connection, queue: str, opts: QueueOptions, want: int, now: float) -> list[tuple]:
    """The first ``want`` due jobs the limits allow, merging jobs without a group and ready groups."""
    streams: list[Iterator[tuple]] = [conn.execute(Q.due_ungrouped, (queue, now, want))]
    for grp, running in conn.execute(Q.groups_ready, (queue, now, want)).fetchall():
        room = want if opts.group_concurrency is None else opts.group_concurrency - running
        window, slides = _groups.window_room(conn, queue, grp, opts, now)
        if window <= 0:  # set aside until its window slides
            row = conn.execute(Q.group_get, (queue, grp)).fetchone()
            _groups.save(conn, queue, grp, opts, running, row[1], row[2], slides)
            continue
        streams.append(conn.execute(Q.due_in_group, (queue, grp, now, min(room, window, want))))
    return list(itertools.islice(heapq.merge(*streams), want))


def _record_starts(conn: sqlite3.Connection, queue: str, opts: QueueOptions, claimed: list[Claimed], now: float) -> None:
    """Count the starts for the rate windows and move each group's head past what was taken."""
    if opts.rate is not None or opts.group_rate is not None:
        conn.executemany(Q.start_insert, [(queue, c.grp, now) for c in claimed])
        longest = max(p for _, p in filter(None, (opts.rate, opts.group_rate)))
        conn.execute(Q.starts_prune, (queue, now - longest))
    taken: dict[str, int] = {}
    for c in claimed:
        if c.grp is not None:
            taken[c.grp] = taken.get(c.grp, 0) + 1
    for grp, count in taken.items():
        running = conn.execute(Q.group_get, (queue, grp)).fetchone()[0] + count
        head = conn.execute(Q.head_of_group, (queue, grp)).fetchone()
        window, slides = _groups.window_room(conn, queue, grp, opts, now)
        _groups.save(conn, queue, grp, opts, running, *(head or (None, None)), slides if window <= 0 else None)
    minute = int(now // 60)
    conn.execute(Q.count_add, (queue, minute, len(claimed), 0, 0))


def next_wake(conn: sqlite3.Connection, queue: str, now: float) -> Optional[float]:
    """When this queue may next have a job to claim: a due time, a group's window, a lease running out."""
    times = [conn.execute(Q.next_ungrouped, (queue,)).fetchone(),
             conn.execute(Q.next_group, (queue,)).fetchone(),
             conn.execute(Q.next_group_wake, (queue,)).fetchone(),
             conn.execute(Q.next_expiry, (queue,)).fetchone()]
    found = [t[0] for t in times if t is not None and t[0] is not None]
    return min(found) if found else None
