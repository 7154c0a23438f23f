"""Groups: how many of a group's jobs run, which job is its head, whether it has room. Port of
sqlite/_groups; every function runs in a transaction holding the queue's lock."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from functools import lru_cache
from typing import Optional

from ..._options import QueueOptions
from ._connection import PgConn


def options_text(conn: PgConn, queue: str) -> Optional[str]:
    """The options a queue keeps (JSON text), or None: read once per writer transaction (``PgConn.options``)."""
    cache = conn.options
    if cache is not None and queue in cache:
        return cache[queue]
    row = conn.one(conn.q.queue_options, (queue,))
    text = row[0] if row else None
    if cache is not None:
        cache[queue] = text
    return text


def kept(conn: PgConn, queue: str, opts: QueueOptions) -> QueueOptions:
    """``opts`` with the limits kept in the store now: another process may have changed them (LIM-01..03)."""
    text = options_text(conn, queue)
    if text is None:
        return opts
    limits = _limits(text)
    if limits == (opts.concurrency, opts.rate, opts.group_concurrency, opts.group_rate):
        return opts
    return replace(opts, concurrency=limits[0], rate=limits[1], group_concurrency=limits[2], group_rate=limits[3])


@lru_cache(maxsize=256)
def _limits(text: str) -> tuple:
    o = QueueOptions.from_json(json.loads(text))
    return (o.concurrency, o.rate, o.group_concurrency, o.group_rate)


def has_room(running: int, wake_at: Optional[float], opts: QueueOptions) -> bool:
    full = opts.group_concurrency is not None and running >= opts.group_concurrency
    return not (full or wake_at is not None)


def window_room(conn: PgConn, queue: str, grp: str, opts: QueueOptions, now: float) -> tuple[int, Optional[float]]:
    """Starts left in a group's rate window, and when the window next slides."""
    if opts.group_rate is None:
        return 1 << 30, None
    count, period = opts.group_rate
    used, oldest = conn.one(conn.q.group_starts_in_window, (queue, grp, now - period))
    return count - used, (oldest + period if oldest is not None else None)


def update(conn: PgConn, queue: str, opts: QueueOptions, changes: dict[str, int]) -> None:
    """Groups whose running count changes by ``changes[grp]``: each one's head and room are read again."""
    limit = _most_running(opts)
    conn.executemany(conn.q.groups_update, [{"queue": queue, "grp": grp, "change": change, "limit": limit}
                                            for grp, change in changes.items()])


def release(conn: PgConn, queue: str, opts: QueueOptions, grps: list[str]) -> None:
    """Jobs of these groups stopped running (a group named once per job), their outcomes already applied."""
    if not grps:
        return
    changes = {grp: -count for grp, count in Counter(grps).items()}
    update(conn, queue, opts, changes)
    conn.execute(conn.q.groups_drop_idle, (queue, list(changes)))


def save(conn: PgConn, queue: str, grp: str, opts: QueueOptions, running: int,
         head_at: Optional[float], head_seq: Optional[int], wake_at: Optional[float]) -> None:
    if running == 0 and head_at is None:
        conn.execute(conn.q.group_drop, (queue, grp))
        return
    conn.execute(conn.q.group_set, {"queue": queue, "grp": grp, "running": running, "head_at": head_at,
                                    "head_seq": head_seq, "ready": has_room(running, wake_at, opts),
                                    "wake_at": wake_at})


def set_aside(conn: PgConn, queue: str, grp: str, opts: QueueOptions, wake_at: Optional[float]) -> None:
    """A group found full, or out of its window until ``wake_at``, when a claim read it: no longer ready."""
    running, head_at, head_seq, _, _ = conn.one(conn.q.group_get, (queue, grp))
    save(conn, queue, grp, opts, running, head_at, head_seq, wake_at)


def wake(conn: PgConn, queue: str, grp: str, opts: QueueOptions, now: float) -> None:
    """A group whose window was to slide by ``now``: it has room again, or a later time to wake."""
    row = conn.one(conn.q.group_get, (queue, grp))
    if row is None:
        return
    running, head_at, head_seq, _, _ = row
    room, slides = window_room(conn, queue, grp, opts, now)
    save(conn, queue, grp, opts, running, head_at, head_seq, slides if room <= 0 else None)


def recompute(conn: PgConn, queue: str, grp: str, opts: QueueOptions, now: float) -> None:
    """Rebuild a group's row from the jobs and leases (after a cancel or a recovery)."""
    opts = kept(conn, queue, opts)
    running = conn.one(conn.q.group_running, (queue, grp))[0]
    head = conn.one(conn.q.head_of_group, (queue, grp))
    head_at, head_seq = head if head else (None, None)
    room, slides = window_room(conn, queue, grp, opts, now)
    conn.execute(conn.q.group_ensure, (queue, grp))
    save(conn, queue, grp, opts, running, head_at, head_seq, slides if room <= 0 else None)


def refresh(conn: PgConn, queue: str, opts: QueueOptions) -> None:
    """Recompute which groups of a queue have room after its limits changed."""
    conn.execute(conn.q.groups_refresh, {"queue": queue, "limit": _most_running(opts)})


def _most_running(opts: QueueOptions) -> int:
    return opts.group_concurrency if opts.group_concurrency is not None else 1 << 62
