"""Jobs per queue and state, from what a store keeps rather than from a count of every job.

Both backends keep a row per queue with its jobs in each stored state
(queued, running, done, failed) and how many of them repeat, changed by
triggers on the jobs table as rows come, change state and leave (SQLite's
migration 007, PostgreSQL's 004), so that every writer keeps it. A read then
adds:

- the done and failed jobs past their time that maintenance has not removed
  yet, subtracted (as many as maintenance is behind, read by the expires index);
- the queued jobs due after now, counted over the due indexes: scheduled,
  the rest of the queued ones waiting. This costs what is scheduled, never
  what waits;
- each queue's first queued job (the due index's first entry, and its
  groups' heads): the oldest due job where it is due.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

from ._base import QueueCount

STORED = ("queued", "running", "done", "failed")  # the states of a job row


def queue_counts(kept: Iterable[tuple[Any, ...]], expired: Iterable[tuple[Any, ...]],
                 scheduled: Iterable[tuple[Any, ...]],
                 first: Iterable[tuple[Any, ...]], now: float) -> list[QueueCount]:
    """``kept``: (queue, queued, running, done, failed, repeating); ``expired``: (queue, state, jobs,
    repeating); ``scheduled``: (queue, jobs due after now); ``first``: (queue, first ungrouped queued
    time, first group head time)."""
    jobs = {queue: dict(zip(STORED + ("repeating",), counts)) for queue, *counts in kept}
    for queue, state, n, repeating in expired:
        if queue in jobs:
            jobs[queue][state] -= n
            jobs[queue]["repeating"] -= repeating
    due_after = dict(scheduled)
    oldest: dict[str, Optional[float]] = {}
    for queue, ungrouped, grouped in first:
        times = [t for t in (ungrouped, grouped) if t is not None and t <= now]
        oldest[queue] = min(times) if times else None
    counts = []
    for queue, n in sorted(jobs.items()):
        later = due_after.get(queue, 0)
        counts.append(QueueCount(queue, "scheduled", later, None, n["repeating"]))  # the queue's repeating jobs
        counts.append(QueueCount(queue, "waiting", n["queued"] - later, oldest.get(queue)))
        counts += [QueueCount(queue, state, n[state], None) for state in STORED[1:]]
    return counts
