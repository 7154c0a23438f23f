"""Serving queues: one event loop for every queue of a worker, and what runs beside its runners.

Per queue a ``QueueRunner`` (``_runner``) claims, runs and settles. The
worker hears the store's notices, renews leases from a thread of its own
(``_renewals``, which also hears a handler that blocks the loop), ends the
leases of processes that died, runs maintenance, writes its line per queue
now and then (``_report``), and stops.

Every commit is told as a ``Notice`` (``_notify``), from this process or
another: it wakes only the runners of the queues that got work, and stops
the handlers of jobs that were cancelled, wherever the cancel was made. The
loop reads nothing from the database: writes are awaited (a local SQLite
file may commit one on the loop's thread, see ``backends/_base``), and what a
worker must know (the options kept, the leases still held) comes back with
the result of a write. Every few seconds the worker asks the backend to end
the leases of processes that died (DUR-03); one within its grace is looked
at again as it ends (``_dead``), and ``run_until_idle`` waits for that where
it holds leases of the queues served.

Claim cycles, renewals and maintenance ride out a store that cannot be
written for a while (``_outage``): they retry, logged once per outage. A
renewal that keeps failing until a lease would run out tells that attempt's
handler to stop (``run.cancelled``). A task that cannot go on stops the
worker, and ``serve()`` raises why.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Callable, Optional

from ._attempt import Attempt
from ._budget import ThreadBudget
from ._context import Context
from ._errors import Closed
from ._outage import CannotGoOn, Retrying
from ._renewals import Renewals
from ._report import REPORT_EVERY
from ._runner import QueueRunner
from ._threads import HandlerThreads
from .backends._base import Notice

if TYPE_CHECKING:
    from ._queue import Queue

log = logging.getLogger("tinystore.worker")

HANDLER_THREADS = 64  # def handlers' threads per worker, shared by its queues (more if one queue has more slots)
SETTLE_AFTER_GRACE = 5.0  # how long a stopping worker still tries to write what its handlers answered
LIVENESS_EVERY = 2.0  # seconds between looks for processes that died, whose leases then end at once


class Worker:
    """Serves a store's queues that have handlers, in one event loop."""

    def __init__(self, ctx: Context, queues: list["Queue"], workers: Optional[int] = None, grace: float = 30.0,
                 maintain_every: Optional[float] = None):
        self.ctx = ctx
        self.grace = grace
        self.maintain_every = maintain_every
        self.stopping = asyncio.Event()
        self.giving_up = False  # stopping past the grace period: writes that fail are not tried again
        self.failure: Optional[BaseException] = None
        self.reported = ctx.clock.now()  # when the last lines about the queues were written (``_report``)
        self.runners = [QueueRunner(self, q, workers) for q in queues]
        self.by_queue: dict[str, list[QueueRunner]] = {}
        for r in self.runners:
            self.by_queue.setdefault(r.queue.name, []).append(r)
        sync = [r.slots for r in self.runners if not r.is_async]
        size = min(sum(sync), max([HANDLER_THREADS, *sync])) if sync else 0
        self.budget = ThreadBudget(size)
        self.threads = HandlerThreads(size)
        self.renewals = Renewals(ctx, self.runners, self.take_away, self.fail, self.attempt_of)

    # Hearing of commits

    def _listen(self) -> Callable[[Notice], None]:
        loop = asyncio.get_running_loop()

        def changed(notice: Notice) -> None:
            if notice.ended:
                self.renewals.renew_now()  # at once, not at the next renewal: the ended leases' handlers stop
            if not (notice.queues or notice.cancelled or notice.everything or notice.lost):
                return  # a commit that gives no queue work (a watched job's change, another's claim)
            for _, a in self._taken(notice):  # at once, from the thread that heard it: run.cancelled turns true now
                a.take_away()
            try:
                loop.call_soon_threadsafe(self._changed, notice)
            except RuntimeError:  # the loop closed: nobody serves any more
                pass
        return changed

    async def _subscribe(self) -> Callable[[Notice], None]:
        """Hear the store's notices from now on (in a thread: the first subscription starts hearing)."""
        listener, on_failure = self._listen(), self._on_failure()
        await asyncio.get_running_loop().run_in_executor(None, self.ctx.notices.subscribe, listener, on_failure)
        return listener

    def _on_failure(self) -> Callable[[CannotGoOn], None]:
        loop = asyncio.get_running_loop()

        def failed(stop: CannotGoOn) -> None:
            try:
                loop.call_soon_threadsafe(self.fail, stop)
            except RuntimeError:
                pass
        return failed

    def _taken(self, notice: Notice) -> list[tuple[QueueRunner, Attempt]]:
        """The attempts whose lease ``notice`` takes away: those of the jobs cancelled, or every one when
        this process's leases were lost."""
        if not (notice.lost or notice.cancelled):
            return []
        return [(r, a) for r in self.runners for a in r.attempts() if notice.lost or a.seq in notice.cancelled]

    def _changed(self, notice: Notice) -> None:
        """A commit: wake the runners of the queues that got work (not by their own write), and cancel
        the async handlers of jobs that were cancelled (JOB-12), or of every attempt when this process's
        leases were lost."""
        for r, a in self._taken(notice):
            self.take_away(r, a)
        if notice.everything:
            for r in self.runners:
                r.notice()
            return
        for name, source in notice.queues.items():
            if source is not self:
                for r in self.by_queue.get(name, ()):
                    r.notice()

    def take_away(self, r: QueueRunner, a: Attempt) -> None:
        """``a`` no longer holds its lease: its handler is told to stop; an async one is cancelled."""
        a.take_away()
        if r.is_async:  # after the task's first step, which a task made just now has not had
            asyncio.get_running_loop().call_soon(a.task.cancel)

    def attempt_of(self, task: Any) -> Optional[tuple[str, Attempt]]:
        """The queue and attempt whose handler ``task`` runs, or None (from any thread)."""
        for r in self.runners:
            for a in r.attempts():
                if a.task is task:
                    return r.queue.name, a
        return None

    # Background tasks

    async def pause(self, seconds: float) -> None:
        """Wait before trying a failed write again: real seconds (a full disk is not on the store's
        clock); a stop cuts it short."""
        if self.stopping.is_set():
            await asyncio.sleep(seconds)
            return
        try:
            await asyncio.wait_for(self.stopping.wait(), seconds)
        except asyncio.TimeoutError:
            pass

    async def renew_overdue(self, runner: QueueRunner) -> None:
        await self.renewals.renew(runner, overdue_only=True)

    async def _report(self) -> None:
        """A line per queue where attempts ended, every REPORT_EVERY seconds of the store's clock."""
        while True:
            await self.ctx.clock.sleep(REPORT_EVERY)
            self._report_now()

    def _report_now(self) -> None:
        now = self.ctx.clock.now()
        period, self.reported = now - self.reported, now
        for r in self.runners:
            line = r.tally.line(r.queue.name, period, len(r.running))
            if line is not None:
                log.info("%s", line, extra={"tinystore_queue": r.queue.name})

    async def _maintain(self, period: float) -> None:
        """Remove what is past keep and dedupe every ``period``, in a thread; through an outage, retry."""
        ctx = self.ctx
        await self._every(period, "maintenance", lambda: ctx.backend.maintain(ctx.clock.now(), 500))

    async def _end_dead(self) -> None:
        """End the leases of processes that died, every LIVENESS_EVERY seconds, in a thread (DUR-03); one
        still within its grace is looked at again as it ends (``_dead``)."""
        await self._every(LIVENESS_EVERY, "ending the leases of processes that died", self.ctx.looks.look)

    async def _every(self, period: float, what: str, task: Callable[[], Any]) -> None:
        """Run ``task`` in a thread every ``period`` of the store's clock; through an outage, retry."""
        loop = asyncio.get_running_loop()
        retrying = Retrying(self.ctx.outages, what)
        wait = period
        while True:
            if retrying.failing:
                await self.pause(wait)
            else:
                await self.ctx.clock.sleep(wait)
            try:
                await loop.run_in_executor(None, task)
            except Closed:
                return
            except Exception as exc:
                wait = retrying.failed(exc)
                continue
            retrying.ok()
            wait = period

    def _supervise(self, task: "asyncio.Future[Any]") -> None:
        """A background task that ends with an error stops the worker: it is never alive and idle."""
        error = None if task.cancelled() else task.exception()
        if error is not None:
            self.fail(error)

    def fail(self, exc: BaseException) -> None:
        """A task cannot go on: stop as gracefully as on SIGTERM, and let serve() raise why."""
        if self.failure is None:
            self.failure = exc
            reason = exc.error if isinstance(exc, CannotGoOn) else f"{type(exc).__name__}: {exc}"
            log.error("%s; running handlers finish within the grace period (%gs), then the worker exits",
                      reason, self.grace, exc_info=None if isinstance(exc, CannotGoOn) else exc)
        self.stop()

    def _raise_failure(self) -> None:
        if self.failure is not None:
            failure = self.failure
            if isinstance(failure, CannotGoOn):
                raise failure.error from failure.cause
            raise failure

    # Serving

    async def serve(self) -> None:
        """Serve until ``stop()``: then claim nothing more, let handlers finish within the grace period.

        Raises why, when a task could not go on (see ``fail``).
        """
        listener = await self._subscribe()
        self.renewals.start()
        background = [asyncio.ensure_future(self._end_dead()), asyncio.ensure_future(self._report())]
        if self.maintain_every is not None:
            background.append(asyncio.ensure_future(self._maintain(self.maintain_every)))
        serving = [asyncio.ensure_future(r.serve()) for r in self.runners]
        for t in background + serving:
            t.add_done_callback(self._supervise)
        try:
            await self.stopping.wait()
            _, pending = await asyncio.wait(serving, timeout=self.grace)
            if pending:
                still = sum(len(r.running) for r in self.runners)
                if still:
                    log.warning("%d handlers still ran after the %gs grace period; their jobs go to the next "
                                "attempt", still, self.grace)
                self.giving_up = True
                for r in self.runners:
                    for a in r.attempts():
                        a.task.cancel()
                    r.poke.set()
                _, pending = await asyncio.wait(pending, timeout=SETTLE_AFTER_GRACE)
                for t in pending:
                    t.cancel()
                if pending:
                    await asyncio.wait(pending)
        finally:
            self.renewals.stop()
            for t in background:
                t.cancel()
            self.ctx.notices.unsubscribe(listener)
            for t in serving:
                t.cancel()
            self.threads.shutdown(wait=False)
        self._report_now()  # what ended since the last line
        for t in serving + background:
            if t.done() and not t.cancelled() and t.exception() is not None and self.failure is None:
                self.failure = t.exception()
        self._raise_failure()

    async def run_until_idle(self) -> None:
        """Run what is due now, in rounds, until a round finds nothing to claim and no process suspected
        dead holds a lease of these queues (DUR-03): one is waited for until its grace ends, and its
        leases ended then run here too."""
        listener = await self._subscribe()
        self.renewals.start()  # a long handler keeps its lease here too
        names = [r.queue.name for r in self.runners]
        try:
            while True:
                while sum(await asyncio.gather(*(r.serve(until_idle=True) for r in self.runners))):
                    if self.stopping.is_set():
                        break
                    self._claim_again()
                due = self.ctx.backend.dead_due(names)
                if due is None or self.stopping.is_set():
                    break
                await asyncio.sleep(due)  # the grace is the server's time, never a fake clock's
                await asyncio.get_running_loop().run_in_executor(None, self.ctx.looks.look)
                self._claim_again()
        except CannotGoOn as stop:
            self.failure = self.failure or stop
        finally:
            self.renewals.stop()
            self.ctx.notices.unsubscribe(listener)
            self.threads.shutdown(wait=True)
        self._raise_failure()

    def _claim_again(self) -> None:
        """Every runner tries a claim in its next round, whatever it knows of its queue's due times."""
        for r in self.runners:
            r.maybe_due = True

    def stop(self) -> None:
        """Stop claiming; handlers finish within the grace period. Call on the worker's loop."""
        self.stopping.set()
        for r in self.runners:
            r.poke.set()
