"""Connections lost while a store works: the writer, readers and listener connect again; nothing is lost."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

import tinystore
from tinystore.backends._engine import groups, leases, work
from tinystore.backends.postgres._executor import PgExecutor
from tinystore.backends.postgres._keeper import BEAT, FENCE, GRACE


def _terminate(pg) -> int:
    """End every server session of the test's stores (as a server restart would, for them)."""
    rows = pg.rows("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s"
                   " OR application_name LIKE %s", (f"tinystore {pg.schema}", f"tinystore #% {pg.schema}"))
    return len(rows)


def _holds_its_lock(pg, store) -> bool:
    key = store._backend.q.live_key
    return pg.rows("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = %s::int4::oid "
                   "AND objid = %s AND objsubid = 2 AND database = (SELECT oid FROM pg_database "
                   "WHERE datname = current_database())", (key, store._ctx.owner)) == [(1,)]


def test_every_connection_is_made_again_after_the_server_dropped_them(pg, wait_for):
    store = pg.open()
    q = store.queue("a")
    assert _terminate(pg) >= 3  # the writer's, the keeper's, a reader's
    time.sleep(0.2)
    assert q.add({"x": 1}, id="a1").added  # the writer connects again: its stale connection sent nothing
    assert q.get("a1").state == "waiting"  # the pool checks its connections
    # The keeper took its liveness lock again: another process does not find this one dead.
    wait_for(lambda: _holds_its_lock(pg, store))
    other = pg.open()
    assert other._backend.end_dead(time.time()) == 0
    assert len(pg.rows("SELECT id FROM {s}.processes")) == 2


def test_a_serving_worker_rides_out_lost_connections(pg, wait_for):
    store = pg.open()
    q = store.queue("a")
    done = []

    @q.work
    def handler(payload, run):
        done.append(payload)
    store.start()
    try:
        q.add(1)
        wait_for(lambda: done == [1])
        _terminate(pg)
        time.sleep(0.3)
        q.add(2)
        wait_for(lambda: sorted(done) == [1, 2])
        # Another process's add is heard on the keeper's new connection.
        other = pg.open()
        other.queue("a").add(3)
        wait_for(lambda: sorted(done) == [1, 2, 3], timeout=5)
    finally:
        store.stop()


def test_a_process_found_dead_while_its_connection_was_down_registers_again(pg, wait_for):
    store = pg.open()
    owner = store._ctx.owner
    other = pg.open()
    # Its keeper's and writer's connections are dropped; the other process ends its registration before
    # they are back, once it has not said it lives for the grace: not at once, as it may be connecting again.
    back = _cut(pg, store, wait_for)
    assert other._backend.end_dead(time.time()) == 0
    wait_for(lambda: other._backend.end_dead(time.time()) == 1, timeout=GRACE + 5)
    back()
    wait_for(lambda: pg.rows("SELECT count(*) FROM {s}.processes WHERE id = %s", (owner,)) == [(1,)])


def test_a_process_whose_keeper_connection_alone_was_lost_is_not_found_dead(pg, wait_for):
    store = pg.open()
    other = pg.open()
    back = _cut(pg, store, wait_for, writer=False)
    assert other._backend.end_dead(time.time()) == 0  # its writer's session says it lives
    back()
    assert len(pg.rows("SELECT id FROM {s}.processes")) == 2


def _cut(pg, store, wait_for, writer=True):
    """End the keeper's and the writer's sessions of ``store``, and keep the keeper from connecting again
    until the function returned is called."""
    keeper = store._backend._keeper
    connect = keeper._connect

    def refused():
        raise psycopg.OperationalError("kept down by the test")
    keeper._connect = refused
    pids = _pids(store) if writer else _pids(store)[:1]
    pg.rows("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", (pids,))
    wait_for(lambda: pg.rows("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", (pids,)) == [(0,)])
    return lambda: setattr(keeper, "_connect", connect)


def _pids(store) -> list[int]:
    backend = store._backend
    return [backend._keeper._conn.info.backend_pid, backend._writer._conn.raw.info.backend_pid]


def _blocking_worker(store, lease):
    """A queue whose handler's first attempt runs until it is taken away; the time it saw that, in ``stopped``.
    The job's next attempt may start in this process while the first one still runs (its lease ended)."""
    q = store.queue("d", lease=lease)
    q.add({}, id="j")
    began, stopped = threading.Event(), []

    @q.work
    def handler(payload, run):
        if run.attempt == 1:
            began.set()
            while not run.cancelled:
                time.sleep(0.01)
            stopped.append(time.monotonic())
    store.start()
    assert began.wait(10)
    return q, stopped


def test_a_worker_found_dead_stops_its_handler_at_once_registers_again_and_runs_the_job_again(pg, wait_for):
    store = pg.open()
    q, stopped = _blocking_worker(store, "20s")  # renewals every 10 s
    try:
        owner = store._ctx.owner
        other = pg.open()

        def found_dead(conn):  # as a process that found it dead ends it (end_dead)
            ex = PgExecutor(conn)
            notify = other._backend._writer.notify
            for queue in leases.end_owner(ex, owner, lambda name: groups.options(ex, name), time.time(), notify):
                notify(queue)
            work.leave(ex, owner)
        ended = time.monotonic()
        other._backend.submit(found_dead).result()
        wait_for(lambda: stopped, timeout=10)
        assert stopped[0] - ended < BEAT + 1, "it learnt it was found dead only at a renewal"
        wait_for(lambda: pg.rows("SELECT count(*) FROM {s}.processes WHERE id = %s", (owner,)) == [(1,)])
        wait_for(lambda: q.get("j") is None, timeout=10)  # attempt 2 ran, here: registered again, it serves
    finally:
        store.stop()
    assert pg.rows("SELECT count(*) FROM {s}.leases") == [(0,)]


def test_a_worker_cut_off_from_the_server_stops_its_handlers_before_another_process_may_find_it_dead(
        pg, wait_for):
    store = pg.open()
    q, stopped = _blocking_worker(store, "6s")
    try:
        cut = time.monotonic()
        back = _cut(pg, store, wait_for, writer=False)  # its keeper cannot connect again: no heartbeat
        wait_for(lambda: stopped, timeout=GRACE + 5)
        assert FENCE - BEAT - 0.5 < stopped[0] - cut < GRACE, "it stopped its handler too early or too late"
        back()
        wait_for(lambda: q.get("j") is None, timeout=20)  # its lease ran out, unrenewed: attempt 2 ran
    finally:
        store.stop()


def test_a_watch_goes_on_after_its_process_was_found_dead_and_registered_again(pg, wait_for):
    import threading
    store = pg.open()
    q = store.queue("w")
    q.add({}, id="j")
    states = []
    watching = threading.Event()

    def watch():
        for state in q.watch("j"):
            states.append(state.state)
            watching.set()
    t = threading.Thread(target=watch, daemon=True)
    t.start()
    assert watching.wait(5)
    owner = store._ctx.owner
    other = pg.open()
    back = _cut(pg, store, wait_for)
    wait_for(lambda: other._backend.end_dead(time.time()) == 1, timeout=GRACE + 5)
    back()
    wait_for(lambda: pg.rows("SELECT count(*) FROM {s}.watched WHERE owner = %s", (owner,)) == [(1,)])
    worker = other.queue("w")

    @worker.work
    def handler(payload, run):
        pass
    other.run_until_idle()  # another process runs the job: the watcher hears of it
    t.join(10)
    assert states[-1] == "done"


def test_an_error_of_tinystores_own_sql_is_tinystores(pg):
    store = pg.open()
    store.queue("a")
    pg.rows("DROP TABLE {s}.steps")
    with pytest.raises(tinystore.StoreCorrupt):
        store._backend.step_answer(1, "x")


def test_a_deadlock_of_tinystores_own_transaction_is_retried_inside(pg):
    import threading
    store = pg.open()
    backend = store._backend
    key = backend.q.queue_key
    with psycopg.connect(pg.url, autocommit=True) as app:
        app.execute("BEGIN")
        app.execute("SELECT pg_advisory_xact_lock(%s, hashtext('b'))", (key,))
        runs = []
        holding_a = threading.Event()

        def op(conn):
            runs.append(1)
            holding_a.set()
            backend._writer.lock(conn, "b")  # waits for the application's transaction
            return "done"
        future = backend.submit(op, queues=["a"])
        holding_a.wait(5)
        time.sleep(0.1)
        try:
            app.execute("SELECT pg_advisory_xact_lock(%s, hashtext('a'))", (key,))  # a deadlock
        except psycopg.errors.DeadlockDetected:
            pass  # the server chose the application's transaction
        app.execute("ROLLBACK")
        assert future.result(timeout=10) == "done"
