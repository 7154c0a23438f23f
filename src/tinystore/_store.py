"""A store: one database holding queues, their jobs, and the application's rows."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
from contextlib import asynccontextmanager, contextmanager
from typing import Any, AsyncIterator, Callable, Iterator, Optional, Sequence, Unpack

from ._awaiting import Steps, awaited, resolved

from ._batch import Batch, BatchState, then_job
from ._batch import state_of as batch_state_of
from ._clock import Clock
from ._context import Context
from ._dead import DeadLooks
from ._durations import Duration, parse_duration
from ._errors import InvalidArgument
from ._events import Events
from ._notify import Notices
from . import _repeat
from ._outage import Outages
from ._options import QueueOptionArgs, QueueOptions, parse_options
from ._queue import Queue, declare
from ._lanes import Lanes, transaction_in_lane
from ._transaction import AsyncTransaction, Transaction
from ._values import check_queue_name, from_timestamp, new_id
from ._watch import Watches
from ._worker import Worker
from .backends import DURABILITY, LOCK_TIMEOUT, open_backend
from .backends._base import Backend

log = logging.getLogger("tinystore.store")

MAINTAIN_EVERY = 60.0


def open(target: "str | os.PathLike[str]", *, durability: str = "full", clock: Optional[Clock] = None,
         lock_timeout: Any = LOCK_TIMEOUT, schema: Optional[str] = None, direct: Optional[str] = None) -> "Store":
    """Open the store in a SQLite file, or in a PostgreSQL database given by its URL
    (``postgresql://user@host:5432/db``), creating the file and tinystore's tables where absent.

    As in sqlite3 and SQLAlchemy, ``"sqlite:///app.db"`` is the file
    ``app.db`` of the working folder and ``"sqlite:////srv/app.db"`` the file
    ``/srv/app.db``. ``":memory:"`` (or ``"sqlite://"``,
    ``"sqlite:///:memory:"``) is a store for tests: it leaves no file where
    the application runs, nothing is synced to the disk (``durability`` is
    "off" whatever is given), workers of this process serve it, every
    contract but durability holds, and ``close`` removes all of it. Each
    such open is a store of its own, which no other process can reach. (It
    is a SQLite file in a private temporary folder: SQLite's own in-memory
    database belongs to one connection, and a store uses several.)

    On PostgreSQL tinystore's tables are in their own schema: ``tinystore``,
    or ``schema`` where given; the application's tables are never touched.

    Behind a pooler in transaction mode (PgBouncer), ``target`` is the
    pooler's URL, which adds, reads and the application's transactions use,
    and ``direct`` a URL of the same database that reaches the server
    itself, for what needs a session of its own (a worker's liveness lock,
    LISTEN), connected to only when a worker starts or a job is watched. A
    pooler is also found without ``direct``; a worker or a watch is then
    refused, saying so.

    ``durability="full"`` (the default) syncs every commit to the disk, so a
    power cut loses nothing that ``add`` returned; "normal" may lose the last
    commits on a power cut (never on a process crash); "off" is for tests.

    ``lock_timeout`` (30 s unless given; a duration) bounds how long a write,
    and this open, waits while another process holds the store's write lock:
    past it, ``tinystore.Locked`` says so, and nothing was written.
    """
    lock_timeout = parse_duration(lock_timeout, "lock_timeout")
    if durability not in DURABILITY:
        raise InvalidArgument(f"durability={durability!r} must be one of {', '.join(DURABILITY)}")
    backend = open_backend(target, durability=durability, lock_timeout=lock_timeout, schema=schema, direct=direct)
    return Store(backend, clock or Clock())


class Store:
    """Queues and their jobs in one database. Safe to use from many threads.

    ``tinystore.open`` makes one; its constructor is not for applications.
    """

    def __init__(self, backend: Backend, clock: Clock):
        self.clock = clock
        self._backend = backend
        outages = Outages()  # which background tasks fail now: an outage is logged once
        try:
            owner = backend.register(clock.now())
        except BaseException:  # no space, a lock held too long: leave nothing running behind
            backend.close()
            raise
        self._ctx = Context(backend, clock, owner, Notices(backend, outages), outages, DeadLooks(backend, clock))
        self._ctx.looks.arm()  # those that register's look left suspect are looked at again as their grace ends
        self._queues: dict[str, Queue] = {}
        self._lock = threading.Lock()
        self._watches = Watches(self._ctx)
        self._serving: dict[Worker, tuple[asyncio.AbstractEventLoop, threading.Event]] = {}
        self._background: Optional[threading.Thread] = None
        self._lanes = Lanes()  # the threads that transaction_async blocks run on
        clock.on_change(lambda: self._ctx.notices.fire())

    @property
    def location(self) -> str:
        """Where the store is: its file's path."""
        return self._backend.location

    def __repr__(self) -> str:
        return f"<tinystore.Store {self.location!r}>"

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # Queues

    def queue(self, name: str, **options: Unpack[QueueOptionArgs]) -> Queue:
        """The queue ``name``, with the options given changed for every process.

        The options are kept in the store, so every process enforces the same
        ones; an option not given keeps its kept value, or its default for a
        new queue (their types are ``tinystore.QueueOptionArgs``):

        - ``concurrency=None``: live leases of the queue at once, across every process (LIM-01).
        - ``rate=None``: job starts per period, across every process: ``"600/m"``, ``(5, "1s")`` (LIM-03).
        - ``group_concurrency=None``, ``group_rate=None``: the same, for each group (LIM-02, LIM-03).
        - ``attempts=10``: attempts counted before the job fails for good (JOB-04, JOB-07).
        - ``backoff=("1s", "1h")``: the first and the longest wait before a retry, doubling, ±10 % (JOB-07).
        - ``timeout="1m"``: how long one run of the handler may take, from when it begins; ``None`` for
          no timeout (JOB-09).
        - ``lease="30s"``: how long a vanished worker keeps a job; renewed every lease/2 (JOB-05).
        - ``dedupe=0``: how long a done job is kept, so that its id adds nothing (JOB-10, JOB-11).
        - ``keep="7d"``: how long a failed job is kept with its error (JOB-11).

        Durations are ``"500ms"``, ``"30s"``, ``"10m"``, ``"1h30m"``, ``"7d"``, seconds or a
        ``timedelta``. A bad option is ``InvalidArgument``, and nothing is kept. A paused queue stays
        paused whatever options are given: only ``Queue.resume`` ends a pause.
        """
        self._ctx.check_open()
        check_queue_name(name)
        with self._lock:
            kept = self._backend.load_options(name)
            try:
                wanted = parse_options(kept or QueueOptions(), options)
            except InvalidArgument as exc:
                raise type(exc)(str(exc), queue=name) from None
            if kept is None or wanted != kept:
                self._backend.save_options(name, wanted).result()
            queue = self._queues.get(name)
            if queue is None:
                queue = self._queues[name] = Queue(self._ctx, self._watches, name, wanted)
            queue.options = wanted
            return queue

    def schedule(self, name: str, *, cron: Optional[str] = None, every: Optional[Duration] = None,
                 zone: Optional[str] = None, payload: Any = None,
                 **queue_options: Unpack[QueueOptionArgs]) -> Queue:
        """Declare the schedule ``name``: a queue of that name holding one repeating job whose id is
        ``name``, run at the times of ``cron`` (5-field cron text, in the named ``zone``) or at every
        multiple of ``every`` (a duration) since the UNIX epoch, with ``payload``.

        Every process declares its schedules when it starts; the newest
        declaration sets the rule and the payload, and several processes
        declaring it make one job. A new rule moves a waiting job to the new
        rule's first time; a job running as it is declared keeps the time its
        run settles it for, and follows the new rule after that.
        ``queue_options`` are ``store.queue``'s.
        Returns the queue: register its handler with ``@schedule.work``.
        """
        check_queue_name(name)
        if (cron is None) == (every is None):
            raise InvalidArgument("give the schedule cron= or every=, one of them", queue=name)
        if every is not None and zone is not None:
            raise InvalidArgument("zone= is for cron=: every= counts from the UNIX epoch, in no zone", queue=name)
        try:
            rule: _repeat.Repeat
            if cron is not None:
                rule = _repeat.cron(cron, zone=zone)
            else:
                assert every is not None  # one of them is given: checked above
                rule = _repeat.every(every)
        except InvalidArgument as exc:
            raise InvalidArgument(str(exc), queue=name, job_id=name) from None
        queue = self.queue(name, **queue_options)
        declare(queue, payload, rule)
        return queue

    def queues(self) -> list[str]:
        """The names of every queue the store keeps."""
        return self._backend.queue_names()

    # Batches

    def batch(self, *, then: Any) -> Batch:
        """A new batch: jobs of any queues join it with ``batch=`` on ``add``/``add_many``, in any number of
        calls and processes, inside a transaction too; ``close()`` says no more will.

        ``then=(queue, payload)``: once the batch is closed and every job of
        it has ended (done, failed for good, or cancelled), a job is added
        to ``queue`` (a ``Queue`` of this store), exactly once, in the
        transaction that ends the last job, whatever crashes. ``payload`` is
        a JSON object (or a ``tinystore.Job`` of one, for its ``priority=``
        or ``group=``); the job gets it with ``"batch": {"id": ..., "done":
        n, "failed": n, "cancelled": n}`` beside its own keys, and the
        batch's id as its own. The batch is kept as long as its then job is.
        """
        self._ctx.check_open()
        if not isinstance(then, tuple) or len(then) != 2:
            raise InvalidArgument(f"then= must be (queue, payload), not {then!r}")
        queue, payload = then
        if not isinstance(queue, Queue) or self._queues.get(queue.name) is not queue:
            raise InvalidArgument(f"then=(queue, payload) takes a queue of this store, from store.queue(name), "
                                  f"not {queue!r}")
        job = then_job(queue.name, payload)
        if self._backend.in_transaction():
            raise InvalidArgument("a store.transaction() is open in this thread: make the batch before it",
                                  queue=queue.name)
        now = self.clock.now()
        id = new_id(now)
        self._backend.create_batch(id, job, queue.name, now).result()
        return Batch(self._ctx, id)

    def batch_state(self, id: Any) -> Optional[BatchState]:
        """The batch with this id (or a ``Batch``) as it is now: how many of its jobs are scheduled,
        waiting, running, done, failed and cancelled, whether it is closed, and its then job's id once
        added; None where the store keeps no such batch."""
        return resolved(self._batch_state(id))

    async def batch_state_async(self, id: Any) -> Optional[BatchState]:
        """``batch_state`` for ``await``: the read runs in a thread, not on the loop."""
        return await awaited(self._batch_state(id))

    def _batch_state(self, id: Any) -> "Steps[Optional[BatchState]]":
        id = id.id if isinstance(id, Batch) else id
        if not isinstance(id, str) or not id:
            raise InvalidArgument(f"a batch's id is a str, not {id!r}")
        self._ctx.check_open()
        now = self.clock.now()
        return batch_state_of((yield lambda: self._backend.batch(id, now)), now)

    # The application's rows

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """One write transaction for the application's rows and jobs added with ``tx=`` (JOB-02)."""
        self._ctx.check_open()
        with self._backend.transaction() as tx:
            yield tx

    @asynccontextmanager
    async def transaction_async(self) -> AsyncIterator[AsyncTransaction]:
        """``transaction`` for ``async with``: ``await tx.execute(...)``, and ``queue.add_async(..., tx=tx)``
        adds a job in it (JOB-02). It runs on a thread of its own, so that waiting for the write lock, the
        disk or the server never blocks the loop (ASY-01); a task cancelled anywhere in the block leaves
        it rolled back, or committed whole where the commit had begun (ASY-02)."""
        self._ctx.check_open()
        async with transaction_in_lane(self._lanes, self._backend.transaction) as tx:
            yield tx

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> int:
        """Run one statement in its own transaction; return the rows it changed."""
        with self.transaction() as tx:
            return tx.execute(sql, params)

    def query(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[tuple[Any, ...]]:
        """Run one query; return its rows."""
        self._ctx.check_open()
        return self._backend.query(sql, params)

    # Operations

    def stats(self) -> dict[str, dict[str, Any]]:
        """Per queue: jobs per state, how many of its jobs repeat (``repeating``: a schedule's queue has
        one), the age in seconds of the oldest due job, the last minute's runs, done and failed jobs, and
        whether it is ``paused``."""
        return resolved(self._stats())

    async def stats_async(self) -> dict[str, dict[str, Any]]:
        """``stats`` for ``await``: the read runs in a thread, not on the loop."""
        return await awaited(self._stats())

    def _stats(self) -> "Steps[dict[str, dict[str, Any]]]":
        self._ctx.check_open()
        now = self.clock.now()
        stats = yield lambda: self._backend.stats(now)
        def empty() -> dict[str, Any]:
            return {"scheduled": 0, "waiting": 0, "running": 0, "done": 0, "failed": 0, "repeating": 0,
                    "oldest_due_age": None, "started_last_minute": 0, "done_last_minute": 0,
                    "failed_last_minute": 0, "paused": False}
        out = {name: empty() for name in stats.queues}
        for name in stats.paused:
            out[name]["paused"] = True
        for c in stats.counts:
            entry = out.setdefault(c.queue, empty())
            entry[c.state] = c.count
            entry["repeating"] += c.repeating
            if c.oldest_due is not None:
                entry["oldest_due_age"] = max(0.0, now - c.oldest_due)
        for r in stats.recent:
            if r.queue in out:
                out[r.queue].update(started_last_minute=r.started, done_last_minute=r.done,
                                    failed_last_minute=r.failed)
        return out

    def maintain(self, progress: Optional[Callable[[int], None]] = None) -> dict[str, int]:
        """Remove now what is past ``keep`` and ``dedupe``: rows, payloads and steps leave the file.

        ``progress``, where given, is called with the count removed so far after each batch. On SQLite,
        where the store's last look for damage is a day old, this looks again (``integrity_check`` of
        tinystore's tables, logged; see the manual's "The command line", "A damaged file").
        """
        self._ctx.check_open()
        return {"removed": self._backend.maintain(self.clock.now(), 500, progress)}

    def minute_counts(self, minutes: int = 60) -> dict[str, list[dict[str, Any]]]:
        """Per queue, its runs begun, jobs done and jobs failed for good in each of the last ``minutes``
        minutes (1 to 1440; the store keeps a day), oldest first, as ``{"minute": its start (aware UTC),
        "started": n, "done": n, "failed": n}``; a minute in which nothing happened is left out."""
        if isinstance(minutes, bool) or not isinstance(minutes, int) or not 1 <= minutes <= 1440:
            raise InvalidArgument(f"minutes={minutes!r} must be an int from 1 to 1440")
        self._ctx.check_open()
        since = int(self.clock.now() // 60) - minutes + 1
        out: dict[str, list[dict[str, Any]]] = {}
        for c in self._backend.minute_counts(since):
            out.setdefault(c.queue, []).append({"minute": from_timestamp(c.minute * 60), "started": c.started,
                                                "done": c.done, "failed": c.failed})
        return out

    def on_change(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback()`` whenever the store may have changed: a commit of any process that gave a
        queue work (jobs added or requeued, room freed under a limit) or cancelled a job, another
        process's commit to a SQLite file, or the clock moved. It is called on the thread that heard it,
        and must return quickly. A job that ends under no limit may be told by nothing (its commit gives
        nobody work): who shows counts reads them again now and then too. Returns a function that stops
        the calls."""
        if not callable(callback):
            raise InvalidArgument(f"on_change takes a callable, not {callback!r}")
        self._ctx.check_open()
        def listener(notice: Any) -> None:
            callback()
        self._ctx.notices.subscribe(listener)
        return lambda: self._ctx.notices.unsubscribe(listener)

    # Serving

    def _served(self, queues: Optional[Sequence[str]]) -> list[Queue]:
        with self._lock:
            known = dict(self._queues)
        if queues is not None:
            missing = [q for q in queues if q not in known or known[q].handler is None]
            if missing:
                raise InvalidArgument(f"no handler is registered for queue(s) {', '.join(map(repr, missing))}")
            return [known[q] for q in queues]
        return [q for q in known.values() if q.handler is not None]

    def run_until_idle(self) -> None:
        """Run what is due now; return once nothing is due and nothing runs (for tests and scripts).

        Inside a ``store.transaction()`` of this thread it raises
        InvalidArgument: the workers would wait for that transaction's commit.
        """
        self._ctx.check_open()
        if self._backend.in_transaction():
            raise InvalidArgument("run_until_idle() inside a store.transaction() of this thread: its jobs are not "
                                  "committed, and the workers would wait for its commit; call it after the block")
        served = self._served(None)
        if not served:
            return
        self._backend.serving()
        if not _loop_running():
            asyncio.run(Worker(self._ctx, served).run_until_idle())
            return
        # Called from inside an event loop: run ours in a thread of its own.
        thread = threading.Thread(target=lambda: asyncio.run(Worker(self._ctx, served).run_until_idle()))
        thread.start()
        thread.join()

    async def serve_async(self, workers: Optional[int] = None, queues: Optional[Sequence[str]] = None,
                          grace: float = 30.0, handle_signals: bool = False) -> None:
        """Serve every queue that has a handler until the store is closed (or a signal, with handle_signals)."""
        self._ctx.check_open()
        served = self._served(queues)
        if not served:
            raise InvalidArgument("no queue has a handler: register one with @queue.work")
        if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
            raise InvalidArgument(f"workers={workers!r} must be an int of at least 1")
        grace = parse_duration(grace, "grace")
        self._backend.serving()
        loop = asyncio.get_running_loop()
        worker = Worker(self._ctx, served, workers, grace, maintain_every=MAINTAIN_EVERY)
        if handle_signals:
            self._handle_signals(loop, worker)
        finished = threading.Event()
        self._serving[worker] = (loop, finished)
        log.info("serving %s with %s", ", ".join(q.name for q in served), self.location,
                 extra={"queues": [q.name for q in served]})
        try:
            await worker.serve()  # raises why, when it could not go on: the store cannot be written, ...
        finally:
            del self._serving[worker]
            finished.set()
            if handle_signals:
                for sig in (signal.SIGINT, signal.SIGTERM):
                    loop.remove_signal_handler(sig)
            log.info("stopped serving %s", self.location)

    def _handle_signals(self, loop: asyncio.AbstractEventLoop, worker: Worker) -> None:
        """The first SIGINT or SIGTERM stops gracefully; a second stops at once, as a crash would (DUR-03)."""
        def on_signal(sig: signal.Signals) -> None:
            if worker.stopping.is_set():
                log.warning("second %s: stopping at once; the next open ends this process's leases", sig.name)
                os._exit(128 + sig)
            log.info("%s: finishing running handlers (grace %gs), claiming no more", sig.name, worker.grace)
            worker.stop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal, sig)

    def serve(self, workers: Optional[int] = None, queues: Optional[Sequence[str]] = None,
              grace: float = 30.0) -> None:
        """Serve until SIGINT or SIGTERM (in the main thread) or until the store is closed elsewhere.

        ``workers`` bounds each queue's handlers at once (200 async, 16 ``def`` unless given); a
        worker's ``def`` handlers share at most 64 threads (or ``workers``, if more). A store that
        cannot be written for a while (no space, an I/O error, the write lock held past
        ``lock_timeout``) is waited out; when it cannot go on (another error, or 5 minutes of such
        failures) the worker stops gracefully and this raises why, a ``tinystore.Error``.
        """
        handle = threading.current_thread() is threading.main_thread()
        asyncio.run(self.serve_async(workers, queues, grace, handle_signals=handle))

    def start(self, workers: Optional[int] = None, queues: Optional[Sequence[str]] = None,
              grace: float = 30.0) -> None:
        """Serve on a background thread (for a WSGI app); ``stop()`` shuts it down gracefully."""
        self._ctx.check_open()
        if self._background is not None:
            raise InvalidArgument("this store is already serving in the background")
        self._served(queues)  # refuse bad queues, and a store that cannot serve, here, not in the thread
        self._backend.serving()
        ready = threading.Event()

        async def serve() -> None:
            serving = asyncio.ensure_future(self.serve_async(workers, queues, grace))
            try:
                await asyncio.sleep(0)  # serve_async registers its worker before it first waits: stop() reaches it
            finally:
                ready.set()
            await serving

        self._background = threading.Thread(target=lambda: asyncio.run(serve()), name="tinystore-serve", daemon=True)
        self._background.start()
        ready.wait()

    def stop(self) -> None:
        """Stop serving: claim nothing more, let running handlers finish within the grace period."""
        for worker, (loop, _) in list(self._serving.items()):
            loop.call_soon_threadsafe(worker.stop)
        if self._serving:
            log.info("stopping: claiming no more; running handlers finish within the grace period")
        if self._background is not None and self._background is not threading.current_thread():
            self._background.join()
            self._background = None

    def close(self) -> None:
        """Stop serving, then give back what the store holds. Safe to call twice."""
        if self._ctx.closed or self._backend.forked():  # a forked child's copy: all of it is the parent's
            return
        serving = list(self._serving.values())
        self.stop()
        for _, finished in serving:  # serve() in other threads: wait until they settled what ran
            finished.wait()
        self._ctx.closed = True
        self._lanes.close()
        self._ctx.looks.close()
        self._watches.close()
        self._backend.close()


# Package-level hooks: what tinystore's own packages (the command line, metrics, Django) use of a Store
# beyond its public API.

def queues_served(store: Store, queues: Optional[Sequence[str]]) -> list[Queue]:
    """The queues ``store.serve(queues=queues)`` serves: those named, or every queue with a handler where
    None; ``InvalidArgument`` names any that has no handler."""
    return store._served(queues)


_observing = threading.Lock()


def observer(store: Store, make: Callable[[Store], Events]) -> Events:
    """The observer the store's core tells of its jobs (``_events``), made with ``make(store)`` the first
    time and told from then on by every worker and ``add`` of the store."""
    with _observing:
        if store._ctx.events is None:
            store._ctx.events = make(store)
        return store._ctx.events


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
