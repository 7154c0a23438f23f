"""One queue's part of a worker: claim cycles, and the attempts they start and end.

A ``QueueRunner`` keeps one claim cycle in flight at a time; a cycle
settles the attempts that ended since the last one and claims for the free
slots in the same transaction, with the options the store keeps (they bind
the next claim: another process may have changed them). ``async def``
handlers run on the worker's loop; ``def`` handlers in the worker's handler
threads (``_threads``), handed out by its ``ThreadBudget``. Between cycles a
runner sleeps until a handler finishes, its queue changes, or the next job
is due. An attempt holds its slot until its handler has returned, so a
runner never has more handlers running than slots, whatever their timeouts
(``_deadlines``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import TYPE_CHECKING, Any, Optional, Protocol

from ._attempt import Attempt
from ._budget import ThreadBudget
from ._context import Context
from ._deadlines import Deadlines
from ._ending import NO_SETTLEMENT, answer_of, decision_of, log_outcome
from ._events import fields
from ._outage import Retrying
from ._report import Tally
from ._run import AsyncRun, Run, written
from ._settle import given_back, outcome
from ._threads import HandlerThreads
from .backends._base import Claimed, Settlement

if TYPE_CHECKING:
    from ._queue import Queue

log = logging.getLogger("tinystore.worker")

ASYNC_SLOTS = 200  # handlers at once per queue when not told: async ones wait, they do not hold threads
SYNC_SLOTS = 16


class Serving(Protocol):
    """What a runner uses of its worker: the store, the threads and their budget, whether it stops."""

    ctx: Context
    budget: ThreadBudget
    threads: HandlerThreads
    stopping: asyncio.Event
    giving_up: bool  # stopping past the grace period: writes that fail are not tried again

    async def pause(self, seconds: float) -> None:
        """Wait before a failed write is tried again."""

    async def renew_overdue(self, runner: "QueueRunner") -> None:
        """Renew the runner's leases that have run out by the clock and are not renewed yet."""

    def take_away(self, runner: "QueueRunner", a: Attempt) -> None:
        """``a`` no longer holds its lease: its handler is told to stop."""


class QueueRunner:
    """One queue's claim cycles and attempts in a worker."""

    def __init__(self, worker: Serving, queue: "Queue", slots: Optional[int]):
        self.worker = worker
        self.queue = queue
        assert queue.handler is not None  # a worker serves only the queues that have a handler
        self.handler = queue.handler
        self.is_async = asyncio.iscoroutinefunction(self.handler)
        self.slots = slots or (ASYNC_SLOTS if self.is_async else SYNC_SLOTS)
        self.options = queue.options  # as the store keeps them, from each cycle: another process may change them
        # By (job, attempt): changed on the loop, read by the renewals' thread and the notices' one
        self.running: dict[tuple[int, int], Attempt] = {}
        self.running_jobs: dict[int, int] = {}  # attempts running per job: two only where one is older
        self.running_lock = threading.Lock()
        self.tally = Tally()  # what ended since the last line about the queue (``_report``)
        self.settled: list[Settlement] = []
        self.deadlines = Deadlines(worker.ctx.clock, lambda: self.options.timeout, self.attempts, self.time_out)
        self.poke = asyncio.Event()
        self.wake_at: Optional[float] = None
        self.maybe_due = True
        self.waiting = False  # asleep until poked: nothing to claim, or no room
        self.wants_threads = False  # in the thread budget's line
        self.ended_ids: dict[tuple[int, int], str] = {}  # job ids of attempts settled in the next cycle, for its log
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
                    self.deadlines.watch()  # the timer fires by the earliest deadline of those started
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
        # A cycle ends the leases that ran out, this process's own too. The renewals' thread renews them
        # in time, but a clock that jumps (set forward, or a FakeClock's advance) can pass a lease's end
        # before that thread has heard of it: renew those first, so that the cycle does not take a job from
        # a handler that still runs here. A write slow past the lease can still let it (``_take_older``).
        await self.worker.renew_overdue(self)
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
            job = self.ended_ids.pop((s.seq, s.attempt), f"seq {s.seq}")
            log.info("a late settlement of %s/%s attempt %d changed nothing: the lease had ended", q.name, job,
                     s.attempt, extra=fields(q.name, job, s.attempt))
        for s in settlements:
            self.ended_ids.pop((s.seq, s.attempt), None)
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
        self._take_older(c)
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
            self.running[a.key] = a
            self.running_jobs[c.seq] = self.running_jobs.get(c.seq, 0) + 1

    def _take_older(self, c: Claimed) -> None:
        """This process claimed a new attempt of a job whose older attempt still runs here: that one's lease
        ran out (its renewal came too late, a slow write), so it is taken away now, as when a renewal finds
        its lease gone. It keeps its slot (and a ``def`` one its thread) until its handler returns; its
        answer settles nothing, and its end touches only its own entry.

        The claim may take the job all the same: its lease ended in the store, and any process may take it,
        so leaving it to others would only move the second run elsewhere, and keep the job waiting for as
        long as the older handler runs where no other process serves the queue."""
        if c.seq not in self.running_jobs:  # the common case, read without a scan of every attempt
            return
        for old in [a for a in self.attempts() if a.seq == c.seq and not a.taken_away]:
            log.warning("%s/%s attempt %d lost its lease while its handler ran; attempt %d takes over, and "
                        "attempt %d's handler is told to stop", self.queue.name, c.id, old.claimed.attempt,
                        c.attempt, old.claimed.attempt, extra=fields(self.queue.name, c.id, old.claimed.attempt))
            self.worker.take_away(self, old)

    def time_out(self, a: Attempt) -> None:
        """The attempt ran past the queue's timeout (JOB-09): it fails, and is told to stop.

        An async handler is cancelled. A ``def`` handler cannot be stopped:
        ``run.cancelled`` turns true, and the attempt keeps its slot and its
        lease (so its place against the limits) until its thread returns.
        """
        q, timeout = self.queue, self.options.timeout
        assert timeout is not None  # deadlines are set only where the queue has a timeout
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
        answer = answer_of(q.name, a, answer, exc, self.options.timeout)
        with self.running_lock:
            was_running = self.running.pop(a.key, None) is not None
            if was_running:
                left = self.running_jobs[a.seq] - 1
                if left:
                    self.running_jobs[a.seq] = left
                else:
                    del self.running_jobs[a.seq]
        if was_running and not self.is_async:
            self.worker.budget.give(1)
        if answer is not NO_SETTLEMENT:
            now = self.ctx.clock.now()
            answer, decision = decision_of(q.name, c, answer, self.options, now)
            self.settled.append(Settlement(c.seq, c.attempt, c.grp, decision, began=a.began, ended=now))
            self.ended_ids[a.key] = c.id
            took = now - a.began if a.began is not None else 0.0
            if self.ctx.events:
                self.ctx.events.ran(q.name, took)
            self.tally.add(outcome(decision), took)
            log_outcome(q.name, c, self.options.attempts, answer, exc, decision, now, took)
        self.poke.set()
