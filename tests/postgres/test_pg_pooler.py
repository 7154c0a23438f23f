"""Producers behind a pooler: the application reaches the server through PgBouncer in transaction pooling
mode, its workers directly (SPEC §7, "Behind a pooler").

Each test's pooler (the ``pgbouncer`` fixture) has two server connections in its pool, fewer than its
clients, which share them transaction by transaction, as an application's processes share a pooler's
few: two producer stores are opened through it, as two processes of the application (each with its
own connections), and called in turn, each call more than psycopg's prepare threshold (5) times. The store whose worker runs the jobs
is opened on the direct URL, and a table of the test's own, written by the handler, witnesses what ran.

Workers: a worker process opened on the pooler's URL with ``direct=`` (``child.py``, ``DIRECT``) registers
on the direct URL as it starts serving and runs the jobs added through the pooler; a store opened with
``direct=`` connects there only once it serves or watches; without ``direct=`` every way of serving, and a
watch, is refused in one line naming the pooler's host and database, never the password.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from typing import Any

import psycopg
import pytest

import tinystore
from tinystore.backends.postgres import _sql

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


def test_adds_through_pgbouncer_in_transaction_pooling_are_run_by_a_worker_on_the_direct_url(pg, pgbouncer, pooled):
    producers = _producers(pg, pgbouncer)
    added = set()
    for n in range(CALLS):
        for k, store in enumerate(producers):
            added.add(store.queue("mail").add({"n": n}, id=f"p{k}-{n}").id)
    assert _drain(pooled, pg) == added


def test_get_through_pgbouncer_reads_each_job_as_it_was_added(pg, pgbouncer, pooled):
    ids = [f"j{n}" for n in range(CALLS)]
    pooled.queue("mail").add_many([tinystore.Job({"n": n}, id=i) for n, i in enumerate(ids)])
    producers = _producers(pg, pgbouncer)
    for n, job in enumerate(ids):
        for store in producers:
            state = store.queue("mail").get(job)
            assert state is not None and state.id == job and state.payload == {"n": n}
    assert producers[0].queue("mail").get("nobody") is None


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


def test_stats_through_pgbouncer_counts_the_jobs_of_each_state(pg, pgbouncer, pooled):
    pooled.queue("mail").add_many([{} for _ in range(4)])
    pooled.queue("mail").add({}, delay="1h")
    producers = _producers(pg, pgbouncer)
    for _ in range(CALLS):
        for store in producers:
            mail = store.stats()["mail"]
            assert (mail["waiting"], mail["scheduled"], mail["running"]) == (4, 1, 0)


def test_add_with_the_applications_own_connection_through_pgbouncer_commits_or_rolls_back_with_it(
        pg, pgbouncer, pooled):
    producers = _producers(pg, pgbouncer)
    kept = set()
    # The application's connection, through the same pooler: it prepares nothing (psycopg's advice for
    # PgBouncer before 1.21), as its own statements would otherwise be prepared on one server connection.
    with psycopg.connect(pgbouncer.url, prepare_threshold=None) as app:
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


def test_store_transaction_through_pgbouncer_commits_its_rows_and_jobs_or_neither(pg, pgbouncer, pooled):
    producers = _producers(pg, pgbouncer)
    pg.rows('CREATE TABLE {s}.orders (n int)')
    kept = set()
    for n in range(CALLS):
        for k, store in enumerate(producers):
            with store.transaction() as tx:
                tx.execute(f'INSERT INTO "{pg.schema}".orders VALUES (%s)', (n,))
                store.queue("mail").add({"n": n}, id=f"kept-{k}-{n}", tx=tx)
                # lock_timeout (30 s unless open says otherwise) set for this transaction alone: no session's
                assert store.query("SHOW lock_timeout") == [("30s",)]
            kept.add(f"kept-{k}-{n}")
            with pytest.raises(ZeroDivisionError), store.transaction() as tx:
                store.queue("mail").add({"n": n}, id=f"undone-{k}-{n}", tx=tx)
                1 / 0
    assert _drain(pooled, pg) == kept
    assert pg.rows("SELECT count(*) FROM {s}.orders") == [(2 * CALLS,)]


def _advisory_locks(pg: Any) -> set[tuple]:
    """The advisory locks held of this test's schema (other tests' schemas share the database)."""
    q = _sql.schema(pg.schema)
    keys = [q.queue_key, q.live_key, q.group_key, q.fold_key]
    return set(pg.rows("SELECT classid, objid, objsubid FROM pg_locks l JOIN pg_database d ON d.oid = l.database "
                       "WHERE l.locktype = 'advisory' AND l.granted AND d.datname = current_database() "
                       "AND l.classid::int8 = ANY(%s)", (keys,)))


def test_producers_closed_behind_pgbouncer_leave_no_session_lock_on_its_connections(pg, pgbouncer, pooled):
    before = _advisory_locks(pg)  # the direct store's own liveness lock
    for store in _producers(pg, pgbouncer):
        store.queue("mail")
        store.close()
    assert _advisory_locks(pg) == before


def test_producers_behind_pgbouncer_leave_no_setting_and_no_prepared_statement_on_its_connections(
        pg, pgbouncer, pooled):
    producers = [tinystore.open(pgbouncer.url, schema=pg.schema, durability="normal", lock_timeout="5s")
                 for _ in range(2)]
    pg.stores.extend(producers)
    for n in range(CALLS):
        for k, store in enumerate(producers):
            store.queue("mail").add({}, id=f"p{k}-{n}")
            with store.transaction() as tx:
                store.queue("mail").add({}, id=f"tx{k}-{n}", tx=tx)
                assert store.query("SHOW synchronous_commit") == [("off",)]  # durability="normal", this once
    seen = []
    clients = [psycopg.connect(pgbouncer.url, prepare_threshold=None) for _ in range(2)]
    try:  # both in a transaction at once: each holds one of the pooler's two server connections
        for client in clients:
            seen.append(client.execute("SELECT current_setting('lock_timeout'), current_setting('synchronous_commit'), "
                                       "(SELECT count(*) FROM pg_prepared_statements), pg_backend_pid()").fetchone())
    finally:
        for client in clients:
            client.close()
    assert len({pid for *_, pid in seen}) == 2
    defaults = pg.rows("SELECT current_setting('lock_timeout'), current_setting('synchronous_commit')")[0]
    assert [row[:3] for row in seen] == [(*defaults, 0)] * 2 and defaults[1] != "off"


# Workers: on the direct URL, and refused without one

def _named(url: str, name: str) -> str:
    """``url`` with an application_name, so that its sessions are told apart in pg_stat_activity."""
    return f"{url}{'&' if '?' in url else '?'}application_name={name}"


def _sessions(pg: Any, name: str) -> int:
    return pg.rows("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (name,))[0][0]


def _registered(pg: Any) -> list[int]:
    return [pid for (pid,) in pg.rows("SELECT pid FROM {s}.processes ORDER BY pid")]


def test_a_worker_process_opened_on_the_pooler_with_direct_runs_the_jobs_added_through_the_pooler(
        pg, pgbouncer, pooled, child_env, tmp_path, wait_for):
    producer = pg.open_at(pgbouncer.url)
    witness = tmp_path / "witness"
    locks = _advisory_locks(pg)
    command = pg.child("worker", "mail", str(witness), "2", "0", "4")
    command[2] = pgbouncer.url
    child_env["DIRECT"] = _named(pg.url, f"worker-{pg.schema}")
    worker = subprocess.Popen(command, env=child_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert worker.stdout.readline().strip() == "serving", worker.stderr.read()
        # Registered as it starts serving, with its liveness lock and LISTEN on the direct URL: one session.
        wait_for(lambda: worker.pid in _registered(pg))
        assert _sessions(pg, f"worker-{pg.schema}") == 1
        ids = [producer.queue("mail").add({"n": n}, id=f"one-{n}").id for n in range(10)]
        ids += [job.id for job in producer.queue("mail").add_many([tinystore.Job({}, id=f"many-{n}") for n in range(10)])]
        wait_for(lambda: witness.exists() and witness.read_text().count("end ") == len(ids), timeout=30)
    finally:
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(30) == 0, worker.stderr.read()
    lines = [line.split() for line in witness.read_text().splitlines()]
    assert sorted(job for what, job, *_ in lines if what == "start") == sorted(ids)  # each ran once
    assert producer.queue("mail").jobs(limit=100) == []  # done, and kept no longer (dedupe=0)
    assert worker.pid not in _registered(pg)
    wait_for(lambda: _sessions(pg, f"worker-{pg.schema}") == 0 and _advisory_locks(pg) == locks)


def test_a_worker_given_only_the_pooled_url_is_refused_at_start_in_one_line_naming_host_and_database(
        pg, pgbouncer, pooled):
    url = pgbouncer.url.replace("postgresql://postgres@", "postgresql://postgres:s3cret-Pw@")  # trust: ignored
    store = pg.open_at(url)
    mail = store.queue("mail")
    mail.add({}, id="m1")
    ran = []
    mail.work(lambda payload, run: ran.append(run.id))
    said = (f"the store's URL reaches 127.0.0.1:{pgbouncer.port}, database {pgbouncer.dbname!r}, through a "
            f"connection pooler: workers and watches need a session of their own on the server (a session "
            f"advisory lock, LISTEN), which a pooler in transaction mode cannot keep; open the store with "
            f"tinystore.open(url, direct=URL), URL reaching the server without the pooler")
    for start in (store.run_until_idle, store.serve, store.start, lambda: mail.wait("m1", timeout="1s")):
        with pytest.raises(tinystore.Error) as refused:
            start()
        assert str(refused.value) == said
    assert ran == [] and mail.get("m1").state == "waiting"
    assert _registered(pg) == [os.getpid()]  # the direct store's, which made the schema; this one none
    assert _drain(pooled, pg) == {"m1"}  # the direct store's worker serves the queue all the same


def test_a_store_given_direct_connects_there_only_when_it_serves_or_watches(pg, pgbouncer, pooled, wait_for):
    store = tinystore.open(pgbouncer.url, schema=pg.schema, direct=_named(pg.url, f"lazy-{pg.schema}"))
    pg.stores.append(store)
    mail = store.queue("mail")
    mail.add({}, id="m1")
    assert mail.get("m1").state == "waiting" and store.stats()["mail"]["waiting"] == 1
    assert _sessions(pg, f"lazy-{pg.schema}") == 0 and _registered(pg) == [os.getpid()]  # the direct store's only

    mail.work(lambda payload, run: None)
    store.run_until_idle()
    assert mail.get("m1") is None  # done, and kept no longer (dedupe=0)
    assert _sessions(pg, f"lazy-{pg.schema}") == 1 and _registered(pg) == [os.getpid(), os.getpid()]
    store.close()
    assert _registered(pg) == [os.getpid()]
    wait_for(lambda: _sessions(pg, f"lazy-{pg.schema}") == 0)  # the server's backend ends just after the close


def test_a_job_watched_through_the_pooler_is_heard_ending_on_the_direct_connection(pg, pgbouncer, pooled):
    producer = tinystore.open(pgbouncer.url, schema=pg.schema, direct=pg.url)
    pg.stores.append(producer)
    producer.queue("mail").add({}, id="m1")
    pooled.queue("mail").work(lambda payload, run: None)
    pooled.start()
    try:
        state = producer.queue("mail").wait("m1", timeout="20s")
    finally:
        pooled.stop()
    assert state is not None and state.state == "done"


def test_a_direct_url_through_a_pooler_or_to_another_database_is_refused_when_a_worker_starts(pg, pgbouncer, pooled):
    other = re.sub(r"/[^/?]+(\?|$)", r"/postgres\1", pg.url.split("://", 1)[1], count=1)
    for direct, said in ((pgbouncer.url, f"direct= reaches 127.0.0.1:{pgbouncer.port}, database "
                                         f"{pgbouncer.dbname!r}, through a connection pooler too"),
                         (pg.url.split("://", 1)[0] + "://" + other, "which is not the server and database of")):
        store = tinystore.open(pgbouncer.url, schema=pg.schema, direct=direct)
        pg.stores.append(store)
        store.queue("mail").work(lambda payload, run: None)
        with pytest.raises(tinystore.Error, match=re.escape(said)):
            store.run_until_idle()
        store.close()
    assert _registered(pg) == [os.getpid()]
