"""Riding out a store that cannot be written for a while: retries of background tasks, logged once.

A worker's claim cycles, lease renewals and maintenance, the watch reader
and the notifier's poll each keep a ``Retrying``: a write that fails with
``Unavailable`` (no space, an I/O error, the write lock held past
``lock_timeout``) is tried again after 50 ms, doubling up to 2 s. The store's
``Outages`` log the first failure of an outage once, at warning, and its end
once, at info, whichever tasks failed meanwhile. A task that cannot go on
(another error, or failures for longer than ``OUTAGE_LIMIT``) raises
``CannotGoOn``, and the worker stops with that reason.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Optional

from ._errors import Error, Unavailable

log = logging.getLogger("tinystore.store")

OUTAGE_LIMIT = 300.0  # seconds a background task keeps retrying before its worker stops
FIRST_RETRY = 0.05
LONGEST_RETRY = 2.0


class CannotGoOn(Exception):
    """A background task gave up; ``error`` says why, as the tinystore error ``serve()`` raises."""

    def __init__(self, what: str, cause: BaseException, seconds: Optional[float] = None):
        if seconds is None:
            message = f"the worker stopped: {what} failed: {cause}"
        else:
            message = (f"the worker stopped: {what} failed for {seconds:.0f}s, longer than tinystore "
                       f"retries ({OUTAGE_LIMIT:g}s): {cause}")
        kind = type(cause) if isinstance(cause, Error) else Error
        try:
            self.error: Error = kind(message)
        except TypeError:  # an Error subclass with a constructor of its own
            self.error = Error(message)
        self.error.__cause__ = cause
        super().__init__(message)
        self.cause = cause


def transient(exc: BaseException) -> bool:
    """Whether the same write may work later: no space, an I/O error, a lock held too long."""
    return isinstance(exc, Unavailable)


class Outages:
    """Which background tasks of a store fail now; logs an outage's beginning and end once each."""

    def __init__(self) -> None:
        self._failing: dict[str, float] = {}  # task -> when it began failing (monotonic)
        self._began: Optional[float] = None
        self._lock = threading.Lock()

    def failed(self, what: str, exc: BaseException) -> float:
        """``what`` failed with ``exc``: how long it has been failing, in seconds."""
        with self._lock:
            now = time.monotonic()
            since = self._failing.setdefault(what, now)
            first = self._began is None
            if first:
                self._began = now
        if first:
            log.warning("%s failed: %s; tinystore tries it again, and whatever else fails meanwhile, "
                        "for up to %gs", what, exc, OUTAGE_LIMIT)
        else:
            log.debug("%s failed: %s", what, exc)
        return now - since

    def recovered(self, what: str, gave_up: bool = False) -> None:
        if what not in self._failing:
            return
        with self._lock:
            self._failing.pop(what, None)
            began = self._began if not self._failing else None
            if began is not None:
                self._began = None
        if began is not None and not gave_up:
            log.info("the store works again after %.1fs: %s succeeded", time.monotonic() - began, what)


class Retrying:
    """One background task's retries: how long to wait after a failure, and when to give up."""

    def __init__(self, outages: Outages, what: str, longest: float = LONGEST_RETRY):
        self.outages = outages
        self.what = what
        self.longest = max(FIRST_RETRY, longest)
        self.delay: Optional[float] = None  # the last wait, while failing

    @property
    def failing(self) -> bool:
        return self.delay is not None

    def ok(self) -> None:
        if self.delay is not None:
            self.delay = None
            self.outages.recovered(self.what)

    def failed(self, exc: BaseException) -> float:
        """The wait before the next try; ``CannotGoOn`` when ``exc`` is not transient or lasted too long."""
        if not transient(exc):
            self.outages.recovered(self.what, gave_up=True)
            raise CannotGoOn(self.what, exc) from exc
        seconds = self.outages.failed(self.what, exc)
        if seconds > OUTAGE_LIMIT:
            self.outages.recovered(self.what, gave_up=True)
            raise CannotGoOn(self.what, exc, seconds) from exc
        self.delay = FIRST_RETRY if self.delay is None else min(2 * self.delay, self.longest)
        return self.delay
