"""Watching jobs (JOB-13): one reader per store, however many watchers.

A watch first registers its job in the store; from that commit on, every
change of the job (state, time, attempt, error, progress) is logged beside
it, by any process. On every change of the store (a commit here, or another
process's commit seen by the notifier) and when the clock jumps, one thread
reads every watched job and the changes logged since it last looked, in one
snapshot, and the place (``ahead``) of every watched waiting job in one more
query per queue. So a watcher sees each state a job went through, however
fast it moved; only ``ahead`` is read when the watcher looks. A job that left
was cancelled when a cancel marked it, else it was done and removed at once.

The reader rides out a store it cannot read for a while (``_outage``): its
watchers hear nothing meanwhile, then every change. When it cannot go on,
each watcher's next step raises why.
"""

from __future__ import annotations

import asyncio
import json
import queue as queue_module
import threading
import time
from typing import Any, AsyncIterator, Callable, Iterable, Iterator, Optional, Union

from ._context import Context
from ._errors import Closed, InvalidArgument
from ._jobstate import JobState, moved, state_of, visible
from ._outage import CannotGoOn, Retrying
from ._values import from_timestamp
from .backends._base import Change, JobRow

ENDED = ("done", "failed", "cancelled")


Attempts = Callable[[], int]  # the queue's attempts option as this process knows it now, for JobState.attempts


# What a watcher is handed: the job's next state; an error once the reader cannot go on; None once the store closed.
Delivery = Union[JobState, BaseException, None]


class _Watcher:
    def __init__(self, queue: str, attempts: Attempts, seq: int, cursor: int, deliver: Callable[[Delivery], None]):
        self.queue = queue
        self.attempts = attempts
        self.seq = seq
        self.cursor = cursor  # the id of the last change of the job this watcher has seen
        self.deliver = deliver
        self.last: Optional[JobState] = None

    def tell(self, state: JobState) -> bool:
        """Deliver ``state`` where it differs from the last one; False once nobody reads this watcher."""
        if self.last is not None and state.watched() == self.last.watched():
            return True
        self.last = state
        try:
            self.deliver(state)
        except RuntimeError:  # an async watcher's event loop was closed: nobody reads it any more
            return False
        return True


class Watches:
    def __init__(self, ctx: Context):
        self._ctx = ctx
        self._watchers: set[_Watcher] = set()
        self._lock = threading.Lock()
        self._poke = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._closed = False
        self._stopped: Optional[CannotGoOn] = None  # the notifier could not go on

    def _listen(self, notice: Any = None) -> None:
        self._poke.set()

    def _add(self, watcher: _Watcher) -> None:
        with self._lock:
            self._watchers.add(watcher)
            if self._thread is None:
                self._ctx.notices.subscribe(self._listen, self._notifier_failed)
                self._thread = threading.Thread(target=self._loop, name="tinystore-watch", daemon=True)
                self._thread.start()

    def _notifier_failed(self, stop: CannotGoOn) -> None:
        self._stopped = stop
        self._poke.set()

    def _remove(self, watcher: _Watcher) -> None:
        with self._lock:
            self._watchers.discard(watcher)
            still = any(w.seq == watcher.seq for w in self._watchers)
        if not still:
            try:
                self._ctx.backend.watch_end(self._ctx.owner, watcher.seq)  # not waited for
            except Closed:
                pass  # closing the store ends its process's watches

    def close(self) -> None:
        """End every watch: each watcher's next step raises Closed."""
        self._closed = True
        self._poke.set()
        if self._thread is not None:
            self._ctx.notices.unsubscribe(self._listen)
            self._thread.join()
        with self._lock:
            watchers, self._watchers = list(self._watchers), set()
        for w in watchers:
            try:
                w.deliver(None)
            except RuntimeError:  # an async watcher's loop was closed: nobody reads it
                pass

    def _received(self, state: Delivery) -> JobState:
        if state is None:
            raise Closed(f"the store {self._ctx.backend.location!r} was closed while this job was watched")
        if isinstance(state, BaseException):
            raise state
        return state

    def _first(self, queue: str, attempts: Attempts, id: str) -> Optional[tuple[int, int, JobState]]:
        """Register the job as watched, then read it: every change after that read is logged.

        A job that left between the first read and the registration (it ran
        that fast) is told as first read, then, by the reader, as it ended.
        """
        ctx = self._ctx
        ctx.check_open()
        row = visible(ctx.backend.get(queue, id), ctx.clock.now())
        if row is None:
            return None
        ctx.backend.watch_begin(ctx.owner, row.seq).result()
        watched = ctx.backend.watched({row.seq: 0})
        cursor = watched.changes[-1].id if watched.changes else 0  # its changes so far are what the row shows
        now = ctx.clock.now()
        row = visible(watched.rows.get(row.seq), now) or row
        # ahead read now, so that later changes of ahead are seen as changes
        state = state_of(row, now, attempts(), self._ahead([row], now).get(row.seq, 0))
        return row.seq, cursor, state

    def _loop(self) -> None:
        retrying = Retrying(self._ctx.outages, "watching jobs")
        wait: Optional[float] = None
        while not self._closed:
            self._poke.wait(timeout=wait if wait is not None else self._next_due())
            self._poke.clear()
            if self._closed:
                return
            try:
                if self._stopped is not None:
                    raise self._stopped
                self._refresh()
            except Closed:
                return
            except Exception as exc:
                try:
                    if isinstance(exc, CannotGoOn):
                        raise exc
                    wait = retrying.failed(exc)
                except CannotGoOn as stop:
                    self._end_all(stop.error)
                    return
                continue
            retrying.ok()
            wait = None

    def _end_all(self, error: BaseException) -> None:
        """The reader cannot go on: every watcher's next step raises ``error``; a new watch starts anew."""
        with self._lock:
            watchers, self._watchers = list(self._watchers), set()
            self._thread = None
            self._stopped = None
        self._ctx.notices.unsubscribe(self._listen)
        for w in watchers:
            try:
                w.deliver(error)
            except RuntimeError:  # an async watcher's loop was closed: nobody reads it
                pass

    def _next_due(self) -> Optional[float]:
        """Real seconds until a scheduled watched job becomes due (its state changes with time)."""
        with self._lock:
            times = [w.last.at.timestamp() for w in self._watchers if w.last and w.last.state == "scheduled"]
        return max(0.0, min(times) - self._ctx.clock.now()) if times else None

    def _refresh(self) -> None:
        with self._lock:
            watchers = list(self._watchers)
        if not watchers:
            return
        cursors: dict[int, int] = {}
        for w in watchers:
            cursors[w.seq] = min(w.cursor, cursors.get(w.seq, w.cursor))
        watched = self._ctx.backend.watched(cursors)
        rows = watched.rows
        now = self._ctx.clock.now()
        ahead = self._ahead(rows.values(), now)
        by_job: dict[int, list[Change]] = {}
        for change in watched.changes:
            by_job.setdefault(change.job, []).append(change)
        for w in watchers:
            if not self._tell(w, [c for c in by_job.get(w.seq, ()) if c.id > w.cursor], rows.get(w.seq),
                              ahead.get(w.seq, 0), now):
                self._remove(w)

    def _tell(self, w: _Watcher, changes: list[Change], row: Optional[JobRow], ahead: int, now: float) -> bool:
        """Tell a watcher each state its job went through since it last looked, then the state it is in."""
        assert w.last is not None
        if changes:
            w.cursor = changes[-1].id
        for change in changes[:-1]:  # the last change is what the row is now
            if not w.tell(_state_at(w.last, change, now)):
                return False
        if row is not None:
            return w.tell(state_of(row, now, w.attempts(), ahead))
        # It left: cancelled where a cancel marked it, else done and removed at once, by the attempt
        # its removal logged.
        final = moved(w.last, progress=None)
        if self._ctx.backend.was_cancelled(w.seq):
            return w.tell(moved(final, state="cancelled"))
        if changes and changes[-1].state is None:
            final = moved(final, attempt=changes[-1].attempt, error=None)
        return w.tell(moved(final, state="done", error=None))

    def _ahead(self, rows: Iterable[JobRow], now: float) -> dict[int, int]:
        """The place of every watched waiting job, by seq: one query per queue, not one per job."""
        waiting: dict[str, list[JobRow]] = {}
        for row in rows:
            if row.state == "queued" and row.at <= now:
                waiting.setdefault(row.queue, []).append(row)
        ahead: dict[int, int] = {}
        for queue, some in waiting.items():
            ahead.update(self._ctx.backend.ahead_many(queue, some, now))
        return ahead

    def _start(self, queue: str, attempts: Attempts, id: str,
               deliver: Callable[[Delivery], None]) -> Optional[tuple[_Watcher, JobState]]:
        """Read the job as it is and register a watcher of it; None where there is no such job."""
        first = self._first(queue, attempts, id)
        if first is None:
            return None
        seq, cursor, state = first
        watcher = _Watcher(queue, attempts, seq, cursor, deliver)
        watcher.last = state
        self._add(watcher)
        self._poke.set()  # catch a change made between the first read and the registration
        return watcher, state

    def watch(self, queue: str, attempts: Attempts, id: str) -> Iterator[JobState]:
        """The job ``id`` of ``queue`` as it is, then each change, until it ended (``queue.watch``)."""
        inbox: "queue_module.SimpleQueue[Delivery]" = queue_module.SimpleQueue()
        started = self._start(queue, attempts, id, inbox.put)
        if started is None:
            return
        watcher, state = started
        try:
            yield state
            while state.state not in ENDED:
                state = self._received(inbox.get())
                yield state
        finally:
            self._remove(watcher)

    def wait(self, queue: str, attempts: Attempts, id: str, timeout: Optional[float]) -> Optional[JobState]:
        """The job's last state once it ended (``queue.wait``); None where there is no such job."""
        inbox: "queue_module.SimpleQueue[Delivery]" = queue_module.SimpleQueue()
        started = self._start(queue, attempts, id, inbox.put)
        if started is None:
            return None
        watcher, state = started
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            _check_ends(queue, state)
            while state.state not in ENDED:
                left = None if deadline is None else deadline - time.monotonic()
                try:
                    if left is not None and left <= 0:
                        raise queue_module.Empty
                    state = self._received(inbox.get(timeout=left))
                except queue_module.Empty:
                    raise TimeoutError(f"job {id!r} of queue {queue!r} had not ended after {timeout:g}s; "
                                       f"it is {state.state}") from None
            return state
        finally:
            self._remove(watcher)

    async def wait_async(self, queue: str, attempts: Attempts, id: str, timeout: Optional[float]) -> Optional[JobState]:
        async def last() -> Optional[JobState]:
            state = None
            async for state in self.watch_async(queue, attempts, id):
                _check_ends(queue, state)
            return state
        try:
            return await asyncio.wait_for(last(), timeout)
        except asyncio.TimeoutError:
            raise TimeoutError(f"job {id!r} of queue {queue!r} had not ended after {timeout:g}s") from None

    async def watch_async(self, queue: str, attempts: Attempts, id: str) -> AsyncIterator[JobState]:
        loop = asyncio.get_running_loop()
        inbox: "asyncio.Queue[Delivery]" = asyncio.Queue()

        def deliver(delivery: Delivery) -> None:
            loop.call_soon_threadsafe(inbox.put_nowait, delivery)
        # Its first reads and the registration run in a thread: the loop runs other handlers meanwhile.
        started = await loop.run_in_executor(None, self._start, queue, attempts, id, deliver)
        if started is None:
            return
        watcher, state = started
        try:
            yield state
            while state.state not in ENDED:
                state = self._received(await inbox.get())
                yield state
        finally:
            self._remove(watcher)


def _check_ends(queue: str, state: JobState) -> None:
    """A repeating job never ends (it waits for its next time after each run): waiting for it is refused."""
    if state.repeat is not None:
        raise InvalidArgument(f"the job repeats ({state.repeat}) and never ends: watch it instead of waiting",
                              queue=queue, job_id=state.id)


def _state_at(last: JobState, change: Change, now: float) -> JobState:
    """The job as one logged change left it, from the last state told (its id, payload and group stay)."""
    state = "done" if change.state is None else change.state
    if state == "queued":
        state = "scheduled" if change.at > now else "waiting"
    progress = json.loads(change.progress) if change.progress is not None else None
    return moved(last, state=state, at=from_timestamp(change.at), attempt=change.attempt, error=change.error,
                 progress=progress)
