"""A lane: the thread of its own that one ``store.transaction_async()`` runs on.

A store's transaction belongs to the thread that opened it (its SQLite
connection, its pooled PostgreSQL connection), and each of its statements
may wait for the disk, the write lock or the server. So an async
transaction opens ``store.transaction()`` on a thread of its own and sends
it every call, in order, awaiting each without blocking the loop
(``_awaiting.awaitable``).

Lanes are kept for the next transaction once one ends (``Lanes``): a
store keeps a connection per thread, so a new thread for every transaction
would leave a new connection behind each time. A store has as many lanes as
it once had ``transaction_async`` blocks open at once.

The end of the block (commit, or roll back on an exception, cancellation
included) is sent to the lane like any call, after every call sent before
it: a task cancelled anywhere in the block leaves a transaction that was
committed whole or rolled back whole, never one left open (ASY-02).
"""

from __future__ import annotations

import asyncio
import queue
import threading
from concurrent.futures import Future
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Callable, ContextManager

from ._awaiting import awaitable
from ._transaction import AsyncTransaction, Transaction


class Lane:
    """A thread that runs the calls sent to it one after the other, until it is closed."""

    def __init__(self) -> None:
        self._calls: "queue.SimpleQueue[Any]" = queue.SimpleQueue()
        threading.Thread(target=self._run, name="tinystore-transaction", daemon=True).start()

    def send(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        """Run ``fn(*args)`` on the lane after what was sent before; its outcome."""
        future: Future[Any] = Future()
        self._calls.put((fn, args, future))
        return future

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await awaitable(self.send(fn, *args))

    def close(self) -> None:
        """The lane ends once what was sent before has run."""
        self._calls.put(None)

    def _run(self) -> None:
        while (item := self._calls.get()) is not None:
            fn, args, future = item
            try:
                future.set_result(fn(*args))
            except BaseException as exc:
                future.set_exception(exc)


class Lanes:
    """A store's lanes: one taken for each ``transaction_async`` block, given back when it ends."""

    def __init__(self) -> None:
        self._idle: list[Lane] = []
        self._lock = threading.Lock()
        self._closed = False

    def take(self) -> Lane:
        with self._lock:
            return self._idle.pop() if self._idle else Lane()

    def give(self, lane: Lane) -> None:
        """``lane`` is free once what was sent to it has run."""
        with self._lock:
            if not self._closed:
                self._idle.append(lane)
                return
        lane.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for lane in idle:
            lane.close()


@asynccontextmanager
async def transaction_in_lane(lanes: Lanes,
                              opened: Callable[[], ContextManager[Transaction]]) -> AsyncIterator[AsyncTransaction]:
    """``opened()`` entered on a lane, as an ``AsyncTransaction``; left on the lane too. The task leaves only
    once the lane has committed or rolled back, so that nothing of it is still under way."""
    lane = lanes.take()
    manager = lane.send(opened)
    entered = lane.send(lambda: manager.result().__enter__())
    try:
        tx = await asyncio.shield(awaitable(entered))
    except BaseException:
        # Cancelled (or failed) while it began: once it has begun, it is rolled back on the lane.
        await _leave(lanes, lane, _leave_if_entered, manager, entered)
        raise
    try:
        yield AsyncTransaction(tx, lane.call)
    except BaseException as exc:
        if not await _leave(lanes, lane, manager.result().__exit__, type(exc), exc, exc.__traceback__):
            raise  # rolled back: the block's exception goes on (or the rollback's own error instead)
    else:
        await _leave(lanes, lane, manager.result().__exit__, None, None, None)


async def _leave(lanes: Lanes, lane: Lane, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` on the lane, then the lane given back; its outcome, awaited to its end even if the task
    is cancelled meanwhile (the cancellation is raised after it)."""
    left = lane.send(fn, *args)
    lanes.give(lane)
    waiter = awaitable(left)
    try:
        return await asyncio.shield(waiter)
    except asyncio.CancelledError:
        await asyncio.wait([waiter])
        raise


def _leave_if_entered(manager: Future[Any], entered: Future[Any]) -> None:
    if entered.exception() is None:
        cancelled = BaseException("the task that opened the transaction was cancelled")
        manager.result().__exit__(type(cancelled), cancelled, None)
