"""Hearing that an ``async def`` handler blocks the worker's event loop, and saying which one, once.

A handler that calls blocking code without awaiting (``time.sleep``,
CPU-bound work, synchronous I/O) stops every other handler, claim and
timeout of its worker while it runs. The worker's loop beats every
``BEAT`` seconds; the renewals' thread (``_renewals``) looks at the beat, and
when the loop has not beaten for ``BLOCKED`` seconds it names the attempt
whose handler the loop is running (``asyncio.current_task`` of that loop) in
one warning per attempt, saying what to use instead. Real seconds: a
``FakeClock`` does not move them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable, Optional

from ._attempt import Attempt
from ._events import fields

log = logging.getLogger("tinystore.worker")

BEAT = 0.1  # seconds between beats of the worker's loop
BLOCKED = 1.0  # seconds without a beat that make a loop blocked


class Stalls:
    def __init__(self, loop: asyncio.AbstractEventLoop, attempt_of: Callable[[Any], Optional[tuple[str, Attempt]]]):
        self.loop = loop
        self.attempt_of = attempt_of  # the (queue, attempt) whose handler a task of the loop runs, or None
        self.beat = time.monotonic()
        self.timer: Optional[asyncio.TimerHandle] = None

    def start(self) -> None:
        """Begin beating; call on the worker's loop."""
        self._beat()

    def stop(self) -> None:
        """Stop beating; call on the worker's loop."""
        if self.timer is not None:
            self.timer.cancel()

    def _beat(self) -> None:
        self.beat = time.monotonic()
        self.timer = self.loop.call_later(BEAT, self._beat)

    async def watch(self) -> None:
        """Look at the beat every other ``BEAT``, from another thread's loop."""
        while True:
            await asyncio.sleep(2 * BEAT)
            self.look()

    def look(self) -> None:
        blocked = time.monotonic() - self.beat
        if blocked < BLOCKED:
            return
        task = asyncio.current_task(self.loop)
        found = self.attempt_of(task) if task is not None else None
        if found is None:
            return  # not a handler: the loop is busy with tinystore's own work (a long local commit)
        queue, a = found
        if a.blocked_loop:
            return
        a.blocked_loop = True
        c = a.claimed
        log.warning("the async handler of %s/%s attempt %d has blocked the worker's event loop for %.1fs: it calls "
                    "code that does not await (time.sleep, CPU-bound work, synchronous I/O), and every other async "
                    "handler, claim and timeout of this worker waits meanwhile (its leases are still renewed). Make "
                    "it a def handler, which runs in a thread, or await asyncio.to_thread(...) around the blocking "
                    "call", queue, c.id, c.attempt, blocked, extra=fields(queue, c.id, c.attempt))
