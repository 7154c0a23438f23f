"""The timeouts of a runner's attempts (JOB-09): one timer, at the earliest deadline."""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Optional

from ._attempt import Attempt
from ._clock import Clock


class Deadlines:
    """The timeouts of one runner's attempts.

    An attempt's timeout counts from when its handler begins (``Attempt.began``,
    set in the handler's own thread for a ``def`` handler), never from its
    claim. No deadline is ever earlier than its attempt's claim plus the
    timeout, so the timer is armed when an attempt starts and none is armed;
    when it fires, it times out the attempts past their deadline and is armed
    again at the earliest deadline of the others. Nothing crosses from a
    handler thread to the loop, and nothing is kept per finished attempt.

    ``timeout()`` is the queue's timeout as the store keeps it now (None: no
    timeout), ``attempts()`` the attempts running now, and ``time_out(a)``
    what the runner does with an attempt past its deadline.
    """

    def __init__(self, clock: Clock, timeout: Callable[[], Optional[float]], attempts: Callable[[], list[Attempt]],
                 time_out: Callable[[Attempt], None]):
        self.clock = clock
        self.timeout = timeout
        self.attempts = attempts
        self.time_out = time_out
        self.timer: Any = None
        self.timer_at: Optional[float] = None

    def watch(self) -> None:
        """An attempt was claimed now: make sure the timer fires by the earliest its deadline can be."""
        timeout = self.timeout()
        if timeout is not None:
            at = self.clock.now() + timeout
            if self.timer_at is None or at < self.timer_at:
                self._arm(at)

    def _fire(self) -> None:
        self.timer = self.timer_at = None
        now, timeout = self.clock.now(), self.timeout()
        if timeout is None:
            return
        earliest: Optional[float] = None
        for a in self.attempts():
            if a.timed_out is not None:
                continue
            deadline = (a.began if a.began is not None else now) + timeout
            if deadline <= now:
                self.time_out(a)
            elif earliest is None or deadline < earliest:
                earliest = deadline
        if earliest is not None:
            self._arm(earliest)

    def _arm(self, at: float) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer_at = at
        self.timer = self.clock.call_later(asyncio.get_running_loop(), at - self.clock.now(), self._fire)
