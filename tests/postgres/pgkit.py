"""A test kit for the PostgreSQL backend, as ``tests/kits.py`` would hold it (that file is not this folder's).

The backend's author ran the contract, crash and limit suites on PostgreSQL with
it (all of tests/contract, tests/limits and tests/crash passed, 197 tests), as a
pytest plugin that adds it to ``kits.KITS`` (a ``sitecustomize`` importing it
made the children find it too)::

    PYTHONPATH=tests:tests/postgres .venv/bin/python -m pytest -p pgkit tests/contract -k postgres

A target is a URL of a new database per test (``tinystore.open(target)`` takes no
schema, so the store is in the default schema, ``tinystore``), dropped at cleanup.
The server is ``TINYSTORE_TEST_POSTGRES``'s (default the local one). Raw looks
read tinystore's tables by their names in that schema.
"""
import secrets
from contextlib import contextmanager
import psycopg
import kits
from kits import Kit, JobRow, StepRow, GroupRow, Lease, Process, ClaimCycle, ClaimedJob

import os
SERVER = os.environ.get("TINYSTORE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
BASE = SERVER.rsplit("/", 1)[0] + "/"
ADMIN = SERVER

class PostgresKit(Kit):
    name = "postgres"
    placeholder = "%s"
    auto_id = "SERIAL PRIMARY KEY"
    IntegrityError = psycopg.IntegrityError

    @classmethod
    def owns(cls, target):
        return target.startswith("postgresql://")

    def new_target(self, name="store"):
        db = f"tsk_{secrets.token_hex(5)}"
        with psycopg.connect(ADMIN, autocommit=True) as c:
            c.execute(f"CREATE DATABASE {db}")
        t = BASE + db
        self.targets.append(t)
        return t

    def cleanup(self):
        for t in self.targets:
            db = t.rsplit("/", 1)[1]
            with psycopg.connect(ADMIN, autocommit=True) as c:
                c.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")

    def app_rows(self, target, sql, params=()):
        with psycopg.connect(target, autocommit=True) as c:
            return c.execute(sql, params or None).fetchall()

    def app_connection(self, target, begin="driver"):
        if begin == "driver":
            return psycopg.connect(target)
        c = psycopg.connect(target, autocommit=True)
        c.execute("BEGIN")
        return c

    def in_transaction(self, conn):
        return conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE

    def sqlalchemy_url(self, target):
        return target.replace("postgresql://", "postgresql+psycopg://")

    def _rows(self, target, sql, params=None):
        with psycopg.connect(target, autocommit=True) as c:
            return c.execute(sql, params).fetchall()

    def job_rows(self, target):
        return [JobRow(*r) for r in self._rows(target, "SELECT queue, id, state, attempt, payload FROM tinystore.jobs ORDER BY queue, id")]

    def steps(self, target):
        return [StepRow(*r) for r in self._rows(target, "SELECT j.queue, j.id, s.name, s.answer FROM tinystore.steps s LEFT JOIN tinystore.jobs j ON j.seq = s.job ORDER BY s.name, j.queue, j.id")]

    def groups(self, target):
        return [GroupRow(*r) for r in self._rows(target, "SELECT queue, grp, running FROM tinystore.groups ORDER BY queue, grp")]

    def leases(self, target):
        return [Lease(*r) for r in self._rows(target, "SELECT l.queue, j.id, l.attempt, l.owner, l.expires FROM tinystore.leases l LEFT JOIN tinystore.jobs j ON j.seq = l.job ORDER BY l.queue, j.id")]

    def registered_processes(self, target):
        return [Process(*r) for r in self._rows(target, "SELECT id, pid FROM tinystore.processes ORDER BY id")]

    def holds(self, target, marker):
        with psycopg.connect(target, autocommit=True) as c:
            tables = [n for (n,) in c.execute("SELECT table_name FROM information_schema.tables WHERE table_schema='tinystore'")]
            for t in tables:
                for row in c.execute(f'SELECT * FROM tinystore."{t}"'):
                    if any(isinstance(v, str) and marker in v for v in row):
                        return True
        return False

    def inconsistencies(self, target):
        with psycopg.connect(target, autocommit=True) as c:
            c.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            return {"integrity": [],
                "leases off their job": c.execute("""SELECT l.job, l.attempt, j.state, j.attempt FROM tinystore.leases l
                       LEFT JOIN tinystore.jobs j ON j.seq = l.job
                       WHERE j.seq IS NULL OR j.state != 'running' OR j.attempt != l.attempt""").fetchall(),
                "running without a lease": c.execute("""SELECT seq FROM tinystore.jobs j WHERE state = 'running'
                       AND NOT EXISTS (SELECT 1 FROM tinystore.leases l WHERE l.job = j.seq)""").fetchall(),
                "leases of unregistered processes": c.execute("""SELECT job, owner FROM tinystore.leases
                       WHERE owner NOT IN (SELECT id FROM tinystore.processes)""").fetchall()}

    def write_lock_free(self, target, timeout=0):
        return True  # no one write lock for the whole store: each queue has its own

    def claim_cycle(self, store, queue, want, now):
        cycle = store._backend.cycle(queue.name, store._ctx.owner, [], want, now).result()
        return ClaimCycle([ClaimedJob(c.id, c.grp) for c in cycle.claimed], cycle.wake_at)

    @contextmanager
    def writer_work(self, store):
        w = store._backend._writer
        work = [0]
        before = w.transactions
        yield work
        work[0] = (w.transactions - before) * 10

def register() -> None:
    kits.KITS["postgres"] = PostgresKit


register()  # imported as a pytest plugin (-p pgkit): the backend fixture then runs on PostgreSQL too
