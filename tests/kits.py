"""Per-backend test kits: what the backend-neutral tests need to know about the backend under test.

The contract, crash and limit tests (``tests/contract``, ``tests/crash``,
``tests/limits``) run once per backend; the ``kit`` fixture hands them the kit
of the current one. A kit knows

- how to make a *target* for a test: what ``tinystore.open(target)`` takes (a
  file path for SQLite), and how to clean it up;
- how the application's own SQL is written on this backend: its placeholders
  (``kit.sql``), the DDL of the small tables tests create (``create_table``),
  its application connections and their errors;
- every raw look the tests take at tinystore's internal tables, each a named
  method that says what it shows, read beside tinystore (no store opened,
  nothing recovered, nothing written);
- every use of tinystore internals (private attributes) the tests need, each
  in one method here, so that when the internals change only this file does.

Only this file names tinystore's tables and imports a database driver
(psycopg only when a PostgreSQL test runs). A
child process finds the kit of its target with ``kit_for(target)`` (the
``child_env`` fixture puts this folder on the child's ``PYTHONPATH``).
"""

from __future__ import annotations

import os
import re
import socket
import sqlite3
import time
import uuid
from collections import Counter, namedtuple
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

import pytest

import tinystore

# What the raw looks return: plain tuples, the same on every backend.
JobRow = namedtuple("JobRow", "queue id state attempt payload")
StepRow = namedtuple("StepRow", "queue id name answer")
GroupRow = namedtuple("GroupRow", "queue group running")
Lease = namedtuple("Lease", "queue id attempt owner expires")
Process = namedtuple("Process", "id pid")
ClaimCycle = namedtuple("ClaimCycle", "claimed wake_at")
ClaimedJob = namedtuple("ClaimedJob", "id group")


# The store's bookkeeping that must agree with itself (``Kit.inconsistencies``), in SQLite's table names.
BOOKKEEPING = {
    "leases off their job": """SELECT l.job, l.attempt, j.state, j.attempt FROM tinystore_leases l
                               LEFT JOIN tinystore_jobs j ON j.seq = l.job
                               WHERE j.seq IS NULL OR j.state != 'running' OR j.attempt != l.attempt""",
    "running without a lease": """SELECT seq FROM tinystore_jobs j WHERE state = 'running'
                                  AND NOT EXISTS (SELECT 1 FROM tinystore_leases l WHERE l.job = j.seq)""",
    "leases of unregistered processes": """SELECT job, owner FROM tinystore_leases
                                           WHERE owner NOT IN (SELECT id FROM tinystore_processes)""",
    # The jobs per queue and state the store keeps for stats(), against a count of the jobs themselves.
    "state counts off the jobs": """SELECT k.queue, k.queued, k.running, k.done, k.failed, k.repeating,
                                           j.queued, j.running, j.done, j.failed, j.repeating
                                    FROM tinystore_queue_counts k
                                    FULL JOIN (SELECT queue, count(*) FILTER (WHERE state = 'queued') AS queued,
                                                      count(*) FILTER (WHERE state = 'running') AS running,
                                                      count(*) FILTER (WHERE state = 'done') AS done,
                                                      count(*) FILTER (WHERE state = 'failed') AS failed,
                                                      count(repeat) AS repeating
                                               FROM tinystore_jobs GROUP BY queue) j ON j.queue = k.queue
                                    WHERE j.queue IS NULL AND k.queued + k.running + k.done + k.failed + k.repeating != 0
                                       OR k.queue IS NULL
                                       OR k.queued != j.queued OR k.running != j.running OR k.done != j.done
                                       OR k.failed != j.failed OR k.repeating != j.repeating""",
    # A batch's counts against its jobs: those not ended are the ones it waits for.
    "batch counts off its jobs": """SELECT b.id, b.total, b.done, b.failed, b.cancelled
                                    FROM tinystore_batches b
                                    WHERE b.total - b.done - b.failed - b.cancelled
                                          != (SELECT count(*) FROM tinystore_jobs j
                                              WHERE j.batch = b.id AND j.state IN ('queued', 'running'))""",
    "ended batches without their then job": """SELECT id FROM tinystore_batches
                                               WHERE closed_at IS NOT NULL AND then_seq IS NULL
                                                 AND total = done + failed + cancelled""",
    "batches kept after their then job": """SELECT id FROM tinystore_batches b WHERE then_seq IS NOT NULL
                                              AND NOT EXISTS (SELECT 1 FROM tinystore_jobs j WHERE j.seq = b.then_seq)""",
}


class Kit:
    """What every backend's kit provides; the methods that raise NotImplementedError are per backend."""

    name: str = ""
    #: How the application's SQL names a parameter on this backend ("?" or "%s").
    placeholder: str = "?"
    #: The column type of an auto-numbered integer primary key, for ``create_table``.
    auto_id: str = ""
    #: The error the backend's driver raises when the application's SQL breaks a constraint.
    IntegrityError: type[BaseException] = Exception

    @classmethod
    def owns(cls, target: str) -> bool:
        """Whether ``target`` is one of this backend's (for ``kit_for``)."""
        raise NotImplementedError

    def __init__(self, folder: Optional[Path] = None):
        self.folder = folder  # where the targets of one test live; None in a child, which makes none
        self.targets: list[str] = []

    # Targets

    def new_target(self, name: str = "store") -> str:
        """A new, empty target for ``tinystore.open``; a test may make several, by name."""
        raise NotImplementedError

    def cleanup(self) -> None:
        """Take away what ``new_target`` made (once the test ended and its stores are closed)."""

    # The application's own SQL

    def sql(self, text: str) -> str:
        """The application's SQL ``text``, written with ``?`` and ``:name`` parameters, in this backend's style."""
        if self.placeholder == "?":
            return text
        return re.sub(r"(?<![:\w]):(\w+)", r"%(\1)s", text).replace("?", self.placeholder)

    def create_table(self, db: Any, name: str, columns: str) -> None:
        """Create the application's table ``name`` through ``db`` (a store, a transaction or an application
        connection). ``columns`` is portable column SQL; ``{auto_id}`` in it is this backend's auto-numbered
        integer primary key."""
        db.execute(f"CREATE TABLE {name} ({columns.format(auto_id=self.auto_id)})")

    def app_rows(self, target: str, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        """The application's own rows, read on a connection of their own (not the store's): what is committed."""
        raise NotImplementedError

    def app_connection(self, target: str, begin: str = "driver") -> Any:
        """An application connection of the backend's own kind to the target, as ``conn=`` takes it.

        ``begin="driver"``: the driver opens a transaction before the first write, as by default;
        ``begin="explicit"``: the application said BEGIN itself, and the connection is in that transaction.
        """
        raise NotImplementedError

    def in_transaction(self, conn: Any) -> bool:
        """Whether the application connection ``conn`` is inside a transaction."""
        raise NotImplementedError

    def sqlalchemy_url(self, target: str) -> str:
        """The SQLAlchemy URL of the target, for the application's own engine."""
        raise NotImplementedError

    # Raw looks at tinystore's tables, beside tinystore

    def _rows(self, target: str, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        """The rows of one query of tinystore's tables, named ``tinystore_<table>`` as on SQLite, read
        beside tinystore in a transaction of its own."""
        raise NotImplementedError

    def job_rows(self, target: str) -> list[JobRow]:
        """Every job row the store holds, ordered by queue and id: those past their keep or dedupe that
        maintenance has not removed yet too. ``state`` is as stored: queued (scheduled or waiting),
        running, done or failed; ``payload`` is the JSON text as stored."""
        return [JobRow(*r) for r in self._rows(
            target, "SELECT queue, id, state, attempt, payload FROM tinystore_jobs ORDER BY queue, id")]

    def job_ends(self, target: str) -> list[tuple]:
        """Every job's (id, state, attempt, at, expires, error) as stored, by id: how its attempts ended."""
        return [tuple(r) for r in self._rows(target, "SELECT id, state, attempt, at, expires, error FROM tinystore_jobs ORDER BY id")]

    def counted_by_scan(self, target: str, now: float) -> dict[str, dict[str, Any]]:
        """What ``store.stats()`` says of jobs at ``now``, counted from every job row: per queue with
        jobs, its jobs per state (queued split at ``now`` into scheduled and waiting; those past their
        keep or dedupe left out), how many repeat, and when its oldest due job was due (None: none)."""
        p = self.placeholder
        rows = self._rows(target, f"""
            SELECT queue, CASE WHEN state = 'queued' AND at > {p} THEN 'scheduled'
                               WHEN state = 'queued' THEN 'waiting' ELSE state END,
                   at, repeat IS NOT NULL
            FROM tinystore_jobs WHERE expires IS NULL OR expires > {p}""", (now, now))
        out: dict[str, dict[str, Any]] = {}
        for queue, state, at, repeats in rows:
            entry = out.setdefault(queue, {"scheduled": 0, "waiting": 0, "running": 0, "done": 0, "failed": 0,
                                           "repeating": 0, "oldest_due": None})
            entry[state] += 1
            entry["repeating"] += bool(repeats)
            if state == "waiting" and (entry["oldest_due"] is None or at < entry["oldest_due"]):
                entry["oldest_due"] = at
        return out

    def listed_by_scan(self, target: str, queue: str, now: float) -> list[tuple[str, str, Optional[str]]]:
        """(id, state, group) of each job of ``queue`` kept at ``now``, in id order, read from every job row:
        the state as JobState says it (queued split at ``now``), those past their keep or dedupe left out."""
        p = self.placeholder
        return self._rows(target, f"""
            SELECT id, CASE WHEN state = 'queued' AND at > {p} THEN 'scheduled'
                            WHEN state = 'queued' THEN 'waiting' ELSE state END, grp
            FROM tinystore_jobs WHERE queue = {p} AND (expires IS NULL OR expires > {p}) ORDER BY id""",
                          (now, queue, now))

    def forget_queue_counts(self, target: str) -> None:
        """Make the closed store as an earlier version left it: no jobs per state kept, no indexes of
        failed and grouped jobs, their migration not applied."""
        raise NotImplementedError

    def steps(self, target: str) -> list[StepRow]:
        """Every kept step answer, ordered by step name; ``answer`` is its JSON text as stored, and
        ``queue``/``id`` are None where no job row holds the step."""
        return [StepRow(*r) for r in self._rows(
            target, "SELECT j.queue, j.id, s.name, s.answer FROM tinystore_steps s"
                    " LEFT JOIN tinystore_jobs j ON j.seq = s.job ORDER BY s.name, j.queue, j.id")]

    def groups(self, target: str) -> list[GroupRow]:
        """The store's bookkeeping row of each group that has queued or running jobs."""
        return [GroupRow(*r) for r in self._rows(
            target, "SELECT queue, grp, running FROM tinystore_groups ORDER BY queue, grp")]

    def leases(self, target: str) -> list[Lease]:
        """Every live lease: the job's queue and id (id None where no job row holds it), the attempt it
        runs, the registration (``Process.id``) that holds it, and when it runs out (epoch seconds)."""
        return [Lease(*r) for r in self._rows(
            target, "SELECT l.queue, j.id, l.attempt, l.owner, l.expires FROM tinystore_leases l"
                    " LEFT JOIN tinystore_jobs j ON j.seq = l.job ORDER BY l.queue, j.id")]

    def registered_processes(self, target: str) -> list[Process]:
        """Every process the store has registered as having it open: its registration id and its pid."""
        return [Process(*r) for r in self._rows(target, "SELECT id, pid FROM tinystore_processes ORDER BY id")]

    def holds(self, target: str, marker: str) -> bool:
        """Whether any text value of any row of any table of the store contains ``marker``."""
        raise NotImplementedError

    def inconsistencies(self, target: str) -> dict[str, list]:
        """What of the store's bookkeeping disagrees with itself, read at one moment; every list is empty
        in a sound store: "integrity" (damage the backend's own check finds), "leases off their job" (a
        lease whose job is missing, not running, or at another attempt), "running without a lease",
        "leases of unregistered processes"."""
        raise NotImplementedError

    def write_lock_free(self, target: str, timeout: float = 0) -> bool:
        """Whether this process can take the store's write lock within ``timeout`` seconds (it gives it back
        at once). A backend without one write lock for the whole store answers True."""
        raise NotImplementedError

    def witness_claims_and_removals(self, target: str) -> None:
        """Add to the store (opened once already) a witness of its jobs that tinystore does not know of: a
        table ``witness`` that triggers on the jobs table append to, one row per job taken by a claim
        (``claimed``) and per job row removed (``removed``), numbered in the order they were written, which
        for one job is the order its transactions committed in."""
        raise NotImplementedError

    def witnessed(self, target: str) -> list[tuple[int, str, str]]:
        """The witness's rows in the order they were written: (seq, id, claimed or removed)."""
        return [tuple(r) for r in self.app_rows(target, "SELECT seq, id, what FROM witness ORDER BY n")]

    #: Seconds after its death within which a process's leases end (DUR-03), beyond the time a look takes:
    #: 0 on SQLite; on PostgreSQL the grace in which it may be connecting again (``_keeper.GRACE``).
    liveness_grace: float = 0.0

    def past_liveness_grace(self, target: str) -> None:
        """Wait until every registered process whose liveness is gone can be found dead (DUR-03): at once on
        SQLite (a lock byte nobody holds); on PostgreSQL once it has not said it lives for the grace
        (``_keeper.GRACE``: a process whose sessions just ended may be connecting again)."""

    # tinystore internals: each use here, and only here

    def small_chunks(self, monkeypatch: pytest.MonkeyPatch, rows: int) -> None:
        """Make ``cancel_many`` and ``retry_many`` read at most ``rows`` rows per transaction (the engine's
        chunk), so that a test walks many chunks over few jobs."""
        from tinystore.backends._engine import bulk
        monkeypatch.setattr(bulk, "CHUNK", rows)

    def rows_per_transaction(self, store: tinystore.Store, target: str) -> Any:
        """A context manager giving a Counter: for each write transaction of the store's writer inside the
        block, how many job rows it removed or changed the state of."""
        raise NotImplementedError

    def claim_cycle(self, store: tinystore.Store, queue: tinystore.Queue, want: int, now: float) -> ClaimCycle:
        """Run one claim cycle of the store's worker for ``queue`` at time ``now``, asking for ``want`` jobs
        and settling nothing: the jobs it claimed (id, group) and when it asks to look again (``wake_at``)."""
        cycle = store._backend.cycle(queue.name, store._ctx.owner, [], want, now).result()
        return ClaimCycle([ClaimedJob(c.id, c.grp) for c in cycle.claimed], cycle.wake_at)

    def claim_attempts(self, store: tinystore.Store, queue: tinystore.Queue, want: int, now: float) -> list[Any]:
        """Like ``claim_cycle``, and the attempts it claimed as the worker holds them (for ``settle_together``)."""
        return list(store._backend.cycle(queue.name, store._ctx.owner, [], want, now).result().claimed)

    def settle_together(self, store: tinystore.Store, queue: tinystore.Queue, answers: list[tuple[Any, Any]],
                        now: float) -> None:
        """Settle in one claim cycle each (attempt from ``claim_attempts``, answer as its handler returned it:
        None for OK, ``run.retry(...)``'s ...), as the worker settles the attempts that ended since its last."""
        from tinystore._ending import decision_of
        from tinystore.backends._base import Settlement
        settlements = [Settlement(a.seq, a.attempt, a.grp, decision_of(queue.name, a, answer, queue.options, now)[1])
                       for a, answer in answers]
        store._backend.cycle(queue.name, store._ctx.owner, settlements, 0, now).result()

    def run_out_lease(self, target: str, queue: str, id: str, at: float) -> None:
        """Make the lease of job ``id`` run out at ``at`` in the store, behind the back of the worker that holds
        it: as when the renewal that was to keep it came too late (its write slow past the lease)."""
        self._write(target, "UPDATE tinystore_leases SET expires = ?"
                            " WHERE job = (SELECT seq FROM tinystore_jobs WHERE queue = ? AND id = ?)", (at, queue, id))

    def _write(self, target: str, sql: str, params: Sequence[Any]) -> None:
        raise NotImplementedError

    def writer_work(self, store: tinystore.Store) -> Any:
        """A context manager counting the work the store's writer does inside the block, as a number in the
        list it gives, at ``[0]`` (on SQLite, the virtual machine's steps, to the nearest 10; on PostgreSQL,
        the rows its transactions read and wrote): a measure to compare between two runs, not a time."""
        raise NotImplementedError


class SQLiteKit(Kit):
    """A target is a file path in the test's temporary folder; raw looks read it with a read-only sqlite3
    connection of their own."""

    name = "sqlite"
    placeholder = "?"
    auto_id = "INTEGER PRIMARY KEY"
    IntegrityError = sqlite3.IntegrityError

    @classmethod
    def owns(cls, target: str) -> bool:
        return "://" not in target  # a path, not a URL

    def new_target(self, name: str = "store") -> str:
        assert self.folder is not None, "a kit made by kit_for (in a child) makes no targets"
        target = str(self.folder / f"{name}.db")
        self.targets.append(target)
        return target

    # The application's own SQL

    def app_rows(self, target: str, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        with closing(sqlite3.connect(target, timeout=30)) as conn:
            return conn.execute(sql, params).fetchall()

    def app_connection(self, target: str, begin: str = "driver") -> sqlite3.Connection:
        if begin == "driver":  # the sqlite3 module opens the transaction before the first write
            return sqlite3.connect(target, timeout=30)
        assert begin == "explicit", begin
        conn = sqlite3.connect(target, timeout=30, isolation_level=None)  # the application says BEGIN itself
        conn.execute("BEGIN IMMEDIATE")
        return conn

    def in_transaction(self, conn: sqlite3.Connection) -> bool:
        return conn.in_transaction

    def sqlalchemy_url(self, target: str) -> str:
        return f"sqlite:///{target}"

    # Raw looks

    @contextmanager
    def _look(self, target: str) -> Iterator[sqlite3.Connection]:
        """A read-only connection to the store file, in one read transaction (one moment of the file)."""
        conn = sqlite3.connect(Path(target).absolute().as_uri() + "?mode=ro", uri=True, timeout=30,
                               isolation_level=None)
        try:
            conn.execute("BEGIN")
            yield conn
        finally:
            conn.close()

    def _rows(self, target: str, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        with self._look(target) as conn:
            return conn.execute(sql, params).fetchall()

    def holds(self, target: str, marker: str) -> bool:
        with self._look(target) as conn:
            tables = [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            for table in tables:
                for row in conn.execute(f'SELECT * FROM "{table}"'):
                    if any(isinstance(value, str) and marker in value for value in row):
                        return True
        return False

    def inconsistencies(self, target: str) -> dict[str, list]:
        with self._look(target) as conn:
            integrity = conn.execute("PRAGMA integrity_check").fetchall()
            found = {name: conn.execute(sql).fetchall() for name, sql in BOOKKEEPING.items()}
            return {"integrity": [] if integrity == [("ok",)] else integrity, **found}

    def forget_queue_counts(self, target: str) -> None:
        with closing(sqlite3.connect(target, isolation_level=None)) as conn:
            conn.executescript("""BEGIN IMMEDIATE;
                DROP TRIGGER tinystore_jobs_counted_in; DROP TRIGGER tinystore_jobs_counted_out;
                DROP TRIGGER tinystore_jobs_counted_moved; DROP TABLE tinystore_queue_counts;
                DROP INDEX tinystore_jobs_failed; DROP INDEX tinystore_jobs_group;
                DELETE FROM tinystore_migrations WHERE version = 7; COMMIT;""")

    def _write(self, target: str, sql: str, params: Sequence[Any]) -> None:
        with closing(sqlite3.connect(target, isolation_level=None, timeout=30)) as conn:
            conn.execute(sql, params)

    def write_lock_free(self, target: str, timeout: float = 0) -> bool:
        # SQLite's write lock is the file's: a connection of its own tries BEGIN IMMEDIATE (it writes nothing).
        with closing(sqlite3.connect(target, timeout=timeout, isolation_level=None)) as probe:
            try:
                probe.execute("BEGIN IMMEDIATE")
                probe.execute("ROLLBACK")
                return True
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                return False

    def witness_claims_and_removals(self, target: str) -> None:
        with closing(sqlite3.connect(target, timeout=30, isolation_level=None)) as conn:
            conn.executescript("""BEGIN IMMEDIATE;
                CREATE TABLE witness (n INTEGER PRIMARY KEY AUTOINCREMENT, seq INTEGER, id TEXT, what TEXT);
                CREATE TRIGGER witness_claimed AFTER UPDATE OF state ON tinystore_jobs
                WHEN new.state = 'running' AND old.state != 'running'
                BEGIN INSERT INTO witness (seq, id, what) VALUES (new.seq, new.id, 'claimed'); END;
                CREATE TRIGGER witness_removed AFTER DELETE ON tinystore_jobs
                BEGIN INSERT INTO witness (seq, id, what) VALUES (old.seq, old.id, 'removed'); END;
                COMMIT;""")

    # tinystore internals

    @contextmanager
    def rows_per_transaction(self, store: tinystore.Store, target: str) -> Iterator[Counter]:
        # A temporary trigger on the writer's own connection calls back with the writer's count of the
        # transactions it began, which the running one is the last of.
        writer = store._backend._writer
        rows: Counter = Counter()
        conn = writer._conn
        with writer._write_lock:
            conn.create_function("witness_row", 0, lambda: rows.update([writer.transactions]))
            conn.executescript("""
                CREATE TEMP TRIGGER witness_removed AFTER DELETE ON main.tinystore_jobs BEGIN SELECT witness_row(); END;
                CREATE TEMP TRIGGER witness_moved AFTER UPDATE OF state ON main.tinystore_jobs
                WHEN new.state != old.state BEGIN SELECT witness_row(); END;""")
        try:
            yield rows
        finally:
            with writer._write_lock:
                conn.executescript("DROP TRIGGER temp.witness_removed; DROP TRIGGER temp.witness_moved;")

    @contextmanager
    def writer_work(self, store: tinystore.Store) -> Iterator[list[int]]:
        work = [0]

        def tick() -> int:
            work[0] += 10
            return 0

        conn = store._backend._writer._conn
        conn.set_progress_handler(tick, 10)
        try:
            yield work
        finally:
            conn.set_progress_handler(None, 10)


class PostgresKit(Kit):
    """A target is a URL of a database made for the test on the server ``TINYSTORE_TEST_POSTGRES`` names
    (the local one unless it says otherwise), dropped at the end; tinystore's tables are in its schema
    ``tinystore``. Raw looks read it with a psycopg connection of their own, in one transaction.

    Where the server cannot be reached, the test is skipped saying so, except under ``CI=true``, where
    that fails it: CI has a server.
    """

    name = "postgres"
    placeholder = "%s"
    auto_id = "BIGSERIAL PRIMARY KEY"
    SERVER = os.environ.get("TINYSTORE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
    SCHEMA = "tinystore"

    @property
    def IntegrityError(self) -> type[BaseException]:  # type: ignore[override]
        import psycopg
        return psycopg.IntegrityError

    def __init__(self, folder: Optional[Path] = None, server: Optional[str] = None):
        super().__init__(folder)
        if server is not None:  # a server of the caller's own (the soak's private one): its databases
            self.SERVER = server

    @classmethod
    def owns(cls, target: str) -> bool:
        return target.startswith(("postgresql://", "postgres://"))

    def _admin(self) -> Any:
        import psycopg
        try:
            return psycopg.connect(self.SERVER, autocommit=True, connect_timeout=5)
        except psycopg.OperationalError as exc:
            message = f"no PostgreSQL server at {self.SERVER} ({exc}); set TINYSTORE_TEST_POSTGRES to one"
            if os.environ.get("CI") == "true":
                pytest.fail(message)
            pytest.skip(message)

    def new_target(self, name: str = "store") -> str:
        assert self.folder is not None, "a kit made by kit_for (in a child) makes no targets"
        database = f"ts_{uuid.uuid4().hex[:16]}_{re.sub(r'[^a-z0-9]', '', name.lower())[:20]}"
        with closing(self._admin()) as admin:
            admin.execute(f'CREATE DATABASE "{database}"')
        target = self.SERVER.rsplit("/", 1)[0] + "/" + database
        self.targets.append(target)
        return target

    def cleanup(self) -> None:
        if not self.targets:
            return
        with closing(self._admin()) as admin:
            for target in self.targets:
                admin.execute(f'DROP DATABASE IF EXISTS "{target.rsplit("/", 1)[1]}" WITH (FORCE)')
        self.targets.clear()

    # The application's own SQL

    def _connect(self, target: str, **kwargs: Any) -> Any:
        import psycopg
        return psycopg.connect(target, connect_timeout=30, **kwargs)

    def app_rows(self, target: str, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        with closing(self._connect(target, autocommit=True)) as conn:
            return conn.execute(sql, params).fetchall()

    def app_connection(self, target: str, begin: str = "driver") -> Any:
        if begin == "driver":  # psycopg opens the transaction before the first statement
            return self._connect(target)
        assert begin == "explicit", begin
        conn = self._connect(target, autocommit=True)  # the application says BEGIN itself
        conn.execute("BEGIN")
        return conn

    def in_transaction(self, conn: Any) -> bool:
        import psycopg
        return conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE

    def sqlalchemy_url(self, target: str) -> str:
        return "postgresql+psycopg://" + target.split("://", 1)[1]

    # Raw looks

    def _pg(self, sql: str) -> str:
        """SQLite's names of tinystore's tables as this schema's; a queue's kept counts are its row and the
        changes appended since its last fold."""
        kept = (f"(SELECT queue, sum(queued) AS queued, sum(running) AS running, sum(done) AS done,"
                f" sum(failed) AS failed, sum(repeating) AS repeating FROM"
                f" (SELECT * FROM {self.SCHEMA}.queue_counts UNION ALL SELECT * FROM {self.SCHEMA}.count_changes) c"
                f" GROUP BY queue)")
        return sql.replace("tinystore_queue_counts", kept).replace("tinystore_", self.SCHEMA + ".")

    def _rows(self, target: str, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        with closing(self._connect(target)) as conn:  # one transaction: one moment of the store
            rows = conn.execute(self._pg(sql), params).fetchall()
            conn.rollback()
            return rows

    def holds(self, target: str, marker: str) -> bool:
        columns = self._rows(target, "SELECT table_name, column_name FROM information_schema.columns"
                                     " WHERE table_schema = %s AND data_type = 'text'", (self.SCHEMA,))
        for table, column in columns:
            found = self._rows(target, f'SELECT 1 FROM "{self.SCHEMA}"."{table}" WHERE "{column}" LIKE %s LIMIT 1',
                               ("%" + marker.replace("%", r"\%").replace("_", r"\_") + "%",))
            if found:
                return True
        return False

    def inconsistencies(self, target: str) -> dict[str, list]:
        # PostgreSQL checks its pages itself as it reads them; no integrity check of the file to run here.
        with closing(self._connect(target)) as conn:  # one transaction: one moment of the store
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            found = {name: conn.execute(self._pg(sql)).fetchall() for name, sql in BOOKKEEPING.items()}
            conn.rollback()
        return {"integrity": [], **found}

    def _write(self, target: str, sql: str, params: Sequence[Any]) -> None:
        with closing(self._connect(target, autocommit=True)) as conn:
            conn.execute(self._pg(sql).replace("?", "%s"), params)

    @property
    def liveness_grace(self) -> float:  # type: ignore[override]
        from tinystore.backends.postgres._keeper import GRACE
        return GRACE

    def past_liveness_grace(self, target: str) -> None:
        # A process of this machine that is gone (its pid) is waited for too while the server still holds
        # its lock: for a moment after it was killed, the server has not yet seen its connection close, and
        # the process looks alive.
        from tinystore.backends.postgres._keeper import GRACE
        if self._rows(target, "SELECT to_regclass(%s)", (f"{self.SCHEMA}.processes",)) == [(None,)]:
            return  # not opened yet
        deadline = time.monotonic() + GRACE + 30
        while True:
            rows = self._rows(target, f"SELECT p.pid, p.host, p.alive >= now() - make_interval(secs => %s), EXISTS ("
                                      " SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted"
                                      " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
                                      " AND l.objid = p.id::oid AND l.objsubid = 2)"
                                      f" FROM {self.SCHEMA}.processes p", (GRACE,))
            if not any((fresh and not locked) or (locked and host == socket.gethostname() and not _pid_alive(pid))
                       for pid, host, fresh, locked in rows):
                return
            assert time.monotonic() < deadline, f"a dead process was never found dead: {rows}"
            time.sleep(0.05)

    def forget_queue_counts(self, target: str) -> None:
        s = self.SCHEMA
        with closing(self._connect(target, autocommit=True)) as conn, conn.transaction():
            for trigger in ("jobs_counted_in", "jobs_counted_out", "jobs_counted_moved"):
                conn.execute(f"DROP TRIGGER {trigger} ON {s}.jobs")
            conn.execute(f"DROP FUNCTION {s}.jobs_counted()")
            conn.execute(f"DROP TABLE {s}.queue_counts, {s}.count_changes")
            conn.execute(f"DROP INDEX {s}.jobs_failed, {s}.jobs_group")
            conn.execute(f"DELETE FROM {s}.migrations WHERE version = 4")

    def write_lock_free(self, target: str, timeout: float = 0) -> bool:
        return True  # no one write lock for the whole store: each queue has its own, per transaction

    def witness_claims_and_removals(self, target: str) -> None:
        s = self.SCHEMA
        with closing(self._connect(target, autocommit=True)) as conn, conn.transaction():
            conn.execute("CREATE TABLE public.witness (n bigserial PRIMARY KEY, seq bigint, id text, what text)")
            for what, row, when in (("claimed", "NEW", "WHEN (NEW.state = 'running' AND OLD.state <> 'running')"),
                                    ("removed", "OLD", "")):
                conn.execute(f"""CREATE FUNCTION public.witness_{what}() RETURNS trigger LANGUAGE plpgsql AS $$
                                 BEGIN INSERT INTO public.witness (seq, id, what) VALUES ({row}.seq, {row}.id, '{what}');
                                 RETURN NULL; END $$""")
                event = "UPDATE OF state" if what == "claimed" else "DELETE"
                conn.execute(f"CREATE TRIGGER witness_{what} AFTER {event} ON {s}.jobs FOR EACH ROW {when}"
                             f" EXECUTE FUNCTION public.witness_{what}()")

    # tinystore internals

    @contextmanager
    def rows_per_transaction(self, store: tinystore.Store, target: str) -> Iterator[Counter]:
        # A trigger writes each row's transaction id to a table of its own, read at the end of the block.
        s = self.SCHEMA
        rows: Counter = Counter()
        with closing(self._connect(target, autocommit=True)) as conn:
            with conn.transaction():
                conn.execute("CREATE TABLE public.witness_tx (tx bigint)")
                conn.execute("""CREATE FUNCTION public.witness_tx() RETURNS trigger LANGUAGE plpgsql AS $$
                                BEGIN INSERT INTO public.witness_tx VALUES (txid_current()); RETURN NULL; END $$""")
                conn.execute(f"CREATE TRIGGER witness_removed AFTER DELETE ON {s}.jobs FOR EACH ROW"
                             " EXECUTE FUNCTION public.witness_tx()")
                conn.execute(f"CREATE TRIGGER witness_moved AFTER UPDATE OF state ON {s}.jobs FOR EACH ROW"
                             " WHEN (NEW.state <> OLD.state) EXECUTE FUNCTION public.witness_tx()")
            try:
                yield rows
            finally:
                rows.update(tx for (tx,) in conn.execute("SELECT tx FROM public.witness_tx"))
                with conn.transaction():
                    conn.execute(f"DROP TRIGGER witness_removed ON {s}.jobs")
                    conn.execute(f"DROP TRIGGER witness_moved ON {s}.jobs")
                    conn.execute("DROP FUNCTION public.witness_tx() CASCADE")
                    conn.execute("DROP TABLE public.witness_tx")

    @contextmanager
    def writer_work(self, store: tinystore.Store) -> Iterator[list[int]]:
        # The rows each writer transaction read and wrote (the server's own counts of the writer's session).
        writer = store._backend._writer
        writer.work = [0]
        try:
            yield writer.work
        finally:
            writer.work = None


#: Every backend's kit, by the name the ``backend`` fixture takes.
KITS: dict[str, type[Kit]] = {"sqlite": SQLiteKit, "postgres": PostgresKit}


def kit_for(target: str) -> Kit:
    """The kit of the backend a target belongs to (for a child process, which is handed only the target)."""
    for kind in KITS.values():
        if kind.owns(target):
            return kind()
    raise LookupError(f"no kit owns the target {target!r}")


def _pid_alive(pid: int) -> bool:
    """Whether a process of this machine lives (a zombie, killed and not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except FileNotFoundError:
        return False
