"""Serving queues: claim due jobs in batches, run their handlers, settle, renew leases.

One event loop serves every queue of a worker. Per queue, a ``QueueRunner``
keeps one claim cycle in flight at a time; a cycle settles the attempts that
finished since the last one and claims for the free slots in the same
transaction. ``async def`` handlers run on the loop; ``def`` handlers in
the worker's handler threads (``_threads``), which its queues share: at most
``HANDLER_THREADS`` (or one queue's slots, if more), handed out in turn by a
``ThreadBudget``, so that a worker serving a thousand queues does not start
sixteen thousand threads. Between cycles a runner sleeps until a handler
finishes, its queue changes, or the next job is due. An attempt holds its
slot until its handler has returned, so a runner never has more handlers
running than slots, whatever their timeouts (``Deadlines``).

Every commit is told as a ``Notice`` (``_notify``), from this process or
another: it wakes only the runners of the queues that got work, and stops
the handlers of jobs that were cancelled, wherever the cancel was made. The
loop reads nothing from the database: writes are awaited (a local SQLite
file may commit one on the loop's thread, see ``backends/_base``), and what a
worker must know (the options kept, the leases still held) comes back with
the result of a write. Every few seconds the worker asks the backend to end
the leases of processes that died (DUR-03).

Claim cycles, renewals and maintenance ride out a store that cannot be
written for a while (``_outage``): they retry, logged once per outage. A
renewal that keeps failing until a lease would run out tells that attempt's
handler to stop (``run.cancelled``). A task that cannot go on stops the
worker, and ``serve()`` raises why.
"""


from __future__ import annotations

import asyncio
import logging
import threading
import traceback
from collections import deque
from typing import TYPE_CHECKING, Any, Callable, Optional

from ._answers import Fail, Retry, Snooze
from ._attempt import Attempt
from ._context import Context
from ._errors import Closed, InvalidArgument
from ._events import fields
from ._outage import CannotGoOn, Retrying
from ._renewals import Renewals
from ._report import REPORT_EVERY, Tally
from ._run import AsyncRun, Run, written
from ._settle import Done, Errored, Requeue, decide, given_back, lost, outcome, repeating, rule_of
from ._threads import HandlerThreads
from ._typed import Unfit
from ._values import encode_json, from_timestamp
from .backends._base import Claimed, Notice, Settlement

if TYPE_CHECKING:
    from ._queue import Queue

log = logging.getLogger("tinystore.worker")

ASYNC_SLOTS = 200  # handlers at once per queue when not told: async ones wait, they do not hold threads
SYNC_SLOTS = 16
HANDLER_THREADS = 64  # def handlers' threads per worker, shared by its queues (more if one queue has more slots)
SETTLE_AFTER_GRACE = 5.0  # how long a stopping worker still tries to write what its handlers answered
LIVENESS_EVERY = 2.0  # seconds between looks for processes that died, whose leases then end at once


def describe(exc: BaseException) -> str:
    """An attempt's error: the exception's type and message, then its traceback."""
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return f"{type(exc).__name__}: {exc}\n{tb}"


class ThreadBudget:
    """The handler threads of a worker, shared by its runners of ``def`` handlers.

    A runner takes threads for a claim before it claims (so it never claims
    a job that would wait for a thread) and gives back those it did not use,
    and one per attempt when its handler has returned. A runner that got
    fewer than it wanted waits in turn: while any waits, threads given back
    go to the first in line, so no queue is starved by a busier one.
    """

    def __init__(self, size: int):
        self.size = size
        self.used = 0
        self.waiting: deque = deque()

    def take(self, runner: "QueueRunner", want: int, wait: bool = True) -> int:
        """Up to ``want`` threads for ``runner``'s next claim; with ``wait`` (it knows of due work), those
        it does not get it waits for in line."""
        ahead = bool(self.waiting) and self.waiting[0] is not runner
        got = 0 if ahead else min(want, self.size - self.used)
        self.used += got
        if got < want and wait:
            if not runner.wants_threads:
                runner.wants_threads = True
                self.waiting.append(runner)
        elif got == want and runner.wants_threads:
            self.leave(runner)
        return got

    def give(self, count: int) -> None:
        if count:
            self.used -= count
            self._next()

    def leave(self, runner: "QueueRunner") -> None:
        """``runner`` no longer waits for threads (it has what it needs, or stopped)."""
        if runner.wants_threads:
            runner.wants_threads = False
            self.waiting.remove(runner)
            self._next()

    def _next(self) -> None:
        if self.waiting and self.used < self.size:
            self.waiting[0].poke.set()


class QueueRunner:
    def __init__(self, worker: "Worker", queue: "Queue", slots: Optional[int]):
        self.worker = worker
        self.queue = queue
        self.handler = queue.handler
        self.is_async = asyncio.iscoroutinefunction(self.handler)
        self.slots = slots or (ASYNC_SLOTS if self.is_async else SYNC_SLOTS)
        self.options = queue.options  # as the store keeps them, from each cycle: another process may change them
        self.running: dict[int, Attempt] = {}  # by seq; changed on the loop, read by the renewals' thread
        self.running_lock = threading.Lock()
        self.tally = Tally()  # what ended since the last line about the queue (``_report``)
        self.settled: list[Settlement] = []
        self.deadlines = Deadlines(self)
        self.poke = asyncio.Event()
        self.wake_at: Optional[float] = None
        self.maybe_due = True
        self.waiting = False  # asleep until poked: nothing to claim, or no room
        self.wants_threads = False  # in the thread budget's line
        self.ended_ids: dict[int, str] = {}  # seq -> job id of attempts settled in the next cycle, for its log
        self.ctx = worker.ctx
        self.retrying = Retrying(self.ctx.outages, f"claims of queue {queue.name!r}")

    def attempts(self) -> list[Attempt]:
        """The attempts running now, from any thread."""
        with self.running_lock:
            return list(self.running.values())

    def notice(self) -> None:
        self.maybe_due = True
        self.poke.set()

    async def serve(self, until_idle: bool = False) -> int:
        """Claim and run until stopped, or (until_idle) until nothing is due and nothing runs."""
        try:
            return await self._serve(until_idle)
        finally:
            self.worker.budget.leave(self)

    async def _serve(self, until_idle: bool) -> int:
        clock, loop = self.ctx.clock, asyncio.get_running_loop()
        budget = self.worker.budget
        claimed_here = 0
        while True:
            stopping = self.worker.stopping.is_set()
            # One reading of the clock for the whole turn: read twice, a job could become due between the
            # two, be claimed by neither and, with no timer in run_until_idle, be waited for forever.
            now = clock.now()
            free = 0 if stopping else self.slots - len(self.running)
            wants = free > 0 and (self.maybe_due or self._due(now))
            want = free if self.settled or wants else 0
            if want and not self.is_async:
                want = budget.take(self, want, wait=wants)  # the threads to run what it claims
            if self.settled or want:
                if want:
                    self.maybe_due = False
                began = clock.now()
                try:
                    claimed = await self._cycle(want)
                except Exception as exc:
                    if not self.is_async:
                        budget.give(want)
                    if wants:
                        self.maybe_due = True
                    if not await self._ride_out(exc):
                        return claimed_here
                    continue
                if not self.is_async and len(claimed) < want:
                    budget.give(want - len(claimed))
                    budget.leave(self)  # it claimed what was due: it needs no more threads now
                claimed_here += len(claimed)
                if self.worker.stopping.is_set() and claimed:
                    await self._give_back(claimed)
                elif claimed:
                    for c in claimed:
                        self._start(c, began)
                    if self.ctx.events:
                        self.ctx.events.claimed(self.queue.name, claimed, clock.now())
                    await asyncio.sleep(0)  # let the handlers begin before the next cycle
                if len(claimed) == want and want > 0:
                    self.maybe_due = True  # there may be more
                continue
            if stopping and not self.running:
                return claimed_here
            if until_idle and not self.running and not self._due(now):
                return claimed_here
            if self.wants_threads and not wants:
                budget.leave(self)  # it waits in line only while it has due work and no threads for it
            self.poke.clear()
            timer = None
            if self.wake_at is not None and not until_idle:
                timer = clock.call_later(loop, self.wake_at - clock.now(), self.notice)
            self.waiting = True
            try:
                await self.poke.wait()  # a handler finished, its queue changed, a job is due, or stop()
            finally:
                self.waiting = False
                if timer is not None:
                    timer.cancel()

    def _due(self, now: float) -> bool:
        return self.wake_at is not None and self.wake_at <= now

    async def _cycle(self, want: int) -> list[Claimed]:
        settlements, self.settled = self.settled, []
        q = self.queue
        try:
            cycle = await written(  # the clock is read inside the claim's transaction (LIM-03)
                self.ctx.backend.cycle(q.name, self.ctx.owner, settlements, want, self.ctx.clock.now,
                                       source=self.worker))
        except BaseException:
            self.settled[:0] = settlements  # nothing was written: they are settled by the next cycle
            raise
        self.retrying.ok()
        if self.ctx.events and settlements:
            self.ctx.events.settled(q.name, settlements, cycle.stale)
        for s in cycle.stale:
            job = self.ended_ids.pop(s.seq, f"seq {s.seq}")
            log.info("a late settlement of %s/%s attempt %d changed nothing: the lease had ended", q.name, job,
                     s.attempt, extra=fields(q.name, job, s.attempt))
        for s in settlements:
            self.ended_ids.pop(s.seq, None)
        self.options = cycle.options
        self.wake_at = cycle.wake_at
        return cycle.claimed

    async def _ride_out(self, exc: Exception) -> bool:
        """A cycle failed and wrote nothing: wait before trying again. False: give up, the worker is
        stopping past its grace period. A failure that is not transient, or lasts too long, raises
        CannotGoOn, which stops the worker."""
        if self.worker.giving_up:
            if self.settled:
                log.warning("%d attempts of queue %r ended but could not be settled (%s); their jobs run again "
                            "once their leases run out", len(self.settled), self.queue.name, exc)
                self.settled.clear()
            return False
        await self.worker.pause(self.retrying.failed(exc))
        return True

    async def _give_back(self, claimed: list[Claimed]) -> None:
        q = self.queue
        if not self.is_async:
            self.worker.budget.give(len(claimed))
        try:
            await written(self.ctx.backend.cycle(q.name, self.ctx.owner, [Settlement(c.seq, c.attempt, c.grp, given_back(c.at)) for c in claimed], 0,
                                                 self.ctx.clock.now(), source=self.worker))
        except Exception as exc:  # stopping: their leases run out, or the next open ends them
            log.warning("%d jobs of queue %r claimed while stopping could not be given back (%s); they run "
                        "again once their leases run out", len(claimed), q.name, exc)

    def _start(self, c: Claimed, began: float) -> None:
        q = self.queue
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%s/%s attempt %d starts", q.name, c.id, c.attempt,
                      extra=fields(q.name, c.id, c.attempt, "started"))
        a = Attempt(c, self.ctx.clock.now(), began + self.options.lease)  # its lease ends no later than the claim wrote
        if self.is_async:
            a.run = AsyncRun(self.ctx.backend, q.name, a)
            # Its first step is scheduled now, before any cancel can come (timeouts, notices and stops
            # cancel from later callbacks): _run always begins, and ends the attempt however it ends.
            a.task = asyncio.ensure_future(self._run(a))
        else:
            a.run = Run(self.ctx.backend, q.name, a)
            a.task = self.worker.threads.call(self._call, (a,), lambda answer, exc: self._ended(a, answer, exc))
        with self.running_lock:
            self.running[c.seq] = a
        self.deadlines.watch()

    def time_out(self, a: Attempt) -> None:
        """The attempt ran past the queue's timeout (JOB-09): it fails, and is told to stop.

        An async handler is cancelled. A ``def`` handler cannot be stopped:
        ``run.cancelled`` turns true, and the attempt keeps its slot and its
        lease (so its place against the limits) until its thread returns.
        """
        q, timeout = self.queue, self.options.timeout
        a.time_out(timeout)
        log.warning("%s/%s attempt %d ran past the queue's timeout of %gs%s", q.name, a.claimed.id, a.claimed.attempt,
                    timeout, "" if self.is_async else "; it keeps its place until its thread returns",
                    extra=fields(q.name, a.claimed.id, a.claimed.attempt))
        if self.is_async:
            a.task.cancel()

    async def _run(self, a: Attempt) -> None:
        clock = self.ctx.clock
        a.began = clock.now()
        try:
            answer = await self.handler(self.queue.decode(a.claimed.payload), a.run)
        except BaseException as exc:  # cancellation too: _ended tells what each means
            a.finished = clock.now()
            self._ended(a, None, exc)
        else:
            a.finished = clock.now()
            self._ended(a, answer, None)

    def _call(self, a: Attempt) -> Any:
        """A ``def`` handler's call, in a handler thread."""
        a.began = self.ctx.clock.now()
        try:
            return self.handler(self.queue.decode(a.claimed.payload), a.run)
        finally:
            a.finished = self.ctx.clock.now()  # in its thread: the loop may hear of it later

    def _ended(self, a: Attempt, answer: Any, exc: Optional[BaseException]) -> None:
        """An attempt's handler returned ``answer`` or raised ``exc`` (or was cancelled): settle it."""
        q, c = self.queue, a.claimed
        timeout = self.options.timeout
        if (a.timed_out is None and not a.taken_away and timeout is not None and a.began is not None
                and a.finished is not None and a.finished - a.began >= timeout):
            a.timed_out = timeout  # it ended past its timeout before the timer could stop it (a busy loop)
        if a.timed_out is not None:  # whatever it answered late, the attempt failed by its timeout (JOB-09)
            answer = Errored(f"timeout: the handler ran past the queue's timeout of {a.timed_out:g}s")
        elif a.taken_away:
            answer = _NO_SETTLEMENT  # cancelled (JOB-12), or its lease ran out: its answer settles nothing
        elif isinstance(exc, asyncio.CancelledError):
            answer = _LOST  # stopped past the grace period: the next attempt takes over
        elif isinstance(exc, Unfit):
            answer = Fail(str(exc))  # it will not fit on any attempt
        elif isinstance(exc, Exception):
            answer = Errored(describe(exc))
        with self.running_lock:
            was_running = self.running.pop(c.seq, None) is not None
        if was_running and not self.is_async:
            self.worker.budget.give(1)
        if exc is not None and not isinstance(exc, (Exception, asyncio.CancelledError)):
            raise exc  # SystemExit, KeyboardInterrupt: the worker stops; the lease runs out (JOB-04)
        if answer is not _NO_SETTLEMENT:
            now = self.ctx.clock.now()
            answer, decision = self._decide(c, answer, now)
            self.settled.append(Settlement(c.seq, c.attempt, c.grp, decision))
            self.ended_ids[c.seq] = c.id
            took = now - a.began if a.began is not None else 0.0
            if self.ctx.events:
                self.ctx.events.ran(q.name, took)
            self.tally.add(outcome(decision), took)
            log_outcome(q.name, c, self.options.attempts, answer, exc, decision, now, took)
        self.poke.set()


    def _decide(self, c: Claimed, answer: Any, now: float) -> tuple[Any, Any]:
        """The decision for an attempt's answer (and the answer, where its result turned it into an
        error): a result that is not JSON, or over 1 MiB, fails the attempt as a raise would (SPEC §9);
        a repeating job waits for its rule's next time (SPEC §8)."""
        q = self.queue
        if answer is _LOST:
            decision = lost(now)
        else:
            result = None
            if answer is not None and not isinstance(answer, (Retry, Snooze, Fail, Errored)):
                try:
                    result = encode_json(answer, "the handler's result", q.name, c.id)
                except InvalidArgument as exc:
                    answer = Errored(f"{type(exc).__name__}: {exc}")
            decision = decide(answer, c.attempt, self.options, now, result)
        rule = rule_of(c.repeat)
        return answer, (repeating(decision, rule, c.at, now) if rule is not None else decision)


def log_outcome(queue: str, c: Claimed, attempts: int, answer: Any, exc: Optional[BaseException], decision: Any,
                now: float, took: float) -> None:
    """A line per attempt's end: debug when it is done, snoozed or asked to run again (``_report`` counts
    those), warning when it failed and runs again, error when it failed for good."""
    if isinstance(decision, Done) or (isinstance(decision, Requeue) and decision.reset and decision.error is None) \
            or isinstance(answer, (Snooze, Retry)):
        if not log.isEnabledFor(logging.DEBUG):
            return
    where = fields(queue, c.id, c.attempt, outcome(decision), took)
    head = f"{queue}/{c.id} attempt {c.attempt}"
    if isinstance(decision, Done):
        log.debug("%s done in %.3fs", head, took, extra=where)
        return
    reason = (decision.error or "").split("\n", 1)[0]
    trace = exc if isinstance(exc, Exception) else None
    if isinstance(decision, Requeue) and decision.reset:  # a repeating job, waiting for its next time
        if decision.error is None:
            log.debug("%s done in %.3fs; runs again at %s", head, took, from_timestamp(decision.at).isoformat(),
                     extra=where)
        else:
            log.error("%s failed after %.3fs: %s; runs again at its next time, %s", head, took, reason,
                      from_timestamp(decision.at).isoformat(), extra=where, exc_info=trace)
    elif isinstance(answer, Snooze):
        log.debug("%s snoozed after %.3fs: runs again in %gs", head, took, answer.delay, extra=where)
    elif isinstance(decision, Requeue) and isinstance(answer, Retry):
        log.debug("%s asked to run again after %.3fs: runs again in %.3fs", head, took,
                 max(0.0, decision.at - now), extra=where)
    elif isinstance(decision, Requeue):
        log.warning("%s failed after %.3fs, runs again in %.3fs: %s", head, took, max(0.0, decision.at - now),
                    reason, extra=where, exc_info=trace)
    else:
        log.error("%s failed for good after %.3fs (attempt %d of %d): %s", head, took, c.attempt,
                  attempts, reason, extra=where, exc_info=trace)


class Deadlines:
    """The timeouts of a runner's attempts: one timer, at the earliest deadline (JOB-09).

    An attempt's timeout counts from when its handler begins (``Attempt.began``,
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
        timeout = self.runner.options.timeout
        if timeout is not None:
            at = self.runner.ctx.clock.now() + timeout
            if self.timer_at is None or at < self.timer_at:
                self._arm(at)

    def _fire(self) -> None:
        self.timer = self.timer_at = None
        runner, now = self.runner, self.runner.ctx.clock.now()
        timeout = runner.options.timeout
        if timeout is None:
            return
        earliest: Optional[float] = None
        for a in list(runner.running.values()):
            if a.timed_out is not None:
                continue
            deadline = (a.began if a.began is not None else now) + timeout
            if deadline <= now:
                runner.time_out(a)
            elif earliest is None or deadline < earliest:
                earliest = deadline
        if earliest is not None:
            self._arm(earliest)

    def _arm(self, at: float) -> None:
        if self.timer is not None:
            self.timer.cancel()
        clock = self.runner.ctx.clock
        self.timer_at = at
        self.timer = clock.call_later(asyncio.get_running_loop(), at - clock.now(), self._fire)


_NO_SETTLEMENT = object()
_LOST = object()


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
            if not (notice.queues or notice.cancelled or notice.everything):
                return  # a commit that gives no queue work (a watched job's change, another's claim)
            for seq in notice.cancelled:  # at once, from the thread that heard it: run.cancelled turns true now
                for r in self.runners:
                    a = r.running.get(seq)
                    if a is not None:
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

    def _changed(self, notice: Notice) -> None:
        """A commit: wake the runners of the queues that got work (not by their own write), and cancel
        the async handlers of jobs that were cancelled (JOB-12)."""
        for seq in notice.cancelled:
            for r in self.runners:
                a = r.running.get(seq)
                if a is not None:
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
        """End the leases of processes that died, every LIVENESS_EVERY seconds, in a thread (DUR-03)."""
        ctx = self.ctx
        await self._every(LIVENESS_EVERY, "ending the leases of processes that died",
                          lambda: ctx.backend.end_dead(ctx.clock.now()))

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
        if not task.cancelled() and task.exception() is not None:
            self.fail(task.exception())

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
        """Run what is due now, in rounds, until a round finds nothing to claim."""
        listener = await self._subscribe()
        self.renewals.start()  # a long handler keeps its lease here too
        try:
            while sum(await asyncio.gather(*(r.serve(until_idle=True) for r in self.runners))):
                if self.stopping.is_set():
                    break
                for r in self.runners:
                    r.maybe_due = True
        except CannotGoOn as stop:
            self.failure = self.failure or stop
        finally:
            self.renewals.stop()
            self.ctx.notices.unsubscribe(listener)
            self.threads.shutdown(wait=True)
        self._raise_failure()

    def stop(self) -> None:
        """Stop claiming; handlers finish within the grace period. Call on the worker's loop."""
        self.stopping.set()
        for r in self.runners:
            r.poke.set()
