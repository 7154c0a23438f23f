"""What one write transaction tells when it commits, gathered the same way by every backend's writer.

Each operation of the batch tells, while it runs, the queues it gives work
and the jobs it cancels (``notify``); what it told counts only where it
changed rows. A queue is told with the one who asked (``source``) where that
source alone gave it work, so that its own runner, which will look anyway,
need not be woken; ``notice`` is the commit's ``Notice``, or None where the
transaction changed nothing (nobody is told of it).
"""

from __future__ import annotations

from typing import Any, Optional

from ._base import Notice


class CommitNotices:
    def __init__(self) -> None:
        self.queues: dict[str, Any] = {}
        self.cancelled: set[tuple[str, int]] = set()
        self.changed = False
        self._told: list[tuple[str, Optional[int], bool]] = []  # the running operation's

    def begin(self, work: Optional[str]) -> None:
        """An operation begins; ``work``: a queue it gives work to, where it changes rows."""
        self._told = [(work, None, False)] if work is not None else []

    def notify(self, queue: str, job: Optional[int] = None, wake_source: bool = False) -> None:
        """``wake_source``: the work is not what the source asked for (a batch's then job, added by a
        settlement), so its own runners of ``queue`` are woken too."""
        self._told.append((queue, job, wake_source))

    def wrote(self, source: Any, told: Optional[list[tuple[str, Optional[int], bool]]] = None) -> None:
        """The operation that began last changed rows: what it told counts (``told``: what an earlier one
        told, for a writer that learns after all of them ran which changed rows)."""
        self.changed = True
        for queue, job, wake_source in self._told if told is None else told:
            if job is None:
                asked = source if not wake_source else None
                self.queues[queue] = asked if self.queues.get(queue, asked) is asked else None
            else:
                self.cancelled.add((queue, job))

    def told(self) -> list[tuple[str, Optional[int], bool]]:
        """What the running operation told so far (a queue given work, or a job cancelled), whether or not it
        changes rows: for a writer that sends its notices before it knows."""
        return list(self._told)

    def notice(self) -> Optional[Notice]:
        return Notice(self.queues, frozenset(job for _, job in self.cancelled)) if self.changed else None
