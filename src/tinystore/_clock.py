"""The one clock every part of tinystore reads time from and waits on.

Times are UNIX seconds (floats). Waiting goes through the clock too, so a
fake clock (``tinystore.testing.FakeClock``) moves backoff, scheduling, lease
expiry, renewals and timeouts without anyone sleeping.

The wall clock can step: NTP or an operator sets it back or forward. Job
times, leases and rate windows are wall-clock times, kept in the store for
every process; a wait is for a wall-clock time too, so ``call_later`` fires
after its delay has passed or once the wall clock reads the time it was armed
for, whichever comes first. A clock set back never makes a wait longer than
its delay, and one put forward (or put right again) ends the waits it passed
within ``LOOK_EVERY`` seconds.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable

LOOK_EVERY = 1.0  # how often a long wait looks at the wall clock, in seconds of the loop's own clock


class Clock:
    """The system clock."""

    def now(self) -> float:
        """The time now, in UNIX seconds."""
        return time.time()

    def call_later(self, loop: asyncio.AbstractEventLoop, delay: float, callback: Callable[[], Any]) -> Any:
        """Call ``callback`` on ``loop`` after ``delay`` seconds, or once ``now()`` reads ``delay`` past what
        it reads now, whichever is first; returns a handle with ``cancel()``."""
        return _WallTimer(self, loop, max(0.0, delay), callback)

    async def sleep(self, delay: float) -> None:
        """Wait ``delay`` seconds, or until ``now()`` reads ``delay`` past what it reads now, whichever is
        first."""
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        def wake() -> None:
            if not done.done():
                done.set_result(None)
        handle = self.call_later(loop, delay, wake)
        try:
            await done
        finally:
            handle.cancel()

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` whenever time jumps: never, for the system clock."""


class _WallTimer:
    """A wait on the loop's monotonic clock that also looks at the wall clock every ``LOOK_EVERY`` seconds."""

    def __init__(self, clock: Clock, loop: asyncio.AbstractEventLoop, delay: float, callback: Callable[[], Any]):
        self._clock = clock
        self._loop = loop
        self._callback = callback
        self._wall_due = clock.now() + delay
        self._loop_due = loop.time() + delay
        self._handle = self._arm()

    def _arm(self) -> asyncio.TimerHandle:
        if self._loop_due - self._loop.time() <= LOOK_EVERY:
            return self._loop.call_at(self._loop_due, self._callback)  # the delay itself ends the wait
        return self._loop.call_at(self._loop.time() + LOOK_EVERY, self._look)

    def _look(self) -> None:
        if self._clock.now() >= self._wall_due:
            self._callback()
        else:
            self._handle = self._arm()

    def cancel(self) -> None:
        self._handle.cancel()
