"""A queue: add, get, cancel and retry jobs (one or many), list and watch them, and register its handler."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Iterable, Iterator, Optional

from ._awaiting import Steps, awaited, resolved
from ._batch import Batch
from ._context import Context
from ._durations import Duration, parse_duration
from ._errors import Closed, InvalidArgument, LimitExceeded
from ._jobstate import STATES, Job, JobState, JobStateName, state_of, visible
from ._options import QueueOptions
from ._repeat import Repeat
from ._transaction import AsyncTransaction, Transaction
from ._typed import Decode, decoder
from ._values import MAX_BATCH, check_priority, check_text_id, check_time, encode_json, new_id, to_timestamp
from .backends._asyncconn import is_async_connection, run_on_async_connection
from .backends._base import JobDetail, JobRow, NewJob, Pick

if TYPE_CHECKING:
    from ._watch import Watches


class Queue:
    """A named queue of a store. Get one with ``store.queue(name, ...)``, which lists its options."""

    def __init__(self, ctx: Context, watches: "Watches", name: str, options: QueueOptions):
        self._ctx = ctx
        self._watches = watches
        self.name = name
        self.options = options
        self.handler: Optional[Callable[..., Any]] = None
        self.decode: Decode = json.loads  # a job's stored payload as its handler takes it

    def __repr__(self) -> str:
        return f"<Queue {self.name!r}>"

    def reload(self) -> None:
        """Read the options kept in the store, which another process may have changed."""
        self.options = self._ctx.backend.load_options(self.name) or self.options

    # Adding

    def add(self, payload: Any, id: Optional[str] = None, at: Any = None, delay: Optional[Duration] = None,
            group: Optional[str] = None, tx: Optional[Transaction] = None, conn: Any = None,
            repeat: Optional[Repeat] = None, priority: int = 0, batch: Any = None) -> JobState:
        """Add a job; once this returns, it is on the disk (DUR-01).

        An ``id`` that names a job the queue keeps adds nothing and returns
        that job, with ``added`` false (JOB-10). With ``tx=`` (from
        ``store.transaction()``) or ``conn=`` (the application's own sqlite3
        or SQLAlchemy connection to the same file) the job commits with that
        transaction, or not at all (JOB-02).

        ``repeat=tinystore.cron(...)`` or ``tinystore.every(...)`` makes the
        job repeat (it needs an ``id``): it first runs at the rule's first
        time after now (or at ``at=``/``delay=``, where given), then after
        each run at the rule's next time, until it is cancelled.

        ``priority`` (an int from -100 to 100, 0 unless given) orders the due
        jobs of the queue: the highest starts first, then by time (JOB-01).

        ``batch`` (a ``store.batch(...)``, or its id) makes the job one of
        that batch, which must be open: adding to a closed one is
        ``InvalidArgument``, and nothing is written. A job whose id names a
        job the queue keeps adds nothing, and does not join the batch.
        """
        return self.add_many([Job(payload, id=id, at=at, delay=delay, group=group, repeat=repeat,
                                  priority=priority)],
                             tx=tx, conn=conn, batch=batch)[0]

    async def add_async(self, payload: Any, id: Optional[str] = None, at: Any = None,
                        delay: Optional[Duration] = None, group: Optional[str] = None, tx: Any = None,
                        conn: Any = None, repeat: Optional[Repeat] = None, priority: int = 0,
                        batch: Any = None) -> JobState:
        """``add`` for ``await``: once the await returns, the job is on the disk (DUR-01); the loop runs
        other tasks while the commit waits (ASY-01). ``tx=`` takes a ``store.transaction_async()``;
        ``conn=`` also takes the application's own async connection in its open transaction (psycopg's
        ``AsyncConnection``, SQLAlchemy's ``AsyncConnection`` or ``AsyncSession``). A task cancelled
        while it awaits promised nothing: ``get`` says whether the job was added (ASY-02)."""
        job = Job(payload, id=id, at=at, delay=delay, group=group, repeat=repeat, priority=priority)
        return (await self.add_many_async([job], tx=tx, conn=conn, batch=batch))[0]

    def add_many(self, items: Iterable[Any], tx: Optional[Transaction] = None, conn: Any = None,
                 batch: Any = None) -> list[JobState]:
        """Add payloads or ``Job`` items in one transaction, all or none; one JobState per item, in order.

        ``items`` is any iterable of at most 10,000 (``MAX_BATCH``): a longer
        one is refused with LimitExceeded before anything is written, having
        read one item past the limit. One transaction holds the store's one
        write lock while it writes, so a bigger batch would keep every worker
        of the file waiting; add more in several calls (with ids, a call that
        failed can be made again and adds nothing twice, JOB-10), or in one
        ``store.transaction()`` with ``tx=`` where they must commit together.
        ``batch``: every job added joins that batch, as ``add`` says.
        """
        return resolved(self._add_many(items, tx, conn, batch))

    async def add_many_async(self, items: Iterable[Any], tx: Any = None, conn: Any = None,
                             batch: Any = None) -> list[JobState]:
        """``add_many`` for ``await``, as ``add_async`` is ``add``'s."""
        if isinstance(tx, AsyncTransaction):  # its statements run on the transaction's own thread
            if conn is not None:
                raise InvalidArgument("give tx= or conn=, not both", queue=self.name)
            return await tx.run_sync(lambda sync: self.add_many(items, tx=sync, batch=batch))
        if conn is not None and is_async_connection(conn):
            return await run_on_async_connection(conn, self.name,
                                                 lambda sync: self.add_many(items, conn=sync, batch=batch))
        return await awaited(self._add_many(items, tx, conn, batch))

    def _add_many(self, items: Iterable[Any], tx: Optional[Transaction], conn: Any,
                  batch: Any) -> "Steps[list[JobState]]":
        self._ctx.check_open()
        now = self._ctx.clock.now()
        jobs = self._new_jobs(items, now)
        if batch is not None:
            jobs = self._joining(jobs, batch)
        target = self._target(tx, conn)
        results = yield self._ctx.backend.add(self.name, jobs, now, tx=target)
        if self._ctx.events:
            self._ctx.events.added(self.name, sum(a.added for a in results))
        return [self._state(a.row, now, added=a.added) for a in results]

    def _new_jobs(self, items: Iterable[Any], now: float) -> list[NewJob]:
        size = len(items) if hasattr(items, "__len__") else 0  # type: ignore[arg-type]
        if size > MAX_BATCH:
            raise self._too_many(f"was given {size}")
        jobs: list[NewJob] = []
        for item in items:
            if len(jobs) == MAX_BATCH:
                raise self._too_many("was given more")
            jobs.append(self._new_job(item if isinstance(item, Job) else Job(item), now))
        return jobs

    def _joining(self, jobs: list[NewJob], batch: Any) -> list[NewJob]:
        """The jobs as members of ``batch`` (a Batch or its id); a repeating job never ends, so joins none."""
        id = batch.id if isinstance(batch, Batch) else batch
        check_text_id(id, "batch", self.name)
        for job in jobs:
            if job.repeat is not None:
                raise InvalidArgument(f"a repeating job never ends, so it cannot join batch {id!r}",
                                      queue=self.name, job_id=job.id)
        return [replace(job, batch=id) for job in jobs]

    def _too_many(self, given: str) -> LimitExceeded:
        return LimitExceeded(f"add_many adds at most {MAX_BATCH} jobs in one call, and {given}: nothing was "
                             f"written. Add them in calls of at most {MAX_BATCH} (with ids, a call that failed "
                             "adds nothing twice when made again), or in one store.transaction() with tx= "
                             "where they must commit together", queue=self.name)

    def _new_job(self, job: Job, now: float) -> NewJob:
        if job.id is not None:
            return self._checked(job, check_text_id(job.id, "id", self.name), now)
        try:
            return self._checked(job, new_id(now), now)
        except InvalidArgument as exc:  # the id tinystore made is one the caller never saw: "a new job"
            raise type(exc)(exc.message, queue=self.name, new_job=True) from None

    def _checked(self, job: Job, id: str, now: float) -> NewJob:
        """``job`` as written, its values checked; errors name the job by the id the caller gave, if any."""
        named = job.id
        group = check_text_id(job.group, "group", self.name, named) if job.group is not None else None
        if job.at is not None and job.delay is not None:
            raise InvalidArgument("give at= or delay=, not both", queue=self.name, job_id=named)
        if job.repeat is not None:
            if job.id is None:
                raise InvalidArgument("a repeating job needs an id=, by which it is found and cancelled",
                                      queue=self.name)
            if not isinstance(job.repeat, Repeat):
                raise InvalidArgument(f"repeat={job.repeat!r} must be tinystore.cron(...) or tinystore.every(...)",
                                      queue=self.name, job_id=named)
        if job.repeat is not None and job.at is None and job.delay is None:
            try:
                due = job.repeat.next_after(now)
            except InvalidArgument as exc:
                raise InvalidArgument(str(exc), queue=self.name, job_id=named) from None
        elif job.at is not None:
            due = to_timestamp(job.at, self.name, named)
        elif job.delay is not None:
            try:
                delay = parse_duration(job.delay, "delay")
            except InvalidArgument as exc:
                raise InvalidArgument(str(exc), queue=self.name, job_id=named) from None
            due = check_time(now + delay, f"now plus delay={job.delay!r}", self.name, named)
        else:
            due = check_time(now, "now, by the store's clock,", self.name, named)
        repeat = job.repeat.stored() if job.repeat is not None else None
        priority = check_priority(job.priority, self.name, named)
        payload = encode_json(job.payload, "payload", self.name, named)
        return NewJob(id, payload, group, due, repeat, priority, named=named is not None)

    def _target(self, tx: Optional[Transaction], conn: Any) -> Optional[Transaction]:
        """The transaction an add runs in: the store's, the application's connection's, or None for its own."""
        if tx is not None and conn is not None:
            raise InvalidArgument("give tx= or conn=, not both", queue=self.name)
        if tx is not None:
            if not isinstance(tx, Transaction) or tx.closed:
                raise InvalidArgument("tx= must be an open store.transaction()", queue=self.name)
            return tx
        if conn is not None:
            return self._ctx.backend.adopt(conn, self.name)
        if self._ctx.backend.in_transaction():
            raise InvalidArgument("a store.transaction() is open in this thread: pass tx= to add in it",
                                  queue=self.name)
        return None

    # Reading

    def _state(self, row: JobRow, now: float, added: bool = False) -> JobState:
        return state_of(row, now, self.options.attempts, lambda: self._ahead(row, now), added=added)

    def _ahead(self, row: JobRow, now: float) -> int:
        """``JobState.ahead``, counted when first read: one query of the store, which must still be open."""
        if self._ctx.closed:
            raise Closed(f"the store {self._ctx.backend.location!r} was closed: ahead, read only when first asked "
                         "for, can no longer be counted", queue=self.name, job_id=row.id)
        return self._ctx.backend.ahead(row, now)

    def get(self, id: str) -> Optional[JobState]:
        """The job with this id, or None where the queue keeps none."""
        return resolved(self._get(id))

    async def get_async(self, id: str) -> Optional[JobState]:
        """``get`` for ``await``: the read runs in a thread, not on the loop."""
        return await awaited(self._get(id))

    def _get(self, id: str) -> "Steps[Optional[JobState]]":
        check_text_id(id, "id", self.name)
        self._ctx.check_open()
        now = self._ctx.clock.now()
        row = visible((yield lambda: self._ctx.backend.get(self.name, id)), now)
        return self._state(row, now) if row else None

    def detail(self, id: str) -> Optional[tuple[JobState, JobDetail]]:
        """The job with this id and what an operator looks at beyond it: the steps kept under it (their
        answers as JSON text) and who holds its lease; None where the queue keeps no such job."""
        check_text_id(id, "id", self.name)
        self._ctx.check_open()
        now = self._ctx.clock.now()
        row = visible(self._ctx.backend.get(self.name, id), now)
        if row is None:
            return None
        return self._state(row, now), self._ctx.backend.detail(row.seq)

    def jobs(self, state: Optional[JobStateName] = None, group: Optional[str] = None, limit: int = 100,
             after: Optional[str] = None) -> list[JobState]:
        """A page of the queue's jobs in the order of their ids; the next page is ``after=`` the last id.

        Ids that tinystore makes begin with the time they were added, so
        they page in that order.
        """
        return resolved(self._jobs(state, group, limit, after))

    async def jobs_async(self, state: Optional[JobStateName] = None, group: Optional[str] = None, limit: int = 100,
                         after: Optional[str] = None) -> list[JobState]:
        """``jobs`` for ``await``: the read runs in a thread, not on the loop."""
        return await awaited(self._jobs(state, group, limit, after))

    def _jobs(self, state: Optional[str], group: Optional[str], limit: int,
              after: Optional[str]) -> "Steps[list[JobState]]":
        if state is not None and state not in STATES[:5]:
            raise InvalidArgument(f"state={state!r} must be one of {', '.join(STATES[:5])}", queue=self.name)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
            raise InvalidArgument(f"limit={limit!r} must be an int from 1 to 10000", queue=self.name)
        self._ctx.check_open()
        now = self._ctx.clock.now()
        rows = yield lambda: self._ctx.backend.jobs(self.name, state, group, limit, after, now)
        return [self._state(r, now) for r in rows]

    def usage(self, groups: int = 5) -> dict[str, Any]:
        """How full the queue's limits are now: ``rate_used``, its starts in the current window of its
        ``rate`` (None where it has none), and ``busiest_groups``, its ``groups`` (1 to 100) groups with
        the most running jobs, busiest first, as ``{"group": name, "running": n}``. The limits themselves
        are in ``options`` (``reload()`` reads what the store keeps)."""
        if isinstance(groups, bool) or not isinstance(groups, int) or not 1 <= groups <= 100:
            raise InvalidArgument(f"groups={groups!r} must be an int from 1 to 100", queue=self.name)
        self._ctx.check_open()
        rate = self.options.rate
        now = self._ctx.clock.now()
        used = self._ctx.backend.usage(self.name, now - rate[1] if rate else now, groups)
        return {"rate_used": used.started if rate else None,
                "busiest_groups": [{"group": g.grp, "running": g.running} for g in used.groups]}

    # Changing

    def cancel(self, id: str) -> bool:
        """Take a scheduled, waiting or running job away (JOB-12); True where it took one."""
        return resolved(self._cancel(id))

    async def cancel_async(self, id: str) -> bool:
        """``cancel`` for ``await``."""
        return await awaited(self._cancel(id))

    def _cancel(self, id: str) -> "Steps[bool]":
        check_text_id(id, "id", self.name)
        self._ctx.check_open()
        # The notice of its commit tells the handler running it, in this process or another.
        return (yield self._ctx.backend.cancel(self.name, id, self._ctx.clock.now())) is not None

    def retry(self, id: str) -> bool:
        """Run a failed job again, its attempts from zero; True where a failed job had that id."""
        return resolved(self._retry(id))

    async def retry_async(self, id: str) -> bool:
        """``retry`` for ``await``."""
        return await awaited(self._retry(id))

    def _retry(self, id: str) -> "Steps[bool]":
        check_text_id(id, "id", self.name)
        self._ctx.check_open()
        retried: bool = yield self._ctx.backend.retry_failed(self.name, id, self._ctx.clock.now())
        return retried

    # Pausing

    def pause(self) -> bool:
        """Stop every process from starting the queue's jobs; returns once the pause is kept: True, or
        False where the queue was paused already (nothing changed).

        Every claim reads the pause in its own transaction, so no claim that
        begins after this returns starts a job of the queue, in any process;
        the commit's notice wakes every worker of the queue. Its running jobs go
        on, renew and settle; adds, cancels and retries are accepted; due jobs
        and repeating jobs wait (a repeating job runs once on ``resume`` for the
        times it missed). Declaring the queue again (``store.queue`` with
        options) keeps the pause: only ``resume`` ends it.
        """
        return resolved(self._set_paused(True))

    async def pause_async(self) -> bool:
        """``pause`` for ``await``."""
        return await awaited(self._set_paused(True))

    def resume(self) -> bool:
        """End a pause: the queue's due jobs start again in every process, in start order (JOB-01). True, or
        False where the queue was not paused (nothing changed)."""
        return resolved(self._set_paused(False))

    async def resume_async(self) -> bool:
        """``resume`` for ``await``."""
        return await awaited(self._set_paused(False))

    @property
    def paused(self) -> bool:
        """Whether the queue is paused, as the store keeps it now (another process may have changed it)."""
        self._ctx.check_open()
        kept = self._ctx.backend.load_options(self.name)
        return kept is not None and kept.paused

    def _set_paused(self, paused: bool) -> "Steps[bool]":
        self._ctx.check_open()
        changed = yield self._ctx.backend.set_paused(self.name, paused)
        if changed is None:
            raise InvalidArgument(f"no queue named {self.name!r} in the store", queue=self.name)
        return bool(changed)

    def cancel_many(self, state: Optional[JobStateName] = None, group: Optional[str] = None,
                    ids: Optional[Iterable[str]] = None) -> int:
        """Take away the scheduled, waiting and running jobs that ``jobs(state=, group=)`` lists, each as
        ``cancel`` takes one (JOB-12); with ``ids``, only those of them that have these ids. Returns
        how many were taken.

        It walks the queue in chunks of a few hundred jobs, each chunk its own
        short transaction, so that other writes go on meanwhile; each job is
        acted on at most once, and jobs added after the call began are not
        touched. With no filter at all, every job of the queue that can be
        cancelled is. A ``state`` of done or failed names no job that can be
        cancelled, and is refused.
        """
        return resolved(self._cancel_many(state, group, ids))

    async def cancel_many_async(self, state: Optional[JobStateName] = None, group: Optional[str] = None,
                                ids: Optional[Iterable[str]] = None) -> int:
        """``cancel_many`` for ``await``. A task cancelled while it awaits leaves the chunks committed
        before it as they are, and no chunk half done."""
        return await awaited(self._cancel_many(state, group, ids))

    def _cancel_many(self, state: Optional[str], group: Optional[str], ids: Optional[Iterable[str]]) -> "Steps[int]":
        pick = yield from self._pick("cancel_many", state, group, ids, ("scheduled", "waiting", "running"))
        return (yield from self._walk(pick, self._ctx.backend.cancel_chunk))

    def retry_many(self, state: Optional[JobStateName] = None, group: Optional[str] = None,
                   ids: Optional[Iterable[str]] = None) -> int:
        """Run again the failed jobs that ``jobs(state="failed", group=)`` lists, each as ``retry`` runs
        one (its attempts from zero); with ``ids``, only those of them that have these ids. Returns how
        many will run again. It walks the queue as ``cancel_many`` does; ``state`` may only be
        ``"failed"`` (or None, which means the same).
        """
        return resolved(self._retry_many(state, group, ids))

    async def retry_many_async(self, state: Optional[JobStateName] = None, group: Optional[str] = None,
                               ids: Optional[Iterable[str]] = None) -> int:
        """``retry_many`` for ``await``, as ``cancel_many_async`` is ``cancel_many``'s."""
        return await awaited(self._retry_many(state, group, ids))

    def _retry_many(self, state: Optional[str], group: Optional[str], ids: Optional[Iterable[str]]) -> "Steps[int]":
        pick = yield from self._pick("retry_many", state, group, ids, ("failed",))
        return (yield from self._walk(pick, self._ctx.backend.retry_chunk))

    def _pick(self, call: str, state: Optional[str], group: Optional[str], ids: Optional[Iterable[str]],
              states: tuple[str, ...]) -> "Steps[Pick]":
        """What ``call`` acts on, every value checked before anything is written."""
        if state is not None and state not in states:
            names = ", ".join(states[:-1]) + " or " + states[-1] if len(states) > 1 else states[0]
            raise InvalidArgument(f"{call} acts on {names} jobs: state={state!r} names none of them "
                                  "(give one of those, or None for all of them); nothing was written",
                                  queue=self.name)
        grp = check_text_id(group, "group", self.name) if group is not None else None
        picked = None
        if ids is not None:
            if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
                raise InvalidArgument(f"ids={ids!r} must be a list of job ids", queue=self.name)
            picked = tuple(sorted({check_text_id(id, "id", self.name) for id in ids}))
        self._ctx.check_open()
        return Pick(state, grp, picked, (yield self._ctx.backend.last_seq))

    def _walk(self, pick: Pick, chunk: Callable[..., Any]) -> "Steps[int]":
        """Run ``chunk`` (the backend's, one transaction each) from the first id to the last; the jobs it
        acted on. Each chunk is asked for once the one before committed."""
        acted, after = 0, ""
        while after is not None:
            done = yield chunk(self.name, pick, after, self._ctx.clock.now())
            acted += done.acted
            after = done.after
        return acted

    # Watching

    def watch(self, id: str) -> Iterator[JobState]:
        """Yield the job as it is, then each change, until it is done, failed or cancelled (JOB-13)."""
        check_text_id(id, "id", self.name)
        return self._watches.watch(self.name, self._attempts, id)

    def watch_async(self, id: str) -> AsyncIterator[JobState]:
        """``watch`` for ``async for``."""
        check_text_id(id, "id", self.name)
        return self._watches.watch_async(self.name, self._attempts, id)

    def wait(self, id: str, timeout: Optional[Duration] = None) -> Optional[JobState]:
        """Wait until the job ends and return its last state: done (with its ``result``), failed (with its
        error) or cancelled; None where the queue keeps no job with this id. Past ``timeout`` (a
        duration; None waits as long as it takes) ``TimeoutError`` is raised, and the job goes on. A
        repeating job never ends: waiting for one is refused (watch it instead)."""
        check_text_id(id, "id", self.name)
        return self._watches.wait(self.name, self._attempts, id, self._timeout(timeout, id))

    async def wait_async(self, id: str, timeout: Optional[Duration] = None) -> Optional[JobState]:
        """``wait`` for ``await``."""
        check_text_id(id, "id", self.name)
        return await self._watches.wait_async(self.name, self._attempts, id, self._timeout(timeout, id))

    def _attempts(self) -> int:
        return self.options.attempts

    def _timeout(self, timeout: Optional[Duration], id: str) -> Optional[float]:
        if timeout is None:
            return None
        try:
            return parse_duration(timeout, "timeout")
        except InvalidArgument as exc:
            raise InvalidArgument(str(exc), queue=self.name, job_id=id) from None

    # Handling

    def work(self, handler: Callable[..., Any]) -> Callable[..., Any]:
        """Register the queue's handler: ``def handler(payload, run)`` or ``async def``.

        Where ``payload`` is annotated with a dataclass or a pydantic model,
        the handler gets an instance of it; a job whose payload no longer
        fits the type fails for good, saying why, and the queue goes on.

        A queue has one handler: registering another function for it is
        ``InvalidArgument`` naming both, and the first stays. Registering the
        same function again (or one equal to it) keeps one.
        """
        if not callable(handler):
            raise InvalidArgument(f"the handler must be callable, not {handler!r}", queue=self.name)
        if self.handler is not None and self.handler != handler:
            raise InvalidArgument(f"the queue already has a handler, {_name_of(self.handler)}: a queue has one, so "
                                  f"{_name_of(handler)} is not registered", queue=self.name)
        self.handler = handler
        self.decode = decoder(handler)
        return handler


def _name_of(handler: Callable[..., Any]) -> str:
    """A handler as an error names it: its module and qualified name, where it has them."""
    name = getattr(handler, "__qualname__", None)
    if name is None:  # a callable object
        return repr(handler)
    module = getattr(handler, "__module__", None)
    return f"{module}.{name}" if module else name


def declare(queue: Queue, payload: Any, rule: Repeat) -> JobState:
    """A schedule's one job, as this declaration says (``store.schedule``): the newest declaration sets
    its rule and payload."""
    ctx = queue._ctx
    ctx.check_open()
    now = ctx.clock.now()
    job = queue._new_job(Job(payload, id=queue.name, repeat=rule), now)
    added = ctx.backend.declare(queue.name, job, now).result()
    return queue._state(added.row, now, added=added.added)
