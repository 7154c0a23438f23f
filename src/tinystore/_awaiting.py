"""One implementation for a call and its ``_async`` twin.

A call that waits for the database is written once, as a generator of
steps: it yields what it waits for and gets its answer back. A write is
the backend's ``concurrent.futures.Future`` (resolved once committed); a
read is a callable that runs it. ``resolved`` drives the steps for a sync
caller, on its own thread; ``awaited`` drives them for ``await``: the
checks and the building of the answer run on the loop, a read runs in a
thread of the loop's executor, and a write is handed to the backend's
writer thread (``backends._handoff``) and awaited through its future, so
that the loop never waits for the disk, the write lock or the server
(ASY-01).

A task cancelled while it awaits a write takes it back where the writer
has not begun it (nothing is written); else the task ends once the write
has committed whole or failed, so that when a cancelled task is done, ``get``
says whether its job exists, and no write of it is still under way (ASY-02).
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Future
from typing import Any, Callable, Generator, TypeVar

from .backends._handoff import handed_off

T = TypeVar("T")
Steps = Generator[Any, Any, T]  # yields a Future (a write) or a callable (a read); returns the answer


def resolved(steps: "Steps[T]") -> T:
    """The answer of ``steps``, each waited for on this thread."""
    answer: Any = None
    error: "BaseException | None" = None
    while True:
        try:
            wait = steps.send(answer) if error is None else steps.throw(error)
        except StopIteration as stop:
            value: T = stop.value
            return value
        try:
            answer, error = (wait.result() if isinstance(wait, Future) else wait()), None
        except Exception as exc:
            answer, error = None, exc


async def awaited(steps: "Steps[T]") -> T:
    """The answer of ``steps``, each awaited without blocking the running loop."""
    loop = asyncio.get_running_loop()
    answer: Any = None
    error: "BaseException | None" = None
    while True:
        try:
            with handed_off():  # a write it submits goes to the writer thread, not this one
                wait = steps.send(answer) if error is None else steps.throw(error)
        except StopIteration as stop:
            value: T = stop.value
            return value
        try:
            if isinstance(wait, Future):
                answer = await _written(wait)
            else:
                answer = await loop.run_in_executor(None, wait)
            error = None
        except Exception as exc:
            answer, error = None, exc


async def _written(future: Future[Any]) -> Any:
    """The outcome of a write, awaited; cancelled, it is taken back or waited for (see above)."""
    waiter = awaitable(future)
    try:
        return await asyncio.shield(waiter)
    except asyncio.CancelledError:
        if not future.cancel():  # the writer has begun it: the task ends with the write
            await asyncio.wait([waiter])
        raise


def awaitable(future: Future[Any]) -> "asyncio.Future[Any]":
    """An asyncio future of the running loop with ``future``'s outcome, set from whichever thread resolves it.

    Unlike ``asyncio.wrap_future``, cancelling it leaves ``future`` alone: a write already handed to its
    writer commits whole or not at all, whatever happens to the task that awaited it.
    """
    loop = asyncio.get_running_loop()
    waiter: "asyncio.Future[Any]" = loop.create_future()

    def copy(done: Future[Any]) -> None:
        if waiter.done():  # the awaiting task was cancelled
            return
        exc = done.exception()
        if exc is None:
            waiter.set_result(done.result())
        else:
            waiter.set_exception(exc)

    def told(done: Future[Any]) -> None:
        try:
            loop.call_soon_threadsafe(copy, done)
        except RuntimeError:  # the loop was closed meanwhile: nobody awaits it any more
            pass

    future.add_done_callback(told)
    return waiter

