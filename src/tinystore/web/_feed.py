"""One change feed per app: the store's notices, read once, told to every browser that looks.

A browser that opens the event stream names what it shows (a view: the
queues, a page of jobs, one job). One thread reads each view that someone
looks at, once, and tells each of its browsers what changed since it last
told them: so a hundred browsers on the same job cost one read of it. A
browser slower than the changes is told only the latest of each.

It reads when the store says it may have changed (``store.on_change``),
never more often than every ``MIN_GAP`` seconds (a burst of commits is one
read), nor more often than its last read's cost allows (a read that took
0.2 s waits 0.8 s before the next). A job that ends under no limit may be
told by no notice, so it also reads every ``REFRESH`` seconds while anyone
looks. Nobody looking, the thread ends and the store is not read at all.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from typing import Any, Callable, Hashable, Optional

from .._errors import Closed, Error
from .._store import Store
from ._views import NotFound

log = logging.getLogger("tinystore.web")

MIN_GAP = 0.3
REFRESH = 3.0
COST_SHARE = 4  # wait at least this many times the last read's cost: reading stays a fifth of the time

Read = Callable[[], Any]
Views = dict[str, tuple[Hashable, Read]]  # event name -> (the view's key, its read)


class Subscriber:
    """One browser's stream: what it looks at, what it was told last, and what waits to be sent."""

    def __init__(self, views: Views):
        self.views = views
        self.told: dict[str, str] = {}  # by the feed's thread only
        self.loop = asyncio.get_running_loop()
        self.ended = False
        self._pending: dict[str, str] = {}  # on the loop only: the latest of each event not yet sent
        self._ready = asyncio.Event()

    async def next(self, timeout: float) -> Optional[list[tuple[str, str]]]:
        """What changed since the last call, waiting for it at most ``timeout`` seconds (then None)."""
        try:
            await asyncio.wait_for(self._ready.wait(), timeout)
        except asyncio.TimeoutError:
            return None
        self._ready.clear()
        items, self._pending = list(self._pending.items()), {}
        return items

    def deliver(self, event: str, text: str) -> None:
        self._pending[event] = text
        self._ready.set()

    def finish(self) -> None:
        self.ended = True
        self._ready.set()


class Feed:
    def __init__(self, store: Store):
        self._store = store
        self._subscribers: set[Subscriber] = set()
        self._lock = threading.Lock()
        self._changed = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def subscribe(self, views: Views) -> Subscriber:
        """A stream of each of ``views`` as JSON text, first as it is, then at each change; called on the
        event loop that reads it."""
        subscriber = Subscriber(views)
        with self._lock:
            self._subscribers.add(subscriber)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="tinystore-web-feed", daemon=True)
                self._thread.start()
        self._changed.set()
        return subscriber

    def unsubscribe(self, subscriber: Subscriber) -> None:
        with self._lock:
            self._subscribers.discard(subscriber)

    def _run(self) -> None:
        try:
            stop = self._store.on_change(self._changed.set)
        except Error as exc:
            self._end(exc)
            return
        try:
            while True:
                self._changed.wait(REFRESH)
                self._changed.clear()
                with self._lock:
                    if not self._subscribers:
                        self._thread = None
                        return
                    subscribers = list(self._subscribers)
                began = time.monotonic()
                self._publish(subscribers)
                time.sleep(max(MIN_GAP, COST_SHARE * (time.monotonic() - began)))  # a burst is one read
        except Exception as exc:  # the store closed, or a bug: every stream ends, saying why
            if not isinstance(exc, Closed):
                log.exception("the dashboard's feed stopped")
            self._end(exc)
        finally:
            stop()

    def _end(self, exc: Exception) -> None:
        with self._lock:
            subscribers, self._subscribers, self._thread = list(self._subscribers), set(), None
        for s in subscribers:
            self._call(s, s.deliver, "trouble", json.dumps({"error": str(exc)}))
            self._call(s, s.finish)

    def _publish(self, subscribers: list[Subscriber]) -> None:
        """Read each view someone looks at once; tell each subscriber what differs from what it was told."""
        read: dict[Hashable, str] = {}
        for s in subscribers:
            for event, (key, fn) in s.views.items():
                if key not in read:
                    read[key] = _read(fn)
                text = read[key]
                if s.told.get(event) != text:
                    s.told[event] = text
                    self._call(s, s.deliver, event, text)

    def _call(self, s: Subscriber, fn: Callable[..., None], *args: Any) -> None:
        try:
            s.loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # its server's event loop has ended: nobody reads this stream
            self.unsubscribe(s)


def _read(fn: Read) -> str:
    """A view as JSON text; what could not be read, as the error the page shows."""
    try:
        return json.dumps(fn())
    except Closed:
        raise
    except NotFound as exc:
        return json.dumps({"gone": str(exc)})
    except Error as exc:  # the store cannot be read for a while: say so, and read again later
        log.warning("dashboard: %s", exc)
        return json.dumps({"error": str(exc)})
