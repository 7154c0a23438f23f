"""Producers behind a pooler: the application reaches the server through PgBouncer in transaction pooling
mode, its workers directly (SPEC §7, "Behind a pooler").

Each test's pooler (the ``pgbouncer`` fixture) has two server connections in its pool, fewer than its
clients, which share them transaction by transaction, as an application's processes share a pooler's
few: two producer stores are opened through it, as two processes of the application (each with its
own connections), and called in turn, each call more than psycopg's prepare threshold (5) times. The store whose worker runs the jobs
is opened on the direct URL, and a table of the test's own, written by the handler, witnesses what ran.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

import tinystore

CALLS = 8  # per producer: past psycopg's prepare threshold, where it prepares a statement on the server


def _producers(pg: Any, pgbouncer: Any) -> list[tinystore.Store]:
    return [pg.open_at(pgbouncer.url) for _ in range(2)]


@pytest.fixture
def pooled(pg: Any, pgbouncer: Any) -> Any:
    """The direct store (opened first: it made the schema) and the witness table; ``pg.open_at(url)``."""
    def open_at(url: str) -> tinystore.Store:
        store = tinystore.open(url, schema=pg.schema)
        pg.stores.append(store)
        return store
    pg.open_at = open_at
    direct = pg.open()
    pg.rows('CREATE TABLE {s}.witness (job text PRIMARY KEY)')
    return direct


def _drain(direct: tinystore.Store, pg: Any) -> set[str]:
    """Run every due job on the direct store's worker; the ids its handler wrote."""
    @direct.queue("mail").work
    def send(payload: Any, run: Any) -> None:
        with psycopg.connect(pg.url, autocommit=True) as conn:
            conn.execute(f'INSERT INTO "{pg.schema}".witness VALUES (%s)', (run.id,))

    direct.run_until_idle()
    return {job for (job,) in pg.rows("SELECT job FROM {s}.witness")}


PREPARED = ("psycopg prepares a statement on the server connection after 5 runs (prepare_threshold), and "
            "in transaction pooling the next transaction may be on another connection, or another client's "
            "on this one: 'prepared statement \"_pg3_0\" already exists' / 'does not exist'")
SESSION = ("open() starts the process's keeper on a pooled connection: its liveness lock (pg_advisory_lock, a "
           "session lock), its LISTEN and its SETs stay on the server connection after the store closes, held "
           "for whichever client gets that connection next")


@pytest.mark.xfail(strict=True, reason=PREPARED)
def test_adds_through_pgbouncer_in_transaction_pooling_are_run_by_a_worker_on_the_direct_url(pg, pgbouncer, pooled):
    producers = _producers(pg, pgbouncer)
    added = set()
    for n in range(CALLS):
        for k, store in enumerate(producers):
            added.add(store.queue("mail").add({"n": n}, id=f"p{k}-{n}").id)
    assert _drain(pooled, pg) == added


@pytest.mark.xfail(strict=True, reason=PREPARED)
def test_get_through_pgbouncer_reads_each_job_as_it_was_added(pg, pgbouncer, pooled):
    ids = [f"j{n}" for n in range(CALLS)]
    pooled.queue("mail").add_many([tinystore.Job({"n": n}, id=i) for n, i in enumerate(ids)])
    producers = _producers(pg, pgbouncer)
    for n, job in enumerate(ids):
        for store in producers:
            state = store.queue("mail").get(job)
            assert state is not None and state.id == job and state.payload == {"n": n}
    assert producers[0].queue("mail").get("nobody") is None


@pytest.mark.xfail(strict=True, reason=PREPARED)
def test_jobs_through_pgbouncer_pages_through_a_queue(pg, pgbouncer, pooled):
    ids = sorted(f"j{n:02d}" for n in range(3 * CALLS))
    pooled.queue("mail").add_many([tinystore.Job({}, id=i) for i in ids])
    producers = _producers(pg, pgbouncer)
    for _ in range(CALLS):
        for store in producers:
            seen, after = [], None
            while page := store.queue("mail").jobs(limit=5, after=after):
                seen += [job.id for job in page]
                after = page[-1].id
            assert seen == ids


@pytest.mark.xfail(strict=True, reason=PREPARED)
def test_stats_through_pgbouncer_counts_the_jobs_of_each_state(pg, pgbouncer, pooled):
    pooled.queue("mail").add_many([{} for _ in range(4)])
    pooled.queue("mail").add({}, delay="1h")
    producers = _producers(pg, pgbouncer)
    for _ in range(CALLS):
        for store in producers:
            mail = store.stats()["mail"]
            assert (mail["waiting"], mail["scheduled"], mail["running"]) == (4, 1, 0)


@pytest.mark.xfail(strict=True, reason=PREPARED)
def test_add_with_the_applications_own_connection_through_pgbouncer_commits_or_rolls_back_with_it(
        pg, pgbouncer, pooled):
    producers = _producers(pg, pgbouncer)
    kept = set()
    with psycopg.connect(pgbouncer.url) as app:  # the application's connection, through the same pooler
        app.execute(f'CREATE TABLE "{pg.schema}".orders (n int)')
        app.commit()
        for n in range(CALLS):
            for k, store in enumerate(producers):
                with app.transaction():
                    app.execute(f'INSERT INTO "{pg.schema}".orders VALUES (%s)', (n,))
                    store.queue("mail").add({"n": n}, id=f"kept-{k}-{n}", conn=app)
                kept.add(f"kept-{k}-{n}")
                with pytest.raises(ZeroDivisionError), app.transaction():
                    store.queue("mail").add({"n": n}, id=f"undone-{k}-{n}", conn=app)
                    1 / 0
    assert _drain(pooled, pg) == kept
    assert pg.rows("SELECT count(*) FROM {s}.orders") == [(2 * CALLS,)]


def _advisory_locks(pg: Any) -> set[tuple]:
    return set(pg.rows("SELECT classid, objid, objsubid FROM pg_locks l JOIN pg_database d ON d.oid = l.database "
                       "WHERE l.locktype = 'advisory' AND l.granted AND d.datname = current_database()"))


@pytest.mark.xfail(strict=True, reason=SESSION)
def test_producers_closed_behind_pgbouncer_leave_no_session_lock_on_its_connections(pg, pgbouncer, pooled):
    before = _advisory_locks(pg)  # the direct store's own liveness lock
    for store in _producers(pg, pgbouncer):
        store.queue("mail")
        store.close()
    assert _advisory_locks(pg) == before
