"""Looking again for a dead process when its grace ends (DUR-03).

On PostgreSQL a process whose liveness lock is gone is found dead only once
it has not said it lives for a grace of a few seconds (``postgres/_keeper``):
until then it may be connecting again. A look (``end_dead``, at open and on a
serving worker's timer) that finds one within its grace leaves it suspect
(``Backend.dead_due``), and ``DeadLooks`` looks again as that grace ends, on a
thread of its own: its leases end then, in a process that only opened the
store as in one that serves, not when they would run out. The thread runs
only while someone is suspect. On SQLite a look decides at once, and no
thread is ever started.
"""

from __future__ import annotations

import logging
import threading
from typing import Optional

from ._clock import Clock
from ._errors import Closed
from .backends._base import Backend

log = logging.getLogger("tinystore.store")
RETRY = 1.0  # seconds before a look that failed (the store cannot be reached) is tried again


class DeadLooks:
    """Looks for dead processes again whenever a suspect's grace ends, until the store closes."""

    def __init__(self, backend: Backend, clock: Clock):
        self._backend = backend
        self._clock = clock
        self._changed = threading.Condition()
        self._thread: Optional[threading.Thread] = None
        self._closed = False

    def look(self) -> int:
        """End the leases of the processes found dead now (``end_dead``); look again when a suspect's
        grace ends. Returns how many were found dead."""
        found = self._backend.end_dead(self._clock.now())
        self.arm()
        return found

    def arm(self) -> None:
        """Look again when the grace of the first suspect of the last look ends, if any."""
        if self._backend.dead_due() is None:
            return
        with self._changed:
            if self._closed:
                return
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="tinystore-dead-looks", daemon=True)
                self._thread.start()
            self._changed.notify()

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        while self._wait():
            try:
                self._backend.end_dead(self._clock.now())
            except Closed:
                return
            except Exception as exc:  # an outage: the suspects stay due, and are looked at again
                log.debug("looking for processes that died: %s", exc)
                with self._changed:
                    self._changed.wait_for(lambda: self._closed, RETRY)

    def _wait(self) -> bool:
        """Wait until a suspect is due; False once nobody is suspect (the thread ends, and ``arm`` starts
        another when one is) or the store closed."""
        with self._changed:
            while not self._closed:
                due = self._backend.dead_due()
                if due is None:
                    self._thread = None
                    return False
                if due <= 0:
                    return True
                self._changed.wait(due)
            return False
