"""The threads that run ``def`` handlers for a worker's event loop.

At most ``size`` threads, each started when a call finds every thread
busy, so a worker starts no more threads than it runs handlers at once (its
``ThreadBudget`` bounds those). Each thread takes the next call from one queue. Finished calls go back to
the loop in batches: a single wake-up of the loop hands over every call that
finished meanwhile, rather than a future and a wake-up per job.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections import deque
from typing import Any, Callable, Optional

OnEnd = Callable[[Any, Optional[BaseException]], None]  # (what the call returned, what it raised)


class Call:
    """A call handed to the threads. ``cancel()`` ends it for the loop at once; its thread runs on."""

    __slots__ = ("fn", "args", "on_end", "ended")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...], on_end: OnEnd):
        self.fn = fn
        self.args = args
        self.on_end = on_end
        self.ended = False

    def cancel(self) -> None:
        self.end(None, asyncio.CancelledError())

    def end(self, answer: Any, exc: Optional[BaseException]) -> None:
        if not self.ended:
            self.ended = True
            self.on_end(answer, exc)


class HandlerThreads:
    """Up to ``size`` threads, started as calls need them; ``on_end`` of each call runs on the caller's loop.

    Daemon threads: a handler still running past the grace period does not
    keep the process from exiting (its job goes to the next attempt).
    """

    def __init__(self, size: int):
        self._size = size
        self._calls: "queue.SimpleQueue[Optional[Call]]" = queue.SimpleQueue()
        self._finished: deque[Any] = deque()
        self._lock = threading.Lock()
        self._waking = False  # a hand-over is scheduled on the loop and has not begun
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._threads: list[threading.Thread] = []
        self._busy = 0  # calls handed over and not yet finished (or passed over)

    def call(self, fn: Callable[..., Any], args: tuple[Any, ...], on_end: OnEnd) -> Call:
        """Run ``fn(*args)`` in a thread; ``on_end`` gets its outcome on this loop. Call on the loop."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        c = Call(fn, args, on_end)
        thread = None
        with self._lock:
            self._busy += 1
            if self._busy > len(self._threads) and len(self._threads) < self._size:
                thread = threading.Thread(target=self._work, name=f"tinystore-handler-{len(self._threads)}",
                                          daemon=True)
                self._threads.append(thread)
        if thread is not None:
            thread.start()
        self._calls.put(c)
        return c

    def shutdown(self, wait: bool) -> None:
        """Let each thread end after its current call; with ``wait``, until they have.

        Calls still waiting for a thread were ended by then (a stop past its
        grace period cancels them): they are passed over, never begun.
        """
        for _ in self._threads:
            self._calls.put(None)
        if wait:
            for t in self._threads:
                t.join()

    def _work(self) -> None:
        while True:
            c = self._calls.get()
            if c is None:
                return
            if c.ended:  # stopped past the grace period while it waited for a thread: it never begins
                with self._lock:
                    self._busy -= 1
                continue
            try:
                answer, exc = c.fn(*c.args), None
            except BaseException as raised:  # the loop decides what it means, as for an async handler
                answer, exc = None, raised
            self._finished.append((c, answer, exc))
            with self._lock:
                self._busy -= 1
                wake, self._waking = not self._waking, True
            if wake:
                assert self._loop is not None  # set before the first call is handed to a thread
                try:
                    self._loop.call_soon_threadsafe(self._hand_over)
                except RuntimeError:  # the loop is closed: nobody waits for the outcome
                    return

    def _hand_over(self) -> None:
        with self._lock:
            self._waking = False
        stopping: Optional[BaseException] = None
        while self._finished:
            c, answer, exc = self._finished.popleft()
            try:
                c.end(answer, exc)
            except BaseException as raised:  # a settlement that failed: hand over the others first
                stopping = stopping or raised
        if stopping is not None:
            raise stopping
