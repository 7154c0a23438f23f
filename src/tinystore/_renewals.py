"""Lease renewals, on a thread of the worker's own: a handler that blocks the worker's loop cannot stop them.

Every lease/2 (the shortest lease of the worker's queues, as the store keeps
them) the thread renews the leases of the attempts the worker runs, one
``backend.renew`` per queue, and waits until it is committed. A lease that is
no longer held at the attempt's number (its job was cancelled, in any process,
or its lease ended and the job was claimed again) takes its attempt away: its
handler is told to stop, on the worker's loop once that loop runs again. A
process that learns it was found dead renews at once (``renew_now``).
Through an outage it retries; an attempt whose lease would run out before the
next try is told to stop (``run.cancelled``), and the job runs again elsewhere.
A clock that jumps past a lease's end before this thread has heard of it is
caught by the runner: each claim cycle first renews, on the worker's loop,
the leases that have run out by the clock (``renew(runner, overdue_only=True)``).

The thread runs an event loop of its own, so that it waits on the store's
clock as the worker does (a ``FakeClock`` moves it too) and hears stalls of
the worker's loop (``_stalls``). A stopped process (SIGSTOP) stops this thread
with it and a dead one takes it along: their leases run out, or the next open
ends them, as before (DUR-03).

An ``async def`` handler past its timeout is cancelled by the worker's loop;
a loop that cannot do it (a handler blocks it, or ignores the cancel) must not
keep the job for ever: its lease is renewed until its handler began more than
its queue's timeout plus one lease ago (a blocked loop that frees itself
within that lease still settles the timeout itself), then it runs out and
another process takes the job, whose late answer settles nothing (JOB-05). A
``def`` handler keeps its lease past its timeout until its thread returns,
as JOB-09 promises (its place against the limits); ``timeout=None`` has no end.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import TYPE_CHECKING, Any, Callable, Optional

from ._attempt import Attempt
from ._errors import Closed
from ._events import fields
from ._outage import LONGEST_RETRY, CannotGoOn, Retrying
from ._run import written
from ._stalls import Stalls

if TYPE_CHECKING:
    from ._context import Context
    from ._runner import QueueRunner

log = logging.getLogger("tinystore.worker")


class Renewals:
    """The renewals' thread of one worker: ``start`` it on the worker's loop, ``stop`` it there.

    ``take_away(runner, attempt)`` and ``fail(CannotGoOn)`` are the worker's,
    called on its loop; ``attempt_of(task)`` names the attempt an asyncio task
    of the worker's loop runs, from any thread.
    """

    def __init__(self, ctx: "Context", runners: list["QueueRunner"], take_away: Callable[["QueueRunner", Attempt], None],
                 fail: Callable[[CannotGoOn], None], attempt_of: Callable[[Any], Optional[tuple[str, Attempt]]]):
        self.ctx = ctx
        self.runners = runners
        self.take_away = take_away
        self.fail = fail
        self.attempt_of = attempt_of
        self.worker_loop: Optional[asyncio.AbstractEventLoop] = None
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        self.tasks: list[asyncio.Task[Any]] = []
        self.stalls: Optional[Stalls] = None
        self.thread: Optional[threading.Thread] = None

    def start(self) -> None:
        """Start renewing, and hearing stalls of the worker's loop (the one this is called on)."""
        self.worker_loop = asyncio.get_running_loop()
        self.stalls = Stalls(self.worker_loop, self.attempt_of)
        self.stalls.start()
        ready = threading.Event()
        self.thread = threading.Thread(target=self._thread, args=(ready,), name="tinystore-renewals", daemon=True)
        self.thread.start()
        ready.wait()

    def stop(self) -> None:
        """Stop renewing; the thread ends once its write in flight (if any) has returned. Not waited for."""
        if self.stalls is not None:
            self.stalls.stop()
        if self.loop is not None:
            try:
                self.loop.call_soon_threadsafe(self._cancel)
            except RuntimeError:  # its loop already ended (a task could not go on)
                pass

    def _cancel(self) -> None:
        for task in self.tasks:
            task.cancel()

    def _thread(self, ready: threading.Event) -> None:
        async def main() -> None:
            self.loop = asyncio.get_running_loop()
            assert self.stalls is not None
            self.tasks = [asyncio.ensure_future(self._renew()), asyncio.ensure_future(self.stalls.watch())]
            ready.set()
            await asyncio.wait(self.tasks)
        asyncio.run(main())

    def _tell(self, fn: Callable[..., Any], *args: Any) -> None:
        """Call ``fn(*args)`` on the worker's loop, once it runs again."""
        assert self.worker_loop is not None
        try:
            self.worker_loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the worker's loop closed: nobody serves any more
            pass

    def renew_now(self) -> None:
        """Renew every lease now, on the renewals' thread (called from any thread): a lease no longer held
        takes its attempt away (this process was found dead, and its leases ended). A renewal that fails
        is tried again at the next one."""
        if self.loop is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self._renew_all(), self.loop).add_done_callback(self._renewed_now)
        except RuntimeError:  # its loop already ended
            pass

    @staticmethod
    def _renewed_now(done: Any) -> None:
        if not done.cancelled() and done.exception() is not None:
            log.debug("renewing every lease at once failed: %s", done.exception())

    def _shortest(self) -> float:
        return min(r.options.lease for r in self.runners)

    async def _renew(self) -> None:
        clock = self.ctx.clock
        retrying = Retrying(self.ctx.outages, "lease renewals", longest=min(LONGEST_RETRY, self._shortest() / 8))
        wait = self._shortest() / 2
        while True:
            if retrying.failing:
                await asyncio.sleep(wait)  # real seconds: a full disk is not on the store's clock
            else:
                await clock.sleep(wait)
            try:
                await self._renew_all()
            except Closed:
                return
            except Exception as exc:
                try:
                    wait = retrying.failed(exc)
                except CannotGoOn as stop:
                    self._tell(self.fail, stop)
                    return
                self._lapse(retrying.longest)
                continue
            retrying.ok()
            wait = self._shortest() / 2

    async def _renew_all(self) -> None:
        for r in self.runners:
            await self.renew(r)

    async def renew(self, r: "QueueRunner", overdue_only: bool = False) -> None:
        """Renew ``r``'s running leases (with ``overdue_only``, those whose lease has run out by the clock,
        unless renewed meanwhile); an attempt whose lease is no longer held is taken away. On any loop."""
        now = self.ctx.clock.now()
        attempts = [a for a in r.attempts() if (not overdue_only or a.lease_ends <= now) and self._renews(r, a, now)]
        if not attempts:
            return
        expires = now + r.options.lease
        held = await written(self.ctx.backend.renew(r.queue.name, self.ctx.owner, expires, [a.seq for a in attempts]))
        for a in attempts:
            if a.key in held:  # by attempt: an older attempt of the job is not held by the newer one's lease
                a.lease_ends = max(a.lease_ends, expires)
            elif not a.taken_away:
                self._take_away(r, a)

    def _renews(self, r: "QueueRunner", a: Attempt, now: float) -> bool:
        """Whether ``a``'s lease is renewed now: not once an async handler is a lease past its timeout."""
        timeout = r.options.timeout
        if a.taken_away or not a.renewed or not r.is_async or timeout is None:
            return a.renewed and not a.taken_away
        since = a.began if a.began is not None else a.started
        if now < since + timeout + r.options.lease:
            return True
        a.renewed = False
        log.warning("%s/%s attempt %d ran past the queue's timeout of %gs and the worker's loop has not ended it "
                    "(a handler blocks the loop, or ignores its cancellation): its lease is no longer renewed, "
                    "so another worker runs the job once it runs out", r.queue.name, a.claimed.id, a.claimed.attempt,
                    timeout, extra=fields(r.queue.name, a.claimed.id, a.claimed.attempt))
        return False

    def _take_away(self, r: "QueueRunner", a: Attempt) -> None:
        a.take_away()  # at once: run.cancelled turns true now, even while the worker's loop is blocked
        self._tell(self.take_away, r, a)

    def _lapse(self, margin: float) -> None:
        """Renewals keep failing: an attempt whose lease runs out before the next try is told to stop
        (``run.cancelled``); another process may take its job once it has, and its answer settles nothing."""
        now = self.ctx.clock.now()
        for r in self.runners:
            for a in r.attempts():
                if now + margin >= a.lease_ends and not a.taken_away:
                    log.warning("%s/%s attempt %d: its lease could not be renewed and runs out in %.1fs; its "
                                "handler is told to stop (run.cancelled), and the job runs again",
                                r.queue.name, a.claimed.id, a.claimed.attempt, max(0.0, a.lease_ends - now),
                                extra=fields(r.queue.name, a.claimed.id, a.claimed.attempt))
                    self._take_away(r, a)
