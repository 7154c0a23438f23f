"""Watching jobs (JOB-13): one reader per store, however many watchers.

Each watcher registers the job it follows. On every change of the store (a
commit here, or another process's commit seen by the notifier) and when the
clock jumps, one thread reads every watched job in one query, and the place
(``ahead``) of every watched waiting job in one more per queue, and hands
each watcher the states that changed. A job that is gone was cancelled when
a cancel marked it, else it was done and removed at once.
"""

from __future__ import annotations

import asyncio
import queue as queue_module
import threading
from dataclasses import replace
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Iterable, Iterator, Optional

from ._errors import Closed
from ._jobstate import JobState, state_of
from .backends._base import JobRow

if TYPE_CHECKING:
    from ._queue import Queue
    from ._store import Store

ENDED = ("done", "failed", "cancelled")


class _Watcher:
    def __init__(self, queue: "Queue", seq: int, deliver: Callable[[JobState], None]):
        self.queue = queue
        self.seq = seq
        self.deliver = deliver
        self.last: Optional[JobState] = None
        self.seen: Any = None  # what ``last`` was read from: (row, due, ahead)


class Watches:
    def __init__(self, store: "Store"):
        self._store = store
        self._watchers: set[_Watcher] = set()
        self._lock = threading.Lock()
        self._poke = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._closed = False

    def _listen(self, external: bool = False) -> None:
        self._poke.set()

    def _add(self, watcher: _Watcher) -> None:
        with self._lock:
            self._watchers.add(watcher)
            if self._thread is None:
                self._store._notifier.subscribe(self._listen)
                self._thread = threading.Thread(target=self._loop, name="tinystore-watch", daemon=True)
                self._thread.start()

    def _remove(self, watcher: _Watcher) -> None:
        with self._lock:
            self._watchers.discard(watcher)

    def close(self) -> None:
        """End every watch: each watcher's next step raises Closed."""
        self._closed = True
        self._poke.set()
        if self._thread is not None:
            self._store._notifier.unsubscribe(self._listen)
            self._thread.join()
        with self._lock:
            watchers, self._watchers = list(self._watchers), set()
        for w in watchers:
            try:
                w.deliver(None)
            except RuntimeError:  # an async watcher's loop was closed: nobody reads it
                pass

    def _received(self, state: Optional[JobState]) -> JobState:
        if state is None:
            raise Closed(f"the store {self._store.path!r} was closed while this job was watched")
        return state

    def _first(self, queue: "Queue", id: str) -> Optional[tuple[int, JobState]]:
        now = self._store.clock.now()
        row = queue._visible(self._store._backend.get(queue.name, id), now)
        if row is None:
            return None
        state = queue._state(row, now)
        state.ahead  # read now, so that later changes of ahead are seen as changes
        return row.seq, state

    def _loop(self) -> None:
        while not self._closed:
            self._poke.wait(timeout=self._next_due())
            self._poke.clear()
            if not self._closed:
                self._refresh()

    def _next_due(self) -> Optional[float]:
        """Real seconds until a scheduled watched job becomes due (its state changes with time)."""
        with self._lock:
            times = [w.last.at.timestamp() for w in self._watchers if w.last and w.last.state == "scheduled"]
        return max(0.0, min(times) - self._store.clock.now()) if times else None

    def _refresh(self) -> None:
        with self._lock:
            watchers = list(self._watchers)
        if not watchers:
            return
        backend, now = self._store._backend, self._store.clock.now()
        rows = backend.get_many(sorted({w.seq for w in watchers}))
        ahead = self._ahead(rows.values(), now)
        states: dict[int, JobState] = {}
        for w in watchers:
            row = rows.get(w.seq)
            seen = (row, row is not None and row.at <= now, ahead.get(w.seq, 0))
            if row is not None and seen == w.seen:
                continue  # nothing it shows changed since this watcher's last look
            state = states.get(w.seq)
            if state is None:
                if row is not None:
                    state = state_of(row, now, w.queue.options.attempts, seen[2])
                elif w.last is not None:
                    state = replace(w.last, state="cancelled" if backend.was_cancelled(w.seq) else "done",
                                    progress=None, _ahead=0)
                else:
                    continue
                states[w.seq] = state
            w.seen = seen
            if w.last is None or state.watched() != w.last.watched():
                w.last = state
                try:
                    w.deliver(state)
                except RuntimeError:  # an async watcher's event loop was closed: nobody reads it any more
                    self._remove(w)

    def _ahead(self, rows: Iterable[JobRow], now: float) -> dict[int, int]:
        """The place of every watched waiting job, by seq: one query per queue, not one per job."""
        waiting: dict[str, list[JobRow]] = {}
        for row in rows:
            if row.state == "queued" and row.at <= now:
                waiting.setdefault(row.queue, []).append(row)
        ahead: dict[int, int] = {}
        for queue, some in waiting.items():
            ahead.update(self._store._backend.ahead_many(queue, some, now))
        return ahead

    def _start(self, queue: "Queue", id: str, deliver: Callable[[JobState], None]) -> tuple[Any, Any]:
        """Read the job as it is and register a watcher of it; (None, None) where there is no such job."""
        first = self._first(queue, id)
        if first is None:
            return None, None
        seq, state = first
        watcher = _Watcher(queue, seq, deliver)
        watcher.last = state
        self._add(watcher)
        self._poke.set()  # catch a change made between the first read and the registration
        return watcher, state

    def watch(self, queue: "Queue", id: str) -> Iterator[JobState]:
        inbox: "queue_module.SimpleQueue[JobState]" = queue_module.SimpleQueue()
        watcher, state = self._start(queue, id, inbox.put)
        if watcher is None:
            return
        try:
            yield state
            while state.state not in ENDED:
                state = self._received(inbox.get())
                yield state
        finally:
            self._remove(watcher)

    async def watch_async(self, queue: "Queue", id: str) -> AsyncIterator[JobState]:
        loop = asyncio.get_running_loop()
        inbox: "asyncio.Queue[JobState]" = asyncio.Queue()
        watcher, state = self._start(queue, id, lambda s: loop.call_soon_threadsafe(inbox.put_nowait, s))
        if watcher is None:
            return
        try:
            yield state
            while state.state not in ENDED:
                state = self._received(await inbox.get())
                yield state
        finally:
            self._remove(watcher)
