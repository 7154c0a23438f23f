"""Claiming due jobs in one write transaction: limits checked, attempts counted, leases taken.
Port of sqlite/_claim.

The count of live leases and of starts in the rate windows is read in the
same transaction that takes new leases, so two processes never both take the
last place (LIM-01..03). On SQLite the file's one writer makes that so; here
the transaction holds the queue's advisory lock (see ``_writer``) from before
it reads the counts until it commits the leases, so the claims of one queue
run one after the other across every process, as on SQLite, and this logic is
SQLite's unchanged. The limits are the ones kept in the store, read in that
transaction too.

PostgreSQL keeps only valid UTF-8 text, so SQLite's failing of a job whose
id or payload cannot be decoded has no counterpart here.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import Counter
from typing import Iterable, Optional

from ..._options import QueueOptions
from .._base import Claimed
from . import _groups
from ._connection import PgConn


def claim(conn: PgConn, queue: str, opts: QueueOptions, owner: int, want: int,
          now: float) -> tuple[list[Claimed], Optional[float]]:
    """Claim up to ``want`` due jobs in start order; also return when the rate window slides, if it is full."""
    opts = _groups.kept(conn, queue, opts)
    now = start_time(conn, queue, opts, now)
    room, slides = _queue_room(conn, queue, opts, now)
    want = min(want, room)
    if want <= 0:
        return [], slides
    _wake_groups(conn, queue, opts, now)
    picked, read = _pick(conn, queue, opts, want, now)
    claimed = _take(conn, queue, opts, owner, now, picked)
    taken = Counter(c.grp for c in claimed if c.grp is not None)
    if read:  # every group read, taken from or not, reads its head again: a wrong one is put right
        _groups.update(conn, queue, opts, {grp: taken[grp] for grp in read})
    if claimed:
        _record_starts(conn, queue, opts, claimed, taken, now)
    return claimed, None


def start_time(conn: PgConn, queue: str, opts: QueueOptions, now: float) -> float:
    """The time a claim's starts count at (see sqlite/_claim.start_time)."""
    if opts.rate is None and opts.group_rate is None:
        return now
    conn.execute(conn.q.starts_clamp, {"now": now, "queue": queue})
    if opts.group_rate is not None:
        conn.execute(conn.q.groups_wake_clamp, {"now": now, "queue": queue, "period": opts.group_rate[1]})
    return now


def _queue_room(conn: PgConn, queue: str, opts: QueueOptions, now: float) -> tuple[int, Optional[float]]:
    room, slides = 1 << 30, None
    if opts.concurrency is not None:
        room = opts.concurrency - conn.one(conn.q.lease_count, (queue,))[0]
    if opts.rate is not None:
        count, period = opts.rate
        used, oldest = conn.one(conn.q.starts_in_window, (queue, now - period))
        if used >= count:
            slides = oldest + period
        room = min(room, count - used)
    return room, slides


def _wake_groups(conn: PgConn, queue: str, opts: QueueOptions, now: float) -> None:
    until = now if opts.group_rate is not None else math.inf
    for (grp,) in conn.all(conn.q.groups_woken, (queue, until)):
        _groups.wake(conn, queue, grp, opts, now)


def _pick(conn: PgConn, queue: str, opts: QueueOptions, want: int,
          now: float) -> tuple[list[tuple], list[str]]:
    """The first ``want`` due jobs the limits allow, merging jobs without a group and ready groups;
    and the groups with room that were read (see sqlite/_claim._pick)."""
    q = conn.q
    streams: list[Iterable[tuple]] = [conn.all(q.due_ungrouped, (queue, now, want))]
    heads: list[tuple] = []
    read: list[str] = []
    for grp, running, head_at, head_seq in conn.all(q.groups_ready, (queue, now, want)):
        room = want if opts.group_concurrency is None else opts.group_concurrency - running
        window, slides = _groups.window_room(conn, queue, grp, opts, now)
        if room <= 0 or window <= 0:
            _groups.set_aside(conn, queue, grp, opts, slides if window <= 0 else None)
            continue
        read.append(grp)
        if min(room, window) == 1:
            heads.append((head_at, head_seq, grp))
        else:
            streams.append(conn.all(q.due_in_group, (queue, grp, now, min(room, window, want))))
    streams.append(heads)
    return list(itertools.islice(heapq.merge(*streams, key=lambda r: (r[0], r[1])), want)), read


def _take(conn: PgConn, queue: str, opts: QueueOptions, owner: int, now: float,
          picked: list[tuple]) -> list[Claimed]:
    """Take the picked jobs still queued, each under a lease; in start order."""
    if not picked:
        return []
    seqs = [seq for _, seq, _ in picked]
    claimed = [Claimed(*row) for row in conn.all(conn.q.take, (seqs,))]
    if claimed:
        conn.execute(conn.q.lease_insert, (owner, now + opts.lease, [c.seq for c in claimed]))
    return sorted(claimed, key=lambda c: (c.at, c.seq))


def _record_starts(conn: PgConn, queue: str, opts: QueueOptions, claimed: list[Claimed],
                   taken: Counter, now: float) -> None:
    """Count the starts for the rate windows; a group whose window they filled is set aside until it slides."""
    q = conn.q
    if opts.rate is not None or opts.group_rate is not None:
        conn.execute(q.starts_insert, (queue, now, [c.grp for c in claimed]))
        longest = max(p for _, p in filter(None, (opts.rate, opts.group_rate)))
        conn.execute(q.starts_prune, (queue, now - longest))
    if opts.group_rate is not None:
        for grp in taken:
            window, slides = _groups.window_room(conn, queue, grp, opts, now)
            if window <= 0:
                _groups.set_aside(conn, queue, grp, opts, slides)
    conn.execute(q.count_add, (queue, int(now // 60), len(claimed), 0, 0))


def next_wake(conn: PgConn, queue: str, now: float) -> Optional[float]:
    """When a claim of this queue that left places free should look again (see sqlite/_claim.next_wake)."""
    opts = _groups.kept(conn, queue, QueueOptions())
    room, slides = _queue_room(conn, queue, opts, start_time(conn, queue, opts, now))
    expiry, ungrouped, group, group_wake = conn.one(conn.q.next_times, {"queue": queue})  # after the clamp
    times = [expiry, slides] if room <= 0 else [ungrouped, group, group_wake, expiry]
    found = [t for t in times if t is not None]
    return min(found) if found else None
