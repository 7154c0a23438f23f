"""Claiming due jobs in one write transaction: limits checked, attempts counted, leases taken.

The count of live leases and of starts in the rate windows is read in the
same transaction that takes new leases, so two processes never both take the
last place (LIM-01..03). The limits are the ones kept in the store, read in
that transaction too: a change made by any process binds the next claim.

A job whose id or payload cannot be read (the file was damaged under it)
fails for good in the claim that took it, with an error that says so: one
poison row never stops its queue. A job the due indexes list as waiting that
the jobs table does not hold as waiting is damage too, of another kind: the
claim raises ``StoreCorrupt`` rather than pick it again and again for ever.
"""

from __future__ import annotations

import heapq
import itertools
import json
import logging
import math
import sqlite3
from collections import Counter
from typing import Iterable, Optional

from ..._events import fields
from ..._options import QueueOptions
from .._base import Claimed
from . import _groups
from ._damage import damaged
from ._sql import Q

log = logging.getLogger("tinystore.worker")


def claim(conn: sqlite3.Connection, queue: str, opts: QueueOptions, owner: int, want: int,
          now: float) -> tuple[list[Claimed], Optional[float]]:
    """Claim up to ``want`` due jobs in start order; also return when the rate window slides, if it is full."""
    opts = _groups.kept(conn, queue, opts)
    now = start_time(conn, queue, opts, now)
    room, slides = _queue_room(conn, queue, opts, now)
    want = min(want, room)
    if want <= 0:
        return [], slides
    _wake_groups(conn, queue, opts, now)
    picked, heads, read = _pick(conn, queue, opts, want, now)
    claimed = _take(conn, queue, opts, owner, now, picked, heads)
    taken = Counter(c.grp for c in claimed if c.grp is not None)
    if read:  # every group read, taken from or not, reads its head again: a wrong one is put right
        _groups.update(conn, queue, opts, {grp: taken[grp] for grp in read})
    if claimed:
        _record_starts(conn, queue, opts, claimed, taken, now)
    return claimed, None


def start_time(conn: sqlite3.Connection, queue: str, opts: QueueOptions, now: float) -> float:
    """The time a claim's starts count at: ``now``, where every start already counted is no later.

    A start counted later than ``now`` was counted by a clock that read
    later: this one before it was set back, another process's running ahead,
    or a caller that read the clock before it waited for the write lock. It
    counts as made now: never earlier than it was, so no window lets more
    starts through, and no window is held for longer than its period, so a
    clock set back an hour does not stop the queue for that hour. Likewise a
    group set aside until more than its window from now is woken, to count
    its window again. The starts stay in commit order, so pruning those
    older than the longest window never drops one that a window holds.
    """
    if opts.rate is None and opts.group_rate is None:
        return now
    conn.execute(Q.starts_clamp, {"now": now, "queue": queue})
    if opts.group_rate is not None:
        conn.execute(Q.groups_wake_clamp, {"now": now, "queue": queue, "window": opts.group_rate[1]})
    return now


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


def _wake_groups(conn: sqlite3.Connection, queue: str, opts: QueueOptions, now: float) -> None:
    """Groups whose rate window slid get their room back; with no group_rate kept now, every group set aside by one."""
    until = now if opts.group_rate is not None else math.inf
    for (grp,) in conn.execute(Q.groups_woken, (queue, until)).fetchall():
        _groups.wake(conn, queue, grp, opts, now)


def _pick(conn: sqlite3.Connection, queue: str, opts: QueueOptions, want: int,
          now: float) -> tuple[list[tuple], set[int], list[str]]:
    """The first ``want`` due jobs the limits allow, merging jobs without a group and ready groups;
    the seqs of those that are a group's head as its row keeps it; and the groups with room that were read.

    Only groups marked ready are read, in the order of their first due job (their head), so the
    jobs waiting behind a full group are never scanned. A group that may start one job more starts
    its head, read with it; only a group with more room reads its due jobs.
    """
    streams: list[Iterable[tuple]] = [conn.execute(Q.due_ungrouped, (queue, now, want))]
    heads: list[tuple] = []
    read: list[str] = []
    for grp, running, head_at, head_seq in conn.execute(Q.groups_ready, (queue, now, want)).fetchall():
        room = want if opts.group_concurrency is None else opts.group_concurrency - running
        window, slides = _groups.window_room(conn, queue, grp, opts, now)
        if room <= 0 or window <= 0:  # full under the limits kept now, or its window is used up: set aside
            _groups.set_aside(conn, queue, grp, opts, slides if window <= 0 else None)
            continue
        read.append(grp)
        if min(room, window) == 1:
            heads.append((head_at, head_seq, grp))
        else:
            streams.append(conn.execute(Q.due_in_group, (queue, grp, now, min(room, window, want))))
    streams.append(heads)  # in start order, as the groups were read
    return list(itertools.islice(heapq.merge(*streams), want)), {seq for _, seq, _ in heads}, read


def _take(conn: sqlite3.Connection, queue: str, opts: QueueOptions, owner: int, now: float,
          picked: list[tuple], heads: set[int]) -> list[Claimed]:
    """Take the picked jobs still queued, each under a lease; in start order.

    A taken job that cannot be read fails for good here, its attempt counted, and takes no lease.
    """
    if not picked:
        return []
    rows = conn.execute(Q.take, (_groups.seqs_json(seq for _, seq, _ in picked),)).fetchall()
    if len(rows) < len(picked):
        _refuse_what_the_indexes_hide(conn, queue, picked, heads, {row[0] for row in rows})
    claimed, poisoned = [], 0
    for seq, raw_id, raw_payload, grp, at, attempt, valid, repeat in rows:
        try:
            id, payload = raw_id.decode("utf-8"), raw_payload.decode("utf-8")
            if not valid:
                json.loads(payload)  # SQLite's parser is a quick first look; Python's, the worker's, decides
        except (ValueError, RecursionError, AttributeError) as exc:  # UnicodeDecodeError is a ValueError
            _fail_unreadable(conn, queue, opts, seq, raw_id, attempt, exc, now)
            poisoned += 1
            continue
        claimed.append(Claimed(seq, id, payload, grp, at, attempt, repeat))
    if claimed:
        conn.execute(Q.lease_insert, (owner, now + opts.lease, _groups.seqs_json(c.seq for c in claimed)))
    if poisoned:
        conn.execute(Q.count_add, (queue, int(now // 60), 0, 0, poisoned))
    return sorted(claimed, key=lambda c: (c.at, c.seq))


def _refuse_what_the_indexes_hide(conn: sqlite3.Connection, queue: str, picked: list[tuple], heads: set[int],
                                  taken: set[int]) -> None:
    """Picked jobs that ``take`` did not find queued: where an index still lists one, StoreCorrupt.

    The claim holds the write lock from its pick to its take, so a job read from a due index
    (``tinystore_jobs_due``, ``tinystore_jobs_group_due``) is queued in the table unless the file is
    damaged: the index lists a row the table no longer yields, and every claim would pick it again.
    A group's head is read from its row in ``tinystore_groups``; one that is not queued is only out of
    date (the claim reads the group's head again), unless the group's due index still gives it.
    """
    hidden = [seq for at, seq, grp in picked if seq not in taken and
              (seq not in heads or conn.execute(Q.head_of_group, (queue, grp)).fetchone() == (at, seq))]
    if hidden:
        path = conn.execute("PRAGMA database_list").fetchone()[2]
        raise damaged(path, f"the due jobs' index of queue {queue!r} lists jobs as waiting that its jobs table "
                            f"does not hold as waiting (seq {', '.join(map(str, hidden))})", queue)


def _fail_unreadable(conn: sqlite3.Connection, queue: str, opts: QueueOptions, seq: int, raw_id: object,
                     attempt: int, exc: BaseException, now: float) -> None:
    """A job whose id or payload cannot be read: it fails for good now, kept with an error that says why."""
    what = "id" if not isinstance(raw_id, bytes) or not _decodes(raw_id) else "payload"
    if isinstance(exc, UnicodeDecodeError):
        why = f"its bytes in the file are not UTF-8 text ({exc.reason} at byte {exc.start})"
    elif isinstance(exc, AttributeError):
        why = "it is not text in the file"
    else:
        why = f"it is not JSON ({exc})"
    path = conn.execute("PRAGMA database_list").fetchone()[2]
    error = (f"its {what} could not be read: {why}; the store file may be damaged: run "
             f"`tinystore check {path}`")
    conn.execute(Q.job_fail, (error, now + opts.keep, seq))
    id = raw_id.decode("utf-8", "replace") if isinstance(raw_id, bytes) else repr(raw_id)
    log.error("%s/%s attempt %d failed for good: %s", queue, id, attempt, error,
              extra=fields(queue, id, attempt, "failed"))


def _decodes(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _record_starts(conn: sqlite3.Connection, queue: str, opts: QueueOptions, claimed: list[Claimed],
                   taken: Counter[str], now: float) -> None:
    """Count the starts for the rate windows; a group whose window they filled is set aside until it slides."""
    if opts.rate is not None or opts.group_rate is not None:
        conn.executemany(Q.start_insert, [(queue, c.grp, now) for c in claimed])
        longest = max(p for _, p in filter(None, (opts.rate, opts.group_rate)))
        conn.execute(Q.starts_prune, (queue, now - longest))
    if opts.group_rate is not None:
        for grp in taken:
            window, slides = _groups.window_room(conn, queue, grp, opts, now)
            if window <= 0:
                _groups.set_aside(conn, queue, grp, opts, slides)
    minute = int(now // 60)
    conn.execute(Q.count_add, (queue, minute, len(claimed), 0, 0))


def next_wake(conn: sqlite3.Connection, queue: str, now: float) -> Optional[float]:
    """When a claim of this queue that left places free should look again.

    With no room in the queue, only a lease's end (a commit, which wakes the
    workers anyway), a lease running out or the rate window sliding can make
    some: looking again before that would be a busy loop of transactions.
    Otherwise: the next due time, a group's window sliding, a lease running out.
    """
    opts = _groups.kept(conn, queue, QueueOptions())
    expiry = conn.execute(Q.next_expiry, (queue,)).fetchone()[0]
    room, slides = _queue_room(conn, queue, opts, start_time(conn, queue, opts, now))
    if room <= 0:
        times = [expiry, slides]
    else:
        times = [conn.execute(Q.next_ungrouped, (queue,)).fetchone(),
                 conn.execute(Q.next_group, (queue,)).fetchone(),
                 conn.execute(Q.next_group_wake, (queue,)).fetchone(),
                 (expiry,)]
        times = [t[0] for t in times if t is not None]
    found = [t for t in times if t is not None]
    return min(found) if found else None
