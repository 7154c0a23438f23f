"""What a store's metrics keep: this process's counts and histograms, and the store's gauges, read cached."""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._settle import outcome
from .._store import observer

if TYPE_CHECKING:
    from .._store import Store
    from ..backends._base import Claimed, Settlement

# Seconds, for both histograms: a handler's run and a job's wait from due to start.
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
           1800.0, 3600.0)
COUNTERS = ("added", "started", "done", "failed", "retried", "snoozed")
GAUGES = ("waiting", "running", "paused")  # per queue, from store.stats(); paused as 1 or 0
STATS_EVERY = 1.0  # seconds a reading of store.stats() serves scrapes for


class Histogram:
    """Observations in ``BUCKETS`` (``counts[i]`` those up to ``BUCKETS[i]``, the last those above), their sum."""

    __slots__ = ("counts", "sum")

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(BUCKETS, value)] += 1
        self.sum += value

    def copy(self) -> "Histogram":
        other = Histogram()
        other.counts, other.sum = list(self.counts), self.sum
        return other


@dataclass(frozen=True)
class Snapshot:
    """One reading of the metrics: per counter name, per queue, the count; the histograms per queue; and
    the store's waiting and running jobs per queue."""

    counts: dict[str, dict[str, int]]
    run_seconds: dict[str, Histogram]
    claim_delay: dict[str, Histogram]
    gauges: dict[str, dict[str, int]]

    def queues(self) -> list[str]:
        """Every queue that any metric speaks of, in order."""
        names = set(self.gauges) | set(self.run_seconds) | set(self.claim_delay)
        for counts in self.counts.values():
            names.update(counts)
        return sorted(names)


class Metrics:
    """The metrics of one store in this process: what its ``add`` calls and workers tell (``_events``),
    counted under one lock, since adds come from any thread and a store may have several workers."""

    def __init__(self, store: "Store"):
        self._store = store
        self._lock = threading.Lock()
        self._counts: dict[str, dict[str, int]] = {name: {} for name in COUNTERS}
        self._run_seconds: dict[str, Histogram] = {}
        self._claim_delay: dict[str, Histogram] = {}
        self._stats_lock = threading.Lock()
        self._stats: dict[str, dict[str, int]] = {}
        self._stats_read = float("-inf")
        self.listeners: list[Any] = []  # told each observation too (OpenTelemetry's histograms)

    # What the core tells (``_events.Events``)

    def added(self, queue: str, count: int) -> None:
        """Count ``count`` jobs this process added to ``queue``."""
        with self._lock:
            self._bump("added", queue, count)

    def claimed(self, queue: str, claimed: list["Claimed"], now: float) -> None:
        """Count the attempts a worker started, and how long after its time each job started."""
        delays = [max(0.0, now - c.at) for c in claimed]
        with self._lock:
            self._bump("started", queue, len(claimed))
            histogram = _histogram(self._claim_delay, queue)
            for delay in delays:
                histogram.observe(delay)
        for listener in self.listeners:
            listener.claim_delays(queue, delays)

    def ran(self, queue: str, seconds: float) -> None:
        """Observe one handler's run time, from its start to its end."""
        with self._lock:
            _histogram(self._run_seconds, queue).observe(seconds)
        for listener in self.listeners:
            listener.run_seconds(queue, seconds)

    def settled(self, queue: str, settlements: list["Settlement"], stale: list["Settlement"]) -> None:
        """Count each settlement by its outcome, except those that changed nothing (``stale``)."""
        kept = {id(s) for s in stale}
        with self._lock:
            for s in settlements:
                if id(s) not in kept:
                    self._bump(outcome(s.decision), queue, 1)

    def _bump(self, name: str, queue: str, count: int) -> None:
        counts = self._counts[name]
        counts[queue] = counts.get(queue, 0) + count

    # Reading

    def counted(self, name: str) -> dict[str, int]:
        """Per queue, the count of one counter (``COUNTERS``) as it is now."""
        with self._lock:
            return dict(self._counts[name])

    def snapshot(self) -> Snapshot:
        """The counts and histograms as they are now, and the store's gauges as read within a second."""
        gauges = self.gauges()
        with self._lock:
            return Snapshot({name: dict(counts) for name, counts in self._counts.items()},
                            {q: h.copy() for q, h in self._run_seconds.items()},
                            {q: h.copy() for q, h in self._claim_delay.items()}, gauges)

    def gauges(self) -> dict[str, dict[str, int]]:
        """Per queue, its waiting and running jobs in the whole store, and 1 where it is paused (else 0):
        ``store.stats()``, read at most
        once every ``STATS_EVERY`` seconds however often metrics are read."""
        with self._stats_lock:
            if time.monotonic() - self._stats_read >= STATS_EVERY:
                stats = self._store.stats()
                self._stats = {q: {g: int(s[g]) for g in GAUGES} for q, s in stats.items()}
                self._stats_read = time.monotonic()
            return self._stats


def _histogram(histograms: dict[str, Histogram], queue: str) -> Histogram:
    histogram = histograms.get(queue)
    if histogram is None:
        histogram = histograms[queue] = Histogram()
    return histogram


def observed(store: "Store") -> Metrics:
    """The store's Metrics, made the first time and handed to its core, which tells it from then on."""
    events = observer(store, Metrics)
    assert isinstance(events, Metrics)  # the store's only observer is its metrics
    return events
