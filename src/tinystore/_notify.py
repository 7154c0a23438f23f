"""How waiting workers and watchers hear that the store changed.

A commit in this process tells them at once, with the queues it changed
(a notice: ``{queue: source}``, the source being whoever asked for the write,
or None), so that a worker wakes only the runners of those queues. A commit
by another connection (another process, the application's own connection,
a ``store.transaction()``) is noticed by polling ``PRAGMA data_version`` of
the writer's connection every few milliseconds: a read of one integer from
shared memory, never a query of the jobs table, and one poll per store
however many workers and watchers wait on it. Such a notice cannot say which
queues changed: it is ``None``, and a worker then asks the store which of its
idle runners have work (see ``Worker._check_due``).

The poll rides out a store it cannot read for a while (``_outage``); when
it cannot go on, every subscriber's ``on_failure`` is told why.
"""

from __future__ import annotations

import threading
from typing import Callable, Optional

from ._outage import CannotGoOn, Outages, Retrying

POLL_INTERVAL = 0.002

Notice = Optional[dict]  # {queue: source, or None for several}; None when it cannot say which queues
Listener = Callable[[Notice], None]
OnFailure = Callable[[CannotGoOn], None]


class Notifier:
    def __init__(self, changed: Callable[[], bool], outages: Optional[Outages] = None):
        self._changed = changed
        self._listeners: dict[Listener, Optional[OnFailure]] = {}
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        self._outages = outages or Outages()
        self.failure: Optional[CannotGoOn] = None

    def subscribe(self, listener: Listener, on_failure: Optional[OnFailure] = None) -> None:
        with self._lock:
            self._listeners[listener] = on_failure
            failure = self.failure
            if failure is None and self._thread is None and not self._closed.is_set():
                self._thread = threading.Thread(target=self._poll, name="tinystore-notifier", daemon=True)
                self._thread.start()
        if failure is not None and on_failure is not None:
            on_failure(failure)

    def unsubscribe(self, listener: Listener) -> None:
        with self._lock:
            self._listeners.pop(listener, None)

    def fire(self, notice: Notice = None) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener(notice)

    def committed_here(self, notice: Notice) -> None:
        """A commit of this process's writer, with the queues it changed: tell everyone now."""
        if self._listeners:
            self.fire(notice)

    def close(self) -> None:
        self._closed.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def _poll(self) -> None:
        retrying = Retrying(self._outages, "hearing of other processes' commits")
        wait = POLL_INTERVAL
        while not self._closed.wait(wait):
            wait = POLL_INTERVAL
            if not self._listeners:
                continue
            try:
                changed = self._changed()
            except Exception as exc:
                try:
                    wait = retrying.failed(exc)
                except CannotGoOn as stop:
                    self._fail(stop)
                    return
                continue
            retrying.ok()
            if changed:
                self.fire(None)

    def _fail(self, stop: CannotGoOn) -> None:
        with self._lock:
            self.failure = stop
            self._thread = None
            told = [f for f in self._listeners.values() if f is not None]
        for on_failure in told:
            on_failure(stop)
