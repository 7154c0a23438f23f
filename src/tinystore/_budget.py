"""The handler threads of a worker, handed out to its runners of ``def`` handlers in turn."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, Protocol


class Waiter(Protocol):
    """A runner, as the budget sees it: whether it waits in line, and how to wake it."""

    wants_threads: bool
    poke: asyncio.Event


class ThreadBudget:
    """The handler threads of a worker, shared by its runners of ``def`` handlers.

    A runner takes threads for a claim before it claims (so it never claims
    a job that would wait for a thread) and gives back those it did not use,
    and one per attempt when its handler has returned. A runner that got
    fewer than it wanted waits in turn: while any waits, threads given back
    go to the first in line, so no queue is starved by a busier one.
    """

    def __init__(self, size: int):
        self.size = size
        self.used = 0
        self.waiting: deque[Any] = deque()

    def take(self, runner: "Waiter", want: int, wait: bool = True) -> int:
        """Up to ``want`` threads for ``runner``'s next claim; with ``wait`` (it knows of due work), those
        it does not get it waits for in line."""
        ahead = bool(self.waiting) and self.waiting[0] is not runner
        got = 0 if ahead else min(want, self.size - self.used)
        self.used += got
        if got < want and wait:
            if not runner.wants_threads:
                runner.wants_threads = True
                self.waiting.append(runner)
        elif got == want and runner.wants_threads:
            self.leave(runner)
        return got

    def give(self, count: int) -> None:
        if count:
            self.used -= count
            self._next()

    def leave(self, runner: "Waiter") -> None:
        """``runner`` no longer waits for threads (it has what it needs, or stopped)."""
        if runner.wants_threads:
            runner.wants_threads = False
            self.waiting.remove(runner)
            self._next()

    def _next(self) -> None:
        if self.waiting and self.used < self.size:
            self.waiting[0].poke.set()
