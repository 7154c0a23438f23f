"""Hearing that the store changed: one subscription to the backend, told to every worker and watcher.

The backend tells each commit as a ``Notice`` (which queues got work, which
jobs were cancelled): its own process's at once, other connections' as it
hears of them (a poll on SQLite, LISTEN/NOTIFY on PostgreSQL). This module
fans that out to the subscribers of a store, starts the backend's hearing
when the first one subscribes, and rides out a store it cannot read for a
while (``_outage``); when hearing cannot go on, every subscriber's
``on_failure`` is told why.
"""

from __future__ import annotations

import threading
from typing import Callable, Optional

from ._outage import CannotGoOn, Outages, Retrying
from .backends._base import Backend, Notice

Listener = Callable[[Notice], None]
OnFailure = Callable[[CannotGoOn], None]
EVERYTHING = Notice(everything=True)


class Notices:
    def __init__(self, backend: Backend, outages: Outages):
        self._backend = backend
        self._outages = outages
        self._listeners: dict[Listener, Optional[OnFailure]] = {}
        self._lock = threading.Lock()
        self._hearing = False
        self._retrying = Retrying(outages, "hearing of other processes' commits")
        self.failure: Optional[CannotGoOn] = None

    def subscribe(self, listener: Listener, on_failure: Optional[OnFailure] = None) -> None:
        with self._lock:
            self._listeners[listener] = on_failure
            failure = self.failure
            start = failure is None and not self._hearing
            self._hearing = self._hearing or start
        if start:
            self._backend.listen(self._heard, self._failed)
        if failure is not None and on_failure is not None:
            on_failure(failure)

    def unsubscribe(self, listener: Listener) -> None:
        with self._lock:
            self._listeners.pop(listener, None)

    def fire(self, notice: Notice = EVERYTHING) -> None:
        """Tell every subscriber (the clock moved: any queue may have work, any watched job changed)."""
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener(notice)

    def _heard(self, notice: Notice) -> None:
        if self._retrying.failing:
            self._retrying.ok()
        if self._listeners:
            self.fire(notice)

    def _failed(self, exc: BaseException) -> Optional[float]:
        """The backend could not hear: how long to wait before it tries again, or None when it must stop."""
        try:
            return self._retrying.failed(exc)
        except CannotGoOn as stop:
            with self._lock:
                self.failure = stop
                told = [f for f in self._listeners.values() if f is not None]
            for on_failure in told:
                on_failure(stop)
            return None
