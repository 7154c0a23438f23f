"""Groups: how many of a group's jobs run, which job is its head, whether it has room.

A group with room and a due head is "ready" and indexed by its head, so a
claim reads ready groups in start order and never scans the jobs waiting
behind a full one (LIM-02). Every function runs in the transaction that
claims, settles or adds, and locks the groups it reads or writes first
(``Executor.lock_groups``), so that a group's row is changed by one
transaction at a time even where writers of a queue run side by side; the
claims of a queue with group limits run one at a time (the backend's writer
sees to it).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from functools import lru_cache
from typing import Any, Optional

from ..._options import QueueOptions
from .executor import Executor


def kept(ex: Executor, queue: str, opts: QueueOptions) -> QueueOptions:
    """``opts`` with the limits and the pause kept in the store now: another process may have changed
    them (LIM-01..03)."""
    text = ex.kept_options(queue)
    if text is None:
        return opts
    limits = _limits(text)
    if limits == (opts.concurrency, opts.rate, opts.group_concurrency, opts.group_rate, opts.paused):
        return opts
    return replace(opts, concurrency=limits[0], rate=limits[1], group_concurrency=limits[2], group_rate=limits[3],
                   paused=limits[4])


def options(ex: Executor, queue: str) -> QueueOptions:
    """A queue's options as kept, or the defaults where it keeps none."""
    text = ex.kept_options(queue)
    return QueueOptions.kept(text) if text is not None else QueueOptions()


@lru_cache(maxsize=256)
def _limits(text: str) -> tuple[Any, ...]:
    o = QueueOptions.from_json(json.loads(text))
    return (o.concurrency, o.rate, o.group_concurrency, o.group_rate, o.paused)


def has_room(running: int, wake_at: Optional[float], opts: QueueOptions) -> bool:
    full = opts.group_concurrency is not None and running >= opts.group_concurrency
    return not (full or wake_at is not None)


def window_room(ex: Executor, queue: str, grp: str, opts: QueueOptions, now: float) -> tuple[int, Optional[float]]:
    """Starts left in a group's rate window, and when the window next slides."""
    if opts.group_rate is None:
        return 1 << 30, None
    count, period = opts.group_rate
    used, oldest = ex.row("group_starts_in_window", (queue, grp, now - period))
    return count - used, (oldest + period if oldest is not None else None)


def update(ex: Executor, queue: str, opts: QueueOptions, changes: dict[str, int]) -> None:
    """Groups whose running count changes by ``changes[grp]``: each one's head and room are read again."""
    ex.lock_groups(queue, list(changes))
    ex.update_groups(queue, changes, most_running(opts))


def release(ex: Executor, queue: str, opts: QueueOptions, grps: list[str]) -> None:
    """Jobs of these groups stopped running (a group named once per job), their outcomes already applied.

    Each group's head is read again (a requeued job may be it); one left with
    nothing queued and nothing running is dropped.
    """
    if not grps:
        return
    changes = {grp: -count for grp, count in Counter(grps).items()}
    update(ex, queue, opts, changes)
    ex.run("groups_drop_idle", (queue, ex.array(list(changes))))


def save(ex: Executor, queue: str, grp: str, opts: QueueOptions, running: int,
         head_at: Optional[float], head_seq: Optional[int], wake_at: Optional[float]) -> None:
    if running == 0 and head_at is None:
        ex.run("group_drop", (queue, grp))
        return
    ex.run("group_set", {"queue": queue, "grp": grp, "running": running, "head_at": head_at,
                         "head_seq": head_seq, "ready": has_room(running, wake_at, opts), "wake_at": wake_at})


def set_aside(ex: Executor, queue: str, grp: str, opts: QueueOptions, wake_at: Optional[float]) -> None:
    """A group found full, or out of its window until ``wake_at``, when a claim read it: no longer ready."""
    ex.lock_groups(queue, [grp])
    running, head_at, head_seq, _, _ = ex.row("group_get", (queue, grp))
    save(ex, queue, grp, opts, running, head_at, head_seq, wake_at)


def wake(ex: Executor, queue: str, grp: str, opts: QueueOptions, now: float) -> None:
    """A group whose window was to slide by ``now``: it has room again, or a later time to wake."""
    ex.lock_groups(queue, [grp])
    row = ex.one("group_get", (queue, grp))
    if row is None:
        return
    running, head_at, head_seq, _, _ = row
    room, slides = window_room(ex, queue, grp, opts, now)
    save(ex, queue, grp, opts, running, head_at, head_seq, slides if room <= 0 else None)


def recompute(ex: Executor, queue: str, grp: str, opts: QueueOptions, now: float) -> None:
    """Rebuild a group's row from the jobs and leases (after a cancel or a recovery)."""
    opts = kept(ex, queue, opts)
    ex.lock_groups(queue, [grp])
    running = ex.row("group_running", (queue, grp))[0]
    head = ex.one("head_of_group", {"queue": queue, "grp": grp})
    head_at, head_seq = head if head else (None, None)
    room, slides = window_room(ex, queue, grp, opts, now)
    ex.run("group_ensure", (queue, grp))
    save(ex, queue, grp, opts, running, head_at, head_seq, slides if room <= 0 else None)


def refresh(ex: Executor, queue: str, opts: QueueOptions) -> None:
    """Recompute which groups of a queue have room after its limits changed."""
    ex.run("groups_refresh", {"queue": queue, "limit": most_running(opts)})


def most_running(opts: QueueOptions) -> int:
    """The most jobs a group of the queue may run (a number the statements compare with)."""
    return opts.group_concurrency if opts.group_concurrency is not None else 1 << 62
