"""The worker's record of one attempt it runs: the runner keeps it, its timeouts and renewals read it.

The handler's ``Run`` is given the record and reads ``cancelled`` from it;
nothing else of the run is the worker's business. Times are the store's
clock. ``began`` and ``finished`` are written by the thread that runs a
``def`` handler, everything else on the worker's loop, except what the
renewals' thread writes (``lease_ends``, and ``take_away`` when a lease is
no longer held): each is one attribute, read whole by the others.
"""

from __future__ import annotations

from typing import Any, Optional

from .backends._base import Claimed


class Attempt:
    """One claimed job's attempt, from its claim until its handler has ended."""

    __slots__ = ("claimed", "seq", "key", "task", "run", "started", "began", "finished", "timed_out", "taken_away",
                 "cancelled", "lease_ends", "renewed", "blocked_loop")

    def __init__(self, claimed: Claimed, started: float, lease_ends: float):
        self.claimed = claimed
        self.seq = claimed.seq
        # (job, attempt): a process may run two attempts of one job at once, an older one whose lease ran
        # out while its handler still runs beside the one that holds the lease now.
        self.key = (claimed.seq, claimed.attempt)
        self.task: Any = None  # the asyncio Task of an async handler, the threads' Call of a def one
        self.run: Any = None  # the Run or AsyncRun its handler gets
        self.started = started  # when the worker started it
        self.began: Optional[float] = None  # when its handler began
        self.finished: Optional[float] = None  # when its handler returned or raised
        self.timed_out: Optional[float] = None  # the timeout it ran past: it fails whatever it answers
        self.taken_away = False  # its lease is gone (a cancel, a lease that ran out): its answer settles nothing
        self.cancelled = False  # its handler should stop (``run.cancelled``)
        self.lease_ends = lease_ends  # when its lease runs out unless renewed, as last written
        self.renewed = True  # its lease is renewed; false once it ran too far past its timeout (``_renewals``)
        self.blocked_loop = False  # it was said to block the worker's loop (``_stalls``): said once

    def take_away(self) -> None:
        """The attempt no longer holds its lease: its handler is told to stop, its answer settles nothing."""
        self.taken_away = self.cancelled = True

    def time_out(self, timeout: float) -> None:
        """The attempt ran past ``timeout`` (JOB-09): it fails whatever it answers; its handler is told to stop."""
        self.timed_out = timeout
        self.cancelled = True
