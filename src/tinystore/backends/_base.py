"""The one interface between a store and its database: what a new backend implements.

The core (``Store``, ``Queue``, the worker, watches) knows jobs, payloads,
options and decisions; a backend knows rows, JSON text and its database.
Writes return a ``concurrent.futures.Future`` that resolves once the write is
durable (committed), so that a sync caller waits on it and a worker's event
loop awaits it. A backend over a network runs no write on the caller's
thread, so that the loop never waits for a round trip; the SQLite backend
runs one there when its write lock is free, as a local commit costs less
than handing it to another thread (see ``sqlite/_writer``). Reads run on the
caller's thread; the worker calls none from its loop (it asks for them in a
thread, or gets what it needs from the result of a write).

Every error a backend meets in its own work leaves it as a ``tinystore``
error (``_errors``) that names the store and, where given, the queue; the
application's own SQL (``Transaction.execute``, ``query``) raises its
driver's errors about that SQL (a syntax error, a constraint), as that SQL
is the database's own.

Times are seconds since the epoch, from the store's clock, given by the core.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager, Iterable, Optional

from .._options import QueueOptions
from .._settle import Decision
from .._transaction import Transaction
from ._reads import Reads


@dataclass(frozen=True)
class JobRow:
    """A job as stored. ``state`` is queued, running, done or failed; ``payload``, ``error``,
    ``progress`` and ``result`` are as stored (text, or bytes where the row was damaged), read
    defensively by ``_jobstate``; ``repeat`` is its rule's JSON text where it repeats."""

    seq: int
    queue: str
    id: str
    payload: Any
    grp: Optional[str]
    state: str
    at: float
    attempt: int
    error: Any
    progress: Any
    expires: Optional[float]
    result: Any = None
    repeat: Optional[str] = None
    priority: int = 0


@dataclass(frozen=True)
class Added:
    """One job of an add: the job the queue keeps under its id, and whether this add wrote it (JOB-10)."""

    row: JobRow
    added: bool


@dataclass(frozen=True)
class NewJob:
    id: str
    payload: str
    grp: Optional[str]
    at: float
    repeat: Optional[str] = None  # the rule's JSON text (``_repeat``), for a job that repeats
    priority: int = 0
    batch: Optional[str] = None  # the id of the batch it joins
    named: bool = True  # False where tinystore made the id: errors then speak of "a new job"


@dataclass(frozen=True)
class BatchRow:
    """A batch as stored: its counts of jobs joined and ended, its jobs not ended by state, and its then
    job (its id and the time it leaves) once added."""

    id: str
    then_queue: str
    closed_at: Optional[float]
    total: int
    done: int
    failed: int
    cancelled: int
    then_id: Optional[str]
    then_expires: Optional[float]
    scheduled: int
    waiting: int
    running: int


@dataclass(frozen=True)
class Claimed:
    """A job a claim took: its lease is ``(seq, attempt)``; ``repeat`` its rule's JSON text where it repeats."""

    seq: int
    id: str
    payload: str
    grp: Optional[str]
    at: float
    attempt: int
    repeat: Optional[str] = None


@dataclass(frozen=True)
class Settlement:
    """The end of one attempt, named by its lease, with what the core decided (``_settle``)."""

    seq: int
    attempt: int
    grp: Optional[str]
    decision: Decision
    began: Optional[float] = None  # when its handler began and ended, kept with the attempt (None: given back
    ended: Optional[float] = None  # unrun, as a claim that stops does)


@dataclass(frozen=True)
class Cycle:
    """What one claim cycle did: jobs claimed, settlements that were stale, when to look again, and the
    queue's options as the store keeps them (another process may have changed them)."""

    claimed: list[Claimed]
    stale: list[Settlement]
    wake_at: Optional[float]
    options: QueueOptions


@dataclass(frozen=True)
class Change:
    """One change of a watched job, in commit order; ``state`` is None where the job left the queue."""

    id: int
    job: int
    state: Optional[str]
    at: float
    attempt: int
    error: Optional[str]
    progress: Optional[str]


@dataclass(frozen=True)
class Watched:
    """Watched jobs in one snapshot: the rows (by seq), and each one's changes after its cursor, in order."""

    rows: dict[int, JobRow]
    changes: list[Change]


@dataclass(frozen=True)
class Step:
    name: str
    attempt: int
    answer: str


@dataclass(frozen=True)
class Lease:
    """Who holds a job's lease: the attempt, when it runs out unless renewed, and the holding process."""

    attempt: int
    expires: float
    pid: Optional[int]
    host: Optional[str]


@dataclass(frozen=True)
class AttemptRecord:
    """One attempt of a job as kept: when its handler began (None where not known) and ended, and its
    error (None where it did not fail)."""

    attempt: int
    began: Optional[float]
    ended: float
    error: Optional[str]


@dataclass(frozen=True)
class JobDetail:
    """What an operator looks at beyond a job's state: the steps kept under it, its lease, and its last
    attempts (at most ``KEPT_ATTEMPTS``), first to last."""

    steps: list[Step]
    lease: Optional[Lease]
    attempts: list[AttemptRecord] = field(default_factory=list)


@dataclass(frozen=True)
class QueueCount:
    """Jobs of one queue in one stored state; ``oldest_due`` is the time the oldest due one was due;
    ``repeating`` how many of them repeat."""

    queue: str
    state: str  # scheduled, waiting, running, done or failed
    count: int
    oldest_due: Optional[float]
    repeating: int = 0


@dataclass(frozen=True)
class Recent:
    """A queue's runs begun, jobs done and jobs failed for good in the last minute."""

    queue: str
    started: int
    done: int
    failed: int


@dataclass(frozen=True)
class Stats:
    queues: list[str]
    counts: list[QueueCount]
    recent: list[Recent]
    paused: frozenset[str] = frozenset()  # the queues paused


@dataclass(frozen=True)
class Pick:
    """Which jobs of a queue ``cancel_many`` or ``retry_many`` acts on: those ``queue.jobs`` lists with
    ``state`` and ``grp`` (None: any), and, where ``ids`` is given (sorted, each once), only those of
    them; of those, only the jobs in the store when the walk began (``last``: the highest seq then)."""

    state: Optional[str]
    grp: Optional[str]
    ids: Optional[tuple[str, ...]]
    last: int


@dataclass(frozen=True)
class Chunk:
    """What one transaction of a walk over many jobs did: how many jobs it acted on, and the id the next
    one begins after (None: the walk is over)."""

    acted: int
    after: Optional[str]


@dataclass(frozen=True)
class Notice:
    """What one commit to the store changed, as far as workers and watchers care.

    ``queues``: each queue where work may have come (jobs added or requeued,
    room freed by an ended lease, options changed), with who in this process
    wrote it (its ``source``), or None; a worker wakes those queues' runners,
    except its own. ``cancelled``: jobs cancelled, whose running handler must
    stop, wherever it runs. ``everything``: it cannot say (a notice missed, a
    clock that moved): any queue may have work. ``ended``: this process was
    found dead and its registration removed (see ``postgres/_keeper``): its
    leases are renewed at once, and the attempts whose lease is gone are taken
    away. ``lost``: this process was cut off from the store for so long that
    another may find it dead at any moment: every attempt it runs is taken
    away. Every notice also means that jobs may have changed, for watchers.
    """

    queues: dict[str, Any] = field(default_factory=dict)
    cancelled: frozenset[int] = frozenset()
    everything: bool = False
    ended: bool = False
    lost: bool = False


NoticeListener = Callable[[Notice], None]
FailureListener = Callable[[BaseException], Optional[float]]  # how long to wait before hearing again; None: stop


class Backend(Reads, ABC):
    """Everything a store asks of its database (and the reads of an operator's page, ``_reads``)."""

    location: str  # where the store is, for messages: a file's path, or a URL without its password

    # Lifecycle and liveness

    @abstractmethod
    def register(self, now: float) -> int:
        """Register this process as alive, and end the leases of every process found dead (DUR-03).
        Returns this process's owner id, which every lease it takes names."""

    def serving(self) -> None:
        """Before a worker serves: make what holding leases needs where it is not made yet (on PostgreSQL
        behind a pooler, the process's registration on its direct connection); raise ``Error`` saying why
        where this store cannot serve."""

    @abstractmethod
    def end_dead(self, now: float) -> int:
        """End now the leases of every registered process that is no longer alive (DUR-03), as
        ``register`` does at open; returns how many processes it found dead. The core calls it on a
        timer while a worker serves, so that a crash is noticed without waiting for a lease to run out."""

    def dead_due(self, queues: Optional[Iterable[str]] = None) -> Optional[float]:
        """Seconds until a process that the last ``end_dead`` suspected dead can be found dead (PostgreSQL:
        its liveness lock is gone, its grace not yet over), among those holding leases of ``queues`` where
        given; 0 where one is due now, None where none is suspected (SQLite: a look decides at once).
        ``tinystore._dead`` looks again then."""
        return None

    @abstractmethod
    def forked(self) -> bool:
        """Whether this process is a forked child of the one that opened the store: then everything but
        ``close`` raises, and ``close`` only lets go of what belongs to the parent."""

    @abstractmethod
    def close(self) -> None:
        """End this process's registration and let go of every connection. Safe to call twice."""

    # Notices

    @abstractmethod
    def listen(self, on_notice: NoticeListener, on_failure: FailureListener) -> None:
        """From now on, tell ``on_notice`` of every commit to the store: this process's own as they
        commit, before their writers' futures resolve, other connections' as the backend hears of them
        (a poll, LISTEN/NOTIFY). ``on_failure`` is told once, when hearing cannot go on. Called once."""

    # Queues

    @abstractmethod
    def load_options(self, queue: str) -> Optional[QueueOptions]:
        """The options the store keeps for ``queue``, or None for a queue it does not know."""

    @abstractmethod
    def save_options(self, queue: str, options: QueueOptions) -> Future[None]:
        """Keep ``options`` for ``queue``, for every process; resolves to None."""

    @abstractmethod
    def set_paused(self, queue: str, paused: bool) -> Future[bool]:
        """Pause (or resume) ``queue`` for every process: from its commit on, no claim of the queue takes a
        job, while settlements, expiries and renewals go on; the commit's notice wakes the queue's runners
        everywhere. Resolves to whether that changed it (False: it was so already, nothing written), or
        None where the store keeps no queue of that name (nothing written)."""

    @abstractmethod
    def queue_names(self) -> list[str]:
        """Every queue the store keeps, by name."""

    # Jobs

    @abstractmethod
    def add(self, queue: str, jobs: list[NewJob], now: float, tx: Optional[Transaction] = None) -> Future[list[Added]]:
        """Add jobs in one transaction (``tx``'s, where given: the future is then resolved already);
        resolves to one ``Added`` per job, in order. An id the queue keeps adds nothing (JOB-10)."""

    @abstractmethod
    def declare(self, queue: str, job: NewJob, now: float) -> Future[Added]:
        """A schedule's job (a job that repeats by a rule) as its newest declaration says; resolves to an ``Added``. Where no
        job has its id, it is added. Where one does, its payload and rule become the declared ones, and
        where it is queued and its rule changed, it waits for ``job.at`` (the new rule's first time); a
        job of that id that no longer repeats (done or failed) is replaced. Declarations made at once by
        several processes make one job."""

    @abstractmethod
    def get(self, queue: str, id: str) -> Optional[JobRow]:
        """The job with this id, or None."""

    @abstractmethod
    def ahead(self, row: JobRow, now: float) -> int:
        """How many due jobs of its queue start before this waiting job."""

    @abstractmethod
    def ahead_many(self, queue: str, rows: list[JobRow], now: float) -> dict[int, int]:
        """``ahead`` of several waiting jobs of one queue, by seq, in one query."""

    @abstractmethod
    def jobs(self, queue: str, state: Optional[str], grp: Optional[str], limit: int, after: Optional[str],
             now: float) -> list[JobRow]:
        """A page of a queue's jobs in id order, after the id ``after``; ``state`` is a JobState state."""

    @abstractmethod
    def detail(self, seq: int) -> JobDetail:
        """The steps kept under a job, and its lease's holder."""

    @abstractmethod
    def cancel(self, queue: str, id: str, now: float) -> Future[Optional[JobRow]]:
        """Take a scheduled, waiting or running job away (JOB-12), telling every process that runs it;
        resolves to its JobRow as it was, or None when no such job had that id."""

    @abstractmethod
    def retry_failed(self, queue: str, id: str, now: float) -> Future[bool]:
        """A failed job waits again, its attempts from zero; resolves to whether one had that id."""

    @abstractmethod
    def last_seq(self) -> int:
        """The highest seq of the store's jobs now (0 where it has none): where a walk over many jobs ends."""

    @abstractmethod
    def cancel_chunk(self, queue: str, pick: Pick, after: str, now: float) -> Future[Chunk]:
        """One transaction of ``cancel_many``: the jobs ``pick`` names after the id ``after`` (a few
        hundred rows read at most), each scheduled, waiting or running one taken away as ``cancel``
        takes it; resolves to a ``Chunk``."""

    @abstractmethod
    def retry_chunk(self, queue: str, pick: Pick, after: str, now: float) -> Future[Chunk]:
        """One transaction of ``retry_many``: as ``cancel_chunk``, each failed job waiting again as
        ``retry_failed`` makes it; resolves to a ``Chunk``."""

    @abstractmethod
    def stats(self, now: float) -> Stats:
        """Jobs per queue and state, and the last minute's runs, in one snapshot."""

    @abstractmethod
    def maintain(self, now: float, batch: int, progress: Optional[Callable[[int], None]] = None) -> int:
        """Remove what expired by ``now``, a batch per transaction; ``progress(removed so far)`` after
        each. Returns how many jobs were removed."""

    # Batches

    @abstractmethod
    def create_batch(self, id: str, then: NewJob, queue: str, now: float) -> Future[None]:
        """A new open batch whose then job goes to ``queue`` with ``then``'s payload (a JSON object's
        text), group and priority (its id, the batch's, and its time are given when it is added);
        resolves to None."""

    @abstractmethod
    def close_batch(self, id: str, now: float) -> Future[bool]:
        """No more jobs join the batch; where every job of it has ended, its then job is added in the same
        transaction. Resolves to False where the store keeps no such batch."""

    @abstractmethod
    def batch(self, id: str, now: float) -> Optional[BatchRow]:
        """The batch with this id, in one snapshot, or None."""

    # Watching (JOB-13)

    @abstractmethod
    def watch_begin(self, owner: int, seq: int) -> Future[Any]:
        """From its commit on, every change of the job is logged for this process's watchers."""

    @abstractmethod
    def watch_end(self, owner: int, seq: int) -> Future[Any]:
        """This process no longer watches the job: its log may go."""

    @abstractmethod
    def watched(self, cursors: dict[int, int]) -> Watched:
        """In one snapshot: the jobs (by seq), and the changes of each logged after its cursor (a
        change id), in order."""

    @abstractmethod
    def was_cancelled(self, seq: int) -> bool:
        """Whether the job that left under this seq was cancelled (else it was done)."""

    # Workers

    @abstractmethod
    def cycle(self, queue: str, owner: int, settlements: list[Settlement], want: int,
              now: "float | Callable[[], float]", source: Any = None) -> Future[Cycle]:
        """In one transaction: apply the settlements whose attempt still holds its lease, end the
        queue's leases that ran out (``_settle.decide_lost``), and claim up to ``want`` due jobs under
        the limits the store keeps, so that no two processes take the same last place (LIM-01..03).
        Resolves to a ``Cycle``.

        ``now`` may be the clock's ``now`` itself: it is then read once the transaction may write, so
        that leases and rate-window starts carry the time they were taken. ``source`` (the worker) is
        named in the notice of this commit, so that it does not wake itself.
        """

    @abstractmethod
    def renew(self, queue: str, owner: int, expires: float, seqs: list[int]) -> Future[Any]:
        """Renew this process's leases of ``queue`` until ``expires``; resolves to the leases of ``seqs`` it
        still holds, as (job, attempt) (an attempt missing from it was cancelled, or its lease ended)."""

    @abstractmethod
    def progress(self, seq: int, attempt: int, value: str) -> Future[bool]:
        """Keep an attempt's progress (JSON text); resolves to False when it no longer holds its lease."""

    @abstractmethod
    def step_answer(self, seq: int, name: str) -> Optional[str]:
        """The answer kept under a job for step ``name`` (JSON text), or None."""

    @abstractmethod
    def keep_step(self, seq: int, attempt: int, name: str, answer: str) -> Future[bool]:
        """Keep a step's answer; resolves to False when the attempt no longer holds its lease."""

    @abstractmethod
    def transact(self, lease: tuple[int, int], name: str, fn: Callable[[Transaction], Any],
                 encode: Callable[[Any], str]) -> tuple[bool, str]:
        """``run.transaction`` (JOB-14), exactly once: in one write transaction, refuse (``Conflict``,
        rolled back) unless the attempt holds its lease; return ``(True, answer)`` where step ``name``
        was kept already; else call ``fn(tx)``, keep ``encode(its answer)`` under the step and commit,
        returning ``(False, answer)``. Two attempts can never both run ``fn`` to a commit: the lease is
        locked by the transaction and the step is kept under a unique key."""

    # The application's own rows

    @abstractmethod
    def transaction(self) -> ContextManager[Transaction]:
        """One write transaction on this thread for the application's SQL and jobs added with ``tx=``;
        commit on leaving, roll back on an exception (JOB-02)."""

    @abstractmethod
    def in_transaction(self) -> bool:
        """Whether this thread has a ``transaction()`` open (its writes must go through it)."""

    @abstractmethod
    def query(self, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
        """Run one query of the application's on this thread's connection; its rows."""

    @abstractmethod
    def adopt(self, conn: Any, queue: str) -> Transaction:
        """The application's own connection (a driver connection, a SQLAlchemy Connection or Session)
        as a Transaction that an add runs in, committing with whatever it has open (JOB-02); a
        connection of another kind, or to another database, is refused with ``InvalidArgument``."""
