"""Testing without waiting: a fake clock that tests move by hand.

    clock = FakeClock()
    store = tinystore.open(path, clock=clock)
    queue.add({"n": 1}, delay="10m")
    store.run_until_idle()          # nothing due yet: returns at once
    clock.advance("10m")
    store.run_until_idle()          # runs the job

Backoff, scheduling, lease expiry, renewals and timeouts all read this clock,
so a test moves time instead of sleeping.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import threading
from typing import Any, Callable

from ._clock import Clock
from ._durations import Duration, parse_duration


class _Timer:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock(Clock):
    """A clock that only moves when ``advance`` or ``set`` is called."""

    def __init__(self, start: float = 1_800_000_000.0):
        self._now = float(start)
        self._lock = threading.Lock()
        self._timers: list = []
        self._order = itertools.count()
        self._listeners: list[Callable[[], None]] = []

    def now(self) -> float:
        return self._now

    def call_later(self, loop: asyncio.AbstractEventLoop, delay: float, callback: Callable[[], Any]) -> _Timer:
        timer = _Timer()
        with self._lock:
            heapq.heappush(self._timers, (self._now + max(0.0, delay), next(self._order), loop, callback, timer))
        if delay <= 0:
            self._fire()
        return timer

    def advance(self, by: Duration) -> None:
        """Move time forward; fire the timers that are due and tell the stores that use this clock."""
        self.set(self._now + parse_duration(by, "advance"))

    def set(self, now: float) -> None:
        with self._lock:
            self._now = max(self._now, float(now))
        self._fire()
        for listener in list(self._listeners):
            listener()

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` after every move of time."""
        self._listeners.append(listener)

    def _fire(self) -> None:
        due = []
        with self._lock:
            while self._timers and self._timers[0][0] <= self._now:
                due.append(heapq.heappop(self._timers))
        for _, _, loop, callback, timer in due:
            if not timer.cancelled and not loop.is_closed():
                loop.call_soon_threadsafe(callback)


__all__ = ["FakeClock"]
