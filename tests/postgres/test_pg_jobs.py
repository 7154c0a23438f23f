"""Jobs on PostgreSQL in one process: the round trip, workers, transactions, steps, watching."""

from __future__ import annotations

import threading

import pytest

import tinystore
from tinystore.testing import FakeClock


def test_add_get_jobs_cancel_retry(pg):
    clock = FakeClock()
    store = pg.open(clock=clock)
    q = store.queue("mail", attempts=1)
    a = q.add({"n": 1, "b": [1, 2]}, id="a")
    assert a.added and a.state == "waiting"
    again = q.add({"n": 99}, id="a")
    assert not again.added and again.payload == {"n": 1, "b": [1, 2]}  # JOB-10
    q.add({"n": 2}, id="b", delay="1h")
    q.add_many([tinystore.Job({"n": 3}, id="c"), tinystore.Job({"n": 4}, id="c")])
    assert q.get("b").state == "scheduled"
    assert [j.id for j in q.jobs()] == ["a", "b", "c"]
    assert [j.id for j in q.jobs(after="a", limit=1)] == ["b"]
    assert [j.id for j in q.jobs(state="scheduled")] == ["b"]
    assert q.get("c").ahead == 1
    assert q.cancel("b") and q.get("b") is None and not q.cancel("b")

    @q.work
    def fail(payload, run):
        raise RuntimeError("boom")
    store.run_until_idle()
    assert q.get("a").state == "failed" and "boom" in q.get("a").error
    assert q.retry("a") and q.get("a").state == "waiting" and q.get("a").attempt == 0
    stats = store.stats()
    assert stats["mail"]["waiting"] == 1 and stats["mail"]["failed"] == 1


def test_run_until_idle_drains_in_order(pg):
    store = pg.open()
    q = store.queue("work", concurrency=1)
    q.add_many([{"i": i} for i in range(30)])
    seen = []

    @q.work
    def handler(payload, run):
        seen.append(payload["i"])
    store.run_until_idle()
    assert seen == list(range(30))  # JOB-01: equal times in add order, strictly with concurrency=1
    assert pg.rows("SELECT count(*) FROM {s}.jobs") == [(0,)]


def test_start_and_stop_serve_in_the_background(pg, wait_for):
    store = pg.open()
    q = store.queue("bg")
    done = []

    @q.work
    async def handler(payload, run):
        done.append(payload)
    store.start()
    try:
        for i in range(5):
            q.add(i)
        wait_for(lambda: len(done) == 5)
    finally:
        store.stop()
    assert sorted(done) == list(range(5))


def test_store_transaction_commits_and_rolls_back_with_the_application_row(pg):
    store = pg.open()
    q = store.queue("tx")
    store.execute("CREATE TABLE public.%s (id int PRIMARY KEY)" % (pg.schema + "_app"))
    table = "public." + pg.schema + "_app"
    try:
        with store.transaction() as tx:
            tx.execute(f"INSERT INTO {table} (id) VALUES (%s)", (1,))
            q.add({"x": 1}, id="kept", tx=tx)
        with pytest.raises(RuntimeError):
            with store.transaction() as tx:
                tx.execute(f"INSERT INTO {table} (id) VALUES (%s)", (2,))
                q.add({"x": 2}, id="gone", tx=tx)
                raise RuntimeError("roll back")
        assert store.query(f"SELECT id FROM {table} ORDER BY id") == [(1,)]
        assert q.get("kept") is not None and q.get("gone") is None
        # the application's SQL errors stay psycopg's
        import psycopg
        with pytest.raises(psycopg.errors.UniqueViolation):
            store.execute(f"INSERT INTO {table} (id) VALUES (%s)", (1,))
    finally:
        store.execute(f"DROP TABLE {table}")


def test_conn_with_a_psycopg_connection(pg):
    import psycopg
    store = pg.open()
    q = store.queue("conn")
    table = "public." + pg.schema + "_app"
    with psycopg.connect(pg.url, autocommit=True) as c:
        c.execute(f"CREATE TABLE {table} (id int PRIMARY KEY)")
    try:
        with psycopg.connect(pg.url) as app:
            app.execute(f"INSERT INTO {table} VALUES (1)")
            q.add({"x": 1}, id="committed", conn=app)
            app.commit()
            app.execute(f"INSERT INTO {table} VALUES (2)")
            q.add({"x": 2}, id="rolled-back", conn=app)
            app.rollback()
        with psycopg.connect(pg.url, autocommit=True) as app:  # autocommit, no transaction: commits at once
            q.add({"x": 3}, id="auto", conn=app)
        assert [r for r in pg.rows(f"SELECT id FROM {table}")] == [(1,)]
        assert q.get("committed") and q.get("auto") and q.get("rolled-back") is None
    finally:
        with psycopg.connect(pg.url, autocommit=True) as c:
            c.execute(f"DROP TABLE {table}")


def test_conn_refuses_another_database_or_kind(pg):
    import psycopg
    store = pg.open()
    q = store.queue("conn")
    with psycopg.connect(pg.url, autocommit=True) as c:
        c.execute("SELECT 1")
        other = pg.url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(other) as app:
        with pytest.raises(tinystore.InvalidArgument):
            q.add({"x": 1}, conn=app)
    with pytest.raises(tinystore.InvalidArgument):
        q.add({"x": 1}, conn=object())


def test_conn_with_sqlalchemy(pg):
    sqlalchemy = pytest.importorskip("sqlalchemy")
    from sqlalchemy.orm import Session
    store = pg.open()
    q = store.queue("sa")
    table = "public." + pg.schema + "_app"
    engine = sqlalchemy.create_engine(pg.url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.begin() as c:
            c.execute(sqlalchemy.text(f"CREATE TABLE {table} (id int PRIMARY KEY)"))
        with engine.connect() as c:
            q.add({"x": 1}, id="conn-first", conn=c)  # before any statement of the application's
            c.execute(sqlalchemy.text(f"INSERT INTO {table} VALUES (1)"))
            c.commit()
        with engine.connect() as c:
            c.execute(sqlalchemy.text(f"INSERT INTO {table} VALUES (2)"))
            q.add({"x": 2}, id="conn-rolled-back", conn=c)
            c.rollback()
        with Session(engine) as session:
            session.execute(sqlalchemy.text(f"INSERT INTO {table} VALUES (3)"))
            q.add({"x": 3}, id="session", conn=session)
            session.commit()
        with Session(engine) as session:
            q.add({"x": 4}, id="session-rolled-back", conn=session)
            session.rollback()
        assert pg.rows(f"SELECT id FROM {table} ORDER BY id") == [(1,), (3,)]
        assert q.get("conn-first") and q.get("session")
        assert q.get("conn-rolled-back") is None and q.get("session-rolled-back") is None
    finally:
        with engine.begin() as c:
            c.execute(sqlalchemy.text(f"DROP TABLE IF EXISTS {table}"))
        engine.dispose()


def test_run_transaction_runs_once_and_steps_are_kept(pg):
    store = pg.open()
    q = store.queue("steps", backoff=(0.01, 0.01))
    table = "public." + pg.schema + "_app"
    store.execute(f"CREATE TABLE {table} (n int)")
    calls = {"step": 0, "tx": 0}
    try:
        @q.work
        def handler(payload, run):
            def step():
                calls["step"] += 1
                return {"v": 1}
            assert run.step("s", step) == {"v": 1}

            def write(tx):
                calls["tx"] += 1
                tx.execute(f"INSERT INTO {table} (n) VALUES (%s)", (run.attempt,))
                return run.attempt
            assert run.transaction("t", write) == 1
            if run.attempt < 3:
                raise RuntimeError("again")
        q.add({}, id="j")
        import time
        deadline = time.time() + 20
        while q.get("j") is not None and time.time() < deadline:
            store.run_until_idle()
            time.sleep(0.02)
        assert q.get("j") is None
        assert calls == {"step": 1, "tx": 1}
        assert store.query(f"SELECT n FROM {table}") == [(1,)]
    finally:
        store.execute(f"DROP TABLE {table}")


def test_transact_conflicts_without_the_lease(pg):
    store = pg.open()
    backend = store._backend
    with pytest.raises(tinystore.Conflict):
        backend.transact((12345, 1), "t", lambda tx: 1, str)


def test_watch_sees_every_state(pg):
    store = pg.open()
    q = store.queue("w")
    q.add({}, id="j")
    states = []
    started = threading.Event()

    def watch():
        for state in q.watch("j"):
            states.append(state.state)
            started.set()
    t = threading.Thread(target=watch)
    t.start()
    started.wait(5)

    @q.work
    def handler(payload, run):
        run.progress({"p": 1})
    store.run_until_idle()
    t.join(10)
    assert states[0] == "waiting" and "running" in states and states[-1] == "done"


def test_maintain_removes_expired(pg):
    clock = FakeClock()
    store = pg.open(clock=clock)
    q = store.queue("m", dedupe="1m")
    q.add_many([{"i": i} for i in range(7)])

    @q.work
    def handler(payload, run):
        pass
    store.run_until_idle()
    assert pg.rows("SELECT count(*) FROM {s}.jobs") == [(7,)]
    clock.advance(120)
    assert store.maintain()["removed"] == 7
    assert pg.rows("SELECT count(*) FROM {s}.jobs") == [(0,)]


def test_an_add_in_the_applications_transaction_holds_no_queue_while_it_is_open(pg):
    # Adds take no queue lock: another process's adds and claims of that queue go on meanwhile.
    import psycopg
    store = pg.open(lock_timeout=0.3)
    q = store.queue("held")
    with psycopg.connect(pg.url) as app:
        q.add({"x": 1}, id="in-tx", conn=app)
        assert q.add({"x": 2}, id="beside").added
        ran = []
        q.work(lambda payload, run: ran.append(payload["x"]))
        store.run_until_idle()
        assert ran == [2]
        app.commit()
    store.run_until_idle()
    assert ran == [2, 1]


@pytest.mark.parametrize("level", ["REPEATABLE READ", "SERIALIZABLE"])
def test_conn_in_a_repeatable_read_or_serializable_transaction_adds_while_workers_run_the_queue(pg, level):
    # Workers' claims and settlements commit while the application's transaction holds an older snapshot:
    # its add must conflict with none of them (the jobs per state are appended, never updated in place).
    import psycopg
    store = pg.open()
    q = store.queue("busy")
    q.work(lambda payload, run: None)
    q.add_many([{"n": n} for n in range(20)])
    with psycopg.connect(pg.url) as app:
        app.execute(f"SET TRANSACTION ISOLATION LEVEL {level}")
        app.execute("SELECT 1")  # the snapshot is taken here
        store.run_until_idle()  # 20 claims and settlements commit, and the queue's counts are folded
        q.add({"n": "mine"}, id="mine", conn=app)
        app.commit()
    stats = store.stats()["busy"]
    assert (stats["waiting"], stats["done"]) == (1, 0)  # done jobs are not kept (dedupe 0)
    assert q.get("mine").state == "waiting"


def test_JOB_12_a_cancel_beside_a_settlement_that_commits_first_sees_it_and_takes_nothing(pg, wait_for):
    # A settlement in flight holds the job's row (here a transaction of the test's that ends the job done);
    # a cancel meanwhile waits for it, then finds the job done: it takes nothing, and the job is not both
    # done and cancelled (counted twice in its batch, its row removed). It read the row without a lock
    # before, saw it waiting, and removed the done row once the settlement committed.
    store = pg.open()
    q = store.queue("q", dedupe="1h")
    q.add({}, id="j")
    with pg.connect() as settling:
        settling.execute(f"UPDATE \"{pg.schema}\".jobs SET state = 'done' WHERE queue = 'q' AND id = 'j'")
        answer: list = []
        canceller = threading.Thread(target=lambda: answer.append(q.cancel("j")))
        canceller.start()
        wait_for(lambda: pg.rows("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                                 " AND query LIKE %s", (f'%"{pg.schema}".jobs%',)) != [(0,)])
        settling.commit()
    canceller.join(10)
    assert answer == [False], "the cancel took a job that had ended"
    assert q.get("j").state == "done"
