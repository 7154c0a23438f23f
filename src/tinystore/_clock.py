"""The one clock every part of tinystore reads time from and waits on.

Times are UNIX seconds (floats). Waiting goes through the clock too, so a
fake clock (``tinystore.testing.FakeClock``) moves backoff, scheduling, lease
expiry, renewals and timeouts without anyone sleeping.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable


class Clock:
    """The system clock."""

    def now(self) -> float:
        return time.time()

    def call_later(self, loop: asyncio.AbstractEventLoop, delay: float, callback: Callable[[], Any]) -> Any:
        """Call ``callback`` on ``loop`` after ``delay`` seconds; returns a handle with ``cancel()``."""
        return loop.call_later(max(0.0, delay), callback)

    async def sleep(self, delay: float) -> None:
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        handle = self.call_later(loop, delay, lambda: done.done() or done.set_result(None))
        try:
            await done
        finally:
            handle.cancel()

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` whenever time jumps: never, for the system clock."""
