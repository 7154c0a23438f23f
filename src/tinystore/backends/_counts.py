"""Jobs per queue and state, from what a store keeps rather than from a count of every job.

Both backends keep a row per queue and stored state (queued, running, done,
failed) with its jobs and how many of them repeat, changed by triggers on
the jobs table as rows come, change state and leave (SQLite's migration
007, PostgreSQL's 004), so that every writer keeps them. A read then adds:

- the done and failed jobs past their time that maintenance has not removed
  yet, subtracted (as many as maintenance is behind, read by the expires index);
- the queued jobs due after now, counted over the due indexes: scheduled,
  the rest of the queued ones waiting. This costs what is scheduled, never
  what waits;
- each queue's first queued job (the due index's first entry, and its
  groups' heads): the oldest due job where it is due.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable, Optional

from ._base import QueueCount


def queue_counts(kept: Iterable[tuple], expired: Iterable[tuple], scheduled: Iterable[tuple],
                 first: Iterable[tuple], now: float) -> list[QueueCount]:
    """``kept`` and ``expired``: (queue, state, jobs, repeating); ``scheduled``: (queue, jobs due after
    now); ``first``: (queue, first ungrouped queued time, first group head time)."""
    jobs: dict[tuple[str, str], int] = defaultdict(int)
    repeating: dict[tuple[str, str], int] = defaultdict(int)
    for queue, state, n, r in kept:
        jobs[queue, state] += n
        repeating[queue, state] += r
    for queue, state, n, r in expired:
        jobs[queue, state] -= n
        repeating[queue, state] -= r
    oldest: dict[str, Optional[float]] = {}
    for queue, ungrouped, grouped in first:
        times = [t for t in (ungrouped, grouped) if t is not None and t <= now]
        oldest[queue] = min(times) if times else None
    due_after = dict(scheduled)
    counts = []
    for (queue, state), n in sorted(jobs.items()):
        r = repeating[queue, state]
        if n <= 0 and r <= 0:
            continue
        if state != "queued":
            counts.append(QueueCount(queue, state, n, None, r))
            continue
        later = due_after.get(queue, 0)  # the queue's repeating jobs are told with its scheduled ones
        counts.append(QueueCount(queue, "scheduled", later, None, r))
        counts.append(QueueCount(queue, "waiting", n - later, oldest.get(queue)))
    return counts
