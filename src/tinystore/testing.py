"""Testing without waiting: a fake clock that tests move by hand.

    clock = FakeClock()
    store = tinystore.open(path, clock=clock)
    queue.add({"n": 1}, delay="10m")
    store.run_until_idle()          # nothing due yet: returns at once
    clock.advance("10m")
    store.run_until_idle()          # runs the job

Backoff, scheduling, lease expiry, renewals and timeouts all read this clock,
so a test moves time instead of sleeping. ``clock.set(t)`` steps the clock to
``t``, later or earlier, as NTP or an operator steps a wall clock: a test can
show what a worker does when the time it reads goes back.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import threading
from typing import Any, Callable

from ._clock import Clock
from ._durations import Duration, parse_duration
from ._errors import InvalidArgument


class _Timer:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock(Clock):
    """A clock that only moves when ``advance`` or ``set`` is called.

    ``advance(by)`` lets time pass: the clock reads ``by`` later. ``set(t)``
    sets the clock to read ``t``, later or earlier, as NTP or an operator
    steps a wall clock; no time passes. A wait (``call_later``, ``sleep``)
    ends once its delay has passed or once the clock reads the time it was
    armed for, whichever is first, as on the system clock: after the clock
    was set back, a wait ends after its delay of ``advance``; after it was
    set forward, the waits it passed end at once.
    """

    def __init__(self, start: float = 1_800_000_000.0):
        self._now = float(start)
        self._passed = 0.0  # the time ``advance`` let pass: a monotonic clock
        self._lock = threading.Lock()
        self._timers: list[Any] = []
        self._order = itertools.count()
        self._listeners: list[Callable[[], None]] = []

    def now(self) -> float:
        """The fake time, in UNIX seconds: where ``advance`` and ``set`` left it."""
        return self._now

    def call_later(self, loop: asyncio.AbstractEventLoop, delay: float, callback: Callable[[], Any]) -> _Timer:
        """Call ``callback`` on ``loop`` once ``advance`` or ``set`` has let ``delay`` seconds pass; returns
        a handle with ``cancel()``."""
        timer = _Timer()
        delay = max(0.0, delay)
        with self._lock:
            self._timers.append((self._passed + delay, next(self._order), self._now + delay, loop, callback, timer))
        if delay <= 0:
            self._fire()
        return timer

    def advance(self, by: Duration) -> None:
        """Let time pass: fire the timers that are due and tell the stores that use this clock."""
        seconds = parse_duration(by, "advance")
        with self._lock:
            self._now += seconds
            self._passed += seconds
        self._moved()

    def set(self, now: float) -> None:
        """Set the clock to read ``now``, later or earlier than it reads (a step of a wall clock)."""
        if isinstance(now, bool) or not isinstance(now, (int, float)) or not math.isfinite(now):
            raise InvalidArgument(f"set({now!r}): the time must be a finite number of UNIX seconds")
        with self._lock:
            self._now = float(now)
        self._moved()

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` after every move of time."""
        self._listeners.append(listener)

    def _moved(self) -> None:
        self._fire()
        for listener in list(self._listeners):
            listener()

    def _fire(self) -> None:
        """Call the timers whose delay has passed or whose time the clock reads, in the order they fall due."""
        with self._lock:
            live = [t for t in self._timers if not t[5].cancelled]
            due = [t for t in live if t[0] <= self._passed or t[2] <= self._now]
            self._timers = [t for t in live if not (t[0] <= self._passed or t[2] <= self._now)]
        for _, _, _, loop, callback, timer in sorted(due, key=lambda t: t[:2]):
            if not timer.cancelled and not loop.is_closed():
                loop.call_soon_threadsafe(callback)


__all__ = ["FakeClock"]
