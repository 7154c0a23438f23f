"""How waiting workers and watchers hear that the store changed.

A commit in this process tells them at once. A commit by another process is
noticed by polling ``PRAGMA data_version`` every few milliseconds: a read of
one integer from shared memory, never a query of the jobs table, and one
poll per store however many workers and watchers wait on it.
"""

from __future__ import annotations

import threading
from typing import Callable

POLL_INTERVAL = 0.002

Listener = Callable[[bool], None]  # called with external=True for another process's commit


class Notifier:
    def __init__(self, changed: Callable[[], bool]):
        self._changed = changed
        self._listeners: set[Listener] = set()
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    def subscribe(self, listener: Listener) -> None:
        with self._lock:
            self._listeners.add(listener)
            if self._thread is None and not self._closed.is_set():
                self._thread = threading.Thread(target=self._poll, name="tinystore-notifier", daemon=True)
                self._thread.start()

    def unsubscribe(self, listener: Listener) -> None:
        with self._lock:
            self._listeners.discard(listener)

    def fire(self, external: bool = False) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener(external)

    def committed_here(self) -> None:
        """A commit of this process: absorb the change the poll would see, then tell everyone now.

        In this order, another process's commit read while absorbing is told
        too: it is never marked seen without a notice after it.
        """
        if self._listeners:
            self._changed()
            self.fire()

    def close(self) -> None:
        self._closed.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def _poll(self) -> None:
        while not self._closed.wait(POLL_INTERVAL):
            if self._listeners and self._changed():
                self.fire(external=True)
