"""Serving queues: claim due jobs in batches, run their handlers, settle, renew leases.

One event loop serves every queue of a worker. Per queue, a ``QueueRunner``
keeps one claim cycle in flight at a time; a cycle settles the attempts that
finished since the last one and claims for the free slots in the same
transaction. ``async def`` handlers run on the loop; ``def`` handlers in
the worker's handler threads (``_threads``). Between cycles a runner sleeps
until a handler finishes, the store changes, or the next job is due. An
attempt holds its slot until its handler has returned, so a runner never has
more handlers running than slots, whatever their timeouts (``Deadlines``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import traceback
from typing import TYPE_CHECKING, Any, Callable, Optional

from ._answers import Retry, Snooze
from ._run import AsyncRun, Run, written
from ._settle import LOST_LEASE, Done, Errored, Requeue, decide
from ._threads import HandlerThreads
from .backends._base import Claimed, Settlement

if TYPE_CHECKING:
    from ._queue import Queue
    from ._store import Store

log = logging.getLogger("tinystore.worker")

ASYNC_SLOTS = 200  # handlers at once per queue when not told: async ones wait, they do not hold threads
SYNC_SLOTS = 16


def describe(exc: BaseException) -> str:
    """An attempt's error: the exception's type and message, then its traceback."""
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return f"{type(exc).__name__}: {exc}\n{tb}"


class QueueRunner:
    def __init__(self, worker: "Worker", queue: "Queue", slots: Optional[int]):
        self.worker = worker
        self.queue = queue
        self.handler = queue.handler
        self.is_async = asyncio.iscoroutinefunction(self.handler)
        self.slots = slots or (ASYNC_SLOTS if self.is_async else SYNC_SLOTS)
        self.running: dict[int, tuple[asyncio.Task, Any]] = {}
        self.settled: list[Settlement] = []
        self.deadlines = Deadlines(self)
        self.poke = asyncio.Event()
        self.wake_at: Optional[float] = None
        self.maybe_due = True

    @property
    def store(self) -> "Store":
        return self.worker.store

    def notice(self) -> None:
        self.maybe_due = True
        self.poke.set()

    async def serve(self, until_idle: bool = False) -> int:
        """Claim and run until stopped, or (until_idle) until nothing is due and nothing runs."""
        clock, loop = self.store.clock, asyncio.get_running_loop()
        claimed_here = 0
        while True:
            stopping = self.worker.stopping.is_set()
            free = 0 if stopping else self.slots - len(self.running)
            if self.settled or (free > 0 and (self.maybe_due or self._due(clock.now()))):
                self.maybe_due = False
                claimed = await self._cycle(free)
                claimed_here += len(claimed)
                if self.worker.stopping.is_set() and claimed:
                    await self._give_back(claimed)
                elif claimed:
                    for c in claimed:
                        self._start(c)
                    await asyncio.sleep(0)  # let the handlers begin before the next cycle
                if len(claimed) == free and free > 0:
                    self.maybe_due = True  # there may be more
                continue
            if stopping and not self.running:
                return claimed_here
            if until_idle and not self.running and not self._due(clock.now()):
                return claimed_here
            self.poke.clear()
            timer = None
            if self.wake_at is not None and not until_idle:
                timer = clock.call_later(loop, self.wake_at - clock.now(), self.notice)
            try:
                await self.poke.wait()  # a handler finished, the store changed, a job is due, or stop()
            finally:
                if timer is not None:
                    timer.cancel()

    def _due(self, now: float) -> bool:
        return self.wake_at is not None and self.wake_at <= now

    async def _cycle(self, want: int) -> list[Claimed]:
        settlements, self.settled = self.settled, []
        q = self.queue
        cycle = await written(  # the clock is read inside the claim's transaction (LIM-03)
            self.store._backend.cycle(q.name, q.options, self.store._owner, settlements, want, self.store.clock.now))
        for s in cycle.stale:
            log.info("a late settlement of %s/%s attempt %d changed nothing: the lease had ended",
                     q.name, s.seq, s.attempt)
        self.wake_at = cycle.wake_at
        return cycle.claimed

    async def _give_back(self, claimed: list[Claimed]) -> None:
        q = self.queue
        await written(self.store._backend.give_back(q.name, q.options, claimed, self.store.clock.now()))

    def _start(self, c: Claimed) -> None:
        q = self.queue
        log.debug("%s/%s attempt %d starts", q.name, c.id, c.attempt,
                  extra={"queue": q.name, "job_id": c.id, "attempt": c.attempt})
        if self.is_async:
            run: Any = AsyncRun(self.store._backend, q.name, c.seq, c.id, c.attempt, c.grp, c.at)
            # Its first step is scheduled now, before any cancel can come (timeouts, notices and stops
            # cancel from later callbacks): _run always begins, and ends the attempt however it ends.
            task: Any = asyncio.ensure_future(self._run(c, run))
        else:
            run = Run(self.store._backend, q.name, c.seq, c.id, c.attempt, c.grp, c.at)
            task = self.worker.threads.call(self._call, (c, run), lambda answer, exc: self._ended(c, run, answer, exc))
        self.running[c.seq] = (task, run)
        self.store._active[c.seq] = (asyncio.get_running_loop(), task, run)
        self.deadlines.watch()

    def _time_out(self, seq: int, task: Any, run: Any) -> None:
        """The attempt ran past the queue's timeout (JOB-09): it fails, and is told to stop.

        An async handler is cancelled. A ``def`` handler cannot be stopped:
        ``run.cancelled`` turns true, and the attempt keeps its slot and its
        lease (so its place against the limits) until its thread returns.
        """
        q = self.queue
        run._timed_out = q.options.timeout
        run.cancelled = True
        log.warning("%s/%s attempt %d ran past the queue's timeout of %gs%s", q.name, run.id, run.attempt,
                    q.options.timeout, "" if self.is_async else "; it keeps its place until its thread returns",
                    extra={"queue": q.name, "job_id": run.id, "attempt": run.attempt})
        if self.is_async:
            task.cancel()

    async def _run(self, c: Claimed, run: AsyncRun) -> None:
        clock = self.store.clock
        run._began = clock.now()
        try:
            answer = await self.handler(json.loads(c.payload), run)
        except BaseException as exc:  # cancellation too: _ended tells what each means
            run._finished = clock.now()
            self._ended(c, run, None, exc)
        else:
            run._finished = clock.now()
            self._ended(c, run, answer, None)

    def _call(self, c: Claimed, run: Run) -> Any:
        """A ``def`` handler's call, in a handler thread."""
        run._began = self.store.clock.now()
        try:
            return self.handler(json.loads(c.payload), run)
        finally:
            run._finished = self.store.clock.now()  # in its thread: the loop may hear of it later

    def _ended(self, c: Claimed, run: Any, answer: Any, exc: Optional[BaseException]) -> None:
        """An attempt's handler returned ``answer`` or raised ``exc`` (or was cancelled): settle it."""
        q = self.queue
        timeout = q.options.timeout
        if (run._timed_out is None and not run._taken_away and timeout is not None and run._began is not None
                and run._finished is not None and run._finished - run._began >= timeout):
            run._timed_out = timeout  # it ended past its timeout before the timer could stop it (a busy loop)
        if run._timed_out is not None:  # whatever it answered late, the attempt failed by its timeout (JOB-09)
            answer = Errored(f"timeout: the handler ran past the queue's timeout of {run._timed_out:g}s")
        elif run._taken_away:
            answer = _NO_SETTLEMENT  # cancelled (JOB-12): its lease is already gone, its answer settles nothing
        elif isinstance(exc, asyncio.CancelledError):
            answer = _LOST  # stopped past the grace period: the next attempt takes over
        elif isinstance(exc, Exception):
            answer = Errored(describe(exc))
        self.running.pop(c.seq, None)
        self.store._active.pop(c.seq, None)
        if exc is not None and not isinstance(exc, (Exception, asyncio.CancelledError)):
            raise exc  # SystemExit, KeyboardInterrupt: the worker stops; the lease runs out (JOB-04)
        if answer is not _NO_SETTLEMENT:
            now = self.store.clock.now()
            decision = Requeue(now, LOST_LEASE) if answer is _LOST else decide(answer, c.attempt, q.options, now)
            self.settled.append(Settlement(c.seq, c.attempt, c.grp, decision))
            log_outcome(q, run, answer, exc, decision, now)
        self.poke.set()


def log_outcome(q: "Queue", run: Any, answer: Any, exc: Optional[BaseException], decision: Any,
                now: float) -> None:
    """One line per attempt's end: info when it is done or will run again, error when it failed for good."""
    took = now - run._began if run._began is not None else 0.0
    where = {"queue": q.name, "job_id": run.id, "attempt": run.attempt}
    head = f"{q.name}/{run.id} attempt {run.attempt}"
    if isinstance(decision, Done):
        log.info("%s done in %.3fs", head, took, extra=where)
        return
    reason = (decision.error or "").split("\n", 1)[0]
    trace = exc if isinstance(exc, Exception) else None
    if isinstance(answer, Snooze):
        log.info("%s snoozed after %.3fs: runs again in %gs", head, took, answer.delay, extra=where)
    elif isinstance(decision, Requeue) and isinstance(answer, Retry):
        log.info("%s asked to run again after %.3fs: runs again in %.3fs", head, took,
                 max(0.0, decision.at - now), extra=where)
    elif isinstance(decision, Requeue):
        log.warning("%s failed after %.3fs, runs again in %.3fs: %s", head, took, max(0.0, decision.at - now),
                    reason, extra=where, exc_info=trace)
    else:
        log.error("%s failed for good after %.3fs (attempt %d of %d): %s", head, took, run.attempt,
                  q.options.attempts, reason, extra=where, exc_info=trace)


class Deadlines:
    """The timeouts of a runner's attempts: one timer, at the earliest deadline (JOB-09).

    An attempt's timeout counts from when its handler begins (``run._began``,
    set in the handler's own thread for a ``def`` handler), never from its
    claim. No deadline is ever earlier than its attempt's claim plus the
    timeout, so the timer is armed when an attempt starts and none is armed;
    when it fires, it times out the attempts past their deadline and is armed
    again at the earliest deadline of the others. Nothing crosses from a
    handler thread to the loop, and nothing is kept per finished attempt.
    """

    def __init__(self, runner: QueueRunner):
        self.runner = runner
        self.timer: Any = None
        self.timer_at: Optional[float] = None

    def watch(self) -> None:
        """An attempt was claimed now: make sure the timer fires by the earliest its deadline can be."""
        timeout = self.runner.queue.options.timeout
        if timeout is not None:
            at = self.runner.store.clock.now() + timeout
            if self.timer_at is None or at < self.timer_at:
                self._arm(at)

    def _fire(self) -> None:
        self.timer = self.timer_at = None
        runner, now = self.runner, self.runner.store.clock.now()
        timeout = runner.queue.options.timeout
        if timeout is None:
            return
        earliest: Optional[float] = None
        for seq, (task, run) in list(runner.running.items()):
            if run._timed_out is not None:
                continue
            deadline = (run._began if run._began is not None else now) + timeout
            if deadline <= now:
                runner._time_out(seq, task, run)
            elif earliest is None or deadline < earliest:
                earliest = deadline
        if earliest is not None:
            self._arm(earliest)

    def _arm(self, at: float) -> None:
        if self.timer is not None:
            self.timer.cancel()
        clock = self.runner.store.clock
        self.timer_at = at
        self.timer = clock.call_later(asyncio.get_running_loop(), at - clock.now(), self._fire)


_NO_SETTLEMENT = object()
_LOST = object()


class Worker:
    """Serves a store's queues that have handlers, in one event loop."""

    def __init__(self, store: "Store", queues: list["Queue"], workers: Optional[int] = None, grace: float = 30.0):
        self.store = store
        self.grace = grace
        self.stopping = asyncio.Event()
        self.runners = [QueueRunner(self, q, workers) for q in queues]
        self.threads = HandlerThreads(sum(r.slots for r in self.runners if not r.is_async))

    def _listen(self) -> Callable[[bool], None]:
        loop = asyncio.get_running_loop()

        def changed(external: bool) -> None:
            loop.call_soon_threadsafe(self._changed, external)
        return changed

    def _changed(self, external: bool) -> None:
        for r in self.runners:
            r.notice()
        if external:
            self._check_leases()

    def _check_leases(self) -> None:
        """Tell handlers whose lease another process ended (a cancel): their job is gone."""
        running = [seq for r in self.runners for seq in r.running]
        if not running:
            return
        held = self.store._backend.held(self.store._owner, running)
        for r in self.runners:
            for seq, (task, run) in list(r.running.items()):
                if seq not in held and not run._taken_away:
                    run._take_away()
                    if r.is_async:  # after the task's first step, which a task made just now has not had
                        asyncio.get_running_loop().call_soon(task.cancel)

    async def _renew(self) -> None:
        clock = self.store.clock
        while True:
            await clock.sleep(min(r.queue.options.lease for r in self.runners) / 2)
            for r in self.runners:
                r.queue.reload()
                if r.running:
                    expires = clock.now() + r.queue.options.lease
                    await written(self.store._backend.renew(r.queue.name, self.store._owner, expires))
            self._check_leases()  # a cancel another process made is heard here at the latest

    async def serve(self) -> None:
        """Serve until ``stop()``: then claim nothing more, let handlers finish within the grace period."""
        listener = self._listen()
        self.store._notifier.subscribe(listener)
        renewer = asyncio.ensure_future(self._renew())
        serving = [asyncio.ensure_future(r.serve()) for r in self.runners]
        try:
            await self.stopping.wait()
            _, pending = await asyncio.wait(serving, timeout=self.grace)
            if pending:
                log.warning("%d handlers still ran after the %gs grace period; their jobs go to the next attempt",
                            sum(len(r.running) for r in self.runners), self.grace)
                for r in self.runners:
                    for task, _ in list(r.running.values()):
                        task.cancel()
                await asyncio.wait(pending)
            for t in serving:
                t.result()
        finally:
            renewer.cancel()
            self.store._notifier.unsubscribe(listener)
            for t in serving:
                t.cancel()
            self.threads.shutdown(wait=False)

    async def run_until_idle(self) -> None:
        """Run what is due now, in rounds, until a round finds nothing to claim."""
        listener = self._listen()
        self.store._notifier.subscribe(listener)
        renewer = asyncio.ensure_future(self._renew())  # a long handler keeps its lease here too
        try:
            while sum(await asyncio.gather(*(r.serve(until_idle=True) for r in self.runners))):
                for r in self.runners:
                    r.maybe_due = True
        finally:
            renewer.cancel()
            self.store._notifier.unsubscribe(listener)
            self.threads.shutdown(wait=True)

    def stop(self) -> None:
        """Stop claiming; handlers finish within the grace period. Call on the worker's loop."""
        self.stopping.set()
        for r in self.runners:
            r.poke.set()
