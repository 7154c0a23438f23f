"""The one interface between a store and its database.

Writes return a ``concurrent.futures.Future`` that resolves once the write is
durable (committed), so that a sync caller waits on it and an async worker
awaits it without blocking its loop. Reads run on the caller's thread.
Backends know rows and JSON text, not Python payloads.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Callable, Optional

from .._options import QueueOptions
from .._settle import Decision


@dataclass(frozen=True)
class JobRow:
    """A job as stored. ``state`` is queued, running, done or failed."""

    seq: int
    queue: str
    id: str
    payload: str
    grp: Optional[str]
    state: str
    at: float
    attempt: int
    error: Optional[str]
    progress: Optional[str]
    expires: Optional[float]


@dataclass(frozen=True)
class Change:
    """One change of a watched job, in commit order; ``state`` is None where the job left the queue."""

    id: int
    job: int
    state: Optional[str]
    at: float
    attempt: int
    error: Optional[str]
    progress: Optional[str]


@dataclass(frozen=True)
class NewJob:
    id: str
    payload: str
    grp: Optional[str]
    at: float


@dataclass(frozen=True)
class Claimed:
    """A job a claim took: its lease is ``(seq, attempt)``."""

    seq: int
    id: str
    payload: str
    grp: Optional[str]
    at: float
    attempt: int


@dataclass(frozen=True)
class Settlement:
    """The end of one attempt, named by its lease."""

    seq: int
    attempt: int
    grp: Optional[str]
    decision: Decision


@dataclass(frozen=True)
class Cycle:
    """What one claim cycle did: jobs claimed, settlements that were stale, when to look again."""

    claimed: list[Claimed]
    stale: list[Settlement]
    wake_at: Optional[float]


class Backend(ABC):
    """Everything a store asks of its database."""

    # Lifecycle
    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def register(self, now: float) -> int:
        """Register this process; end the leases of every process that died (DUR-03). Returns its owner id."""

    # Queues
    @abstractmethod
    def load_options(self, queue: str) -> Optional[QueueOptions]: ...

    @abstractmethod
    def save_options(self, queue: str, options: QueueOptions) -> Future: ...

    @abstractmethod
    def queue_names(self) -> list[str]: ...

    # Jobs
    @abstractmethod
    def add(self, queue: str, jobs: list[NewJob], now: float, tx: Any = None) -> Future:
        """Add jobs in one transaction; resolves to ``[(JobRow, added)]`` in order."""

    @abstractmethod
    def get(self, queue: str, id: str) -> Optional[JobRow]: ...

    @abstractmethod
    def ahead(self, row: JobRow, now: float) -> int: ...

    @abstractmethod
    def ahead_many(self, queue: str, rows: list[JobRow], now: float) -> dict[int, int]:
        """``ahead`` of several waiting jobs of one queue, by seq, in one query."""

    @abstractmethod
    def watch_begin(self, owner: int, seq: int) -> Future:
        """From its commit on, every change of the job is logged for this process's watchers (JOB-13)."""

    @abstractmethod
    def watch_end(self, owner: int, seq: int) -> Future: ...

    @abstractmethod
    def watched(self, cursors: dict[int, int]) -> tuple[dict[int, JobRow], list[Change]]:
        """In one snapshot: the jobs (by seq), and the changes of each logged after its cursor (a change
        id), in order."""

    @abstractmethod
    def was_cancelled(self, seq: int) -> bool: ...

    @abstractmethod
    def cancel(self, queue: str, id: str, opts: QueueOptions, now: float) -> Future:
        """Resolves to the cancelled JobRow, or None when no scheduled, waiting or running job had that id."""

    @abstractmethod
    def retry_failed(self, queue: str, id: str, now: float) -> Future: ...

    @abstractmethod
    def jobs(self, queue: str, state: Optional[str], grp: Optional[str], limit: int, after: Optional[str], now: float) -> list[JobRow]: ...

    @abstractmethod
    def stats(self, now: float) -> dict[str, Any]: ...

    # Workers
    @abstractmethod
    def cycle(self, queue: str, opts: QueueOptions, owner: int, settlements: list[Settlement], want: int,
              now: "float | Callable[[], float]", source: Any = None) -> Future:
        """Settle, end expired leases and claim up to ``want`` jobs in one transaction; resolves to a Cycle.

        ``now`` may be the clock's ``now`` itself: it is then read once the transaction holds the write
        lock, so that leases and rate-window starts carry the time they were taken. ``source`` (the
        worker) is not woken by the notice of its own commit.
        """

    @abstractmethod
    def give_back(self, queue: str, opts: QueueOptions, claimed: list[Claimed], now: float,
                  source: Any = None) -> Future:
        """Jobs claimed but never started wait again, their attempts not counted."""

    @abstractmethod
    def renew(self, queue: str, owner: int, expires: float) -> Future: ...

    @abstractmethod
    def progress(self, seq: int, attempt: int, value: str) -> Future: ...

    @abstractmethod
    def step_answer(self, seq: int, name: str) -> Optional[str]: ...

    @abstractmethod
    def keep_step(self, seq: int, attempt: int, name: str, answer: str) -> Future:
        """Resolves to True when kept, False when the attempt no longer holds its lease."""

    @abstractmethod
    def keep_step_in(self, tx: Any, seq: int, attempt: int, name: str, answer: str) -> None:
        """Keep a step's answer inside an open transaction (run.transaction)."""

    @abstractmethod
    def held(self, owner: int, seqs: list[int]) -> set[int]:
        """Which of these jobs the process still holds a lease on."""

    @abstractmethod
    def next_due(self, queues: list[str]) -> dict[str, tuple]:
        """Per queue, in one read: ``(first ungrouped job's time, first ready group's head time, first
        group wake, first lease expiry, live leases)``, for a worker that heard of another's commit."""

    @abstractmethod
    def run_transaction(self, fn: Callable[[Any], Any], lease: Optional[tuple[int, int]] = None) -> Any:
        """Run ``fn(tx)`` in one write transaction; with ``lease``, roll back unless it is still held."""

    @abstractmethod
    def maintain(self, now: float, batch: int, progress: Optional[Callable[[int], None]] = None) -> dict[str, int]:
        """Remove what expired by ``now``, a batch per transaction; ``progress(removed so far)`` after each."""

    # Change notices
    @abstractmethod
    def changed(self) -> bool:
        """Whether another connection committed since the last call (cheap; polled). The backend's own
        commits are told to its ``on_commit`` with the queues they changed instead."""
