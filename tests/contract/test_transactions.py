"""JOB-02: a job added inside a transaction commits with its rows, or not at all.
JOB-14: a step run with ``run.transaction(name, fn)`` takes effect exactly once.

Real stores, real processes (killed with SIGKILL, stopped with SIGSTOP), the
application's own connections (of the backend's own kind, from the kit), and
real SQLAlchemy where installed. The application's SQL is written with ``?``
and ``:name`` parameters; ``kit.sql`` puts it in the backend's style.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from contextlib import closing
from pathlib import Path
from typing import Any, Callable

import pytest

import kits
import tinystore
from helpers import start_child, wait_for_line
from tinystore.testing import FakeClock

WAIT = 30  # seconds an event may take before the test fails instead of hanging (a loaded CI machine)

MESSAGES = "id {auto_id}, body TEXT NOT NULL, reply_to INTEGER"  # the columns of the application's table
ADD = "INSERT INTO messages (id, body) VALUES (?, ?)"  # the application's SQL, for kit.sql


def rows_in(kit: kits.Kit, target: str) -> list[tuple]:
    """The application's rows, read on a connection of their own: what is committed."""
    return kit.app_rows(target, "SELECT id, body, reply_to FROM messages ORDER BY id")


def with_messages(kit: kits.Kit, store: tinystore.Store) -> tinystore.Queue:
    kit.create_table(store, "messages", MESSAGES)
    return store.queue("replies")


# JOB-02 with store.transaction()


def test_JOB_02_a_job_added_with_tx_commits_with_the_rows_of_store_transaction(
        store: tinystore.Store, kit: kits.Kit, target: str) -> None:
    replies = with_messages(kit, store)
    with store.transaction() as tx:
        assert tx.execute(kit.sql(ADD), (41, "hi")) == 1
        assert tx.executemany(kit.sql(ADD), [(42, "a"), (43, "b")]) == 2
        job = replies.add({"message_id": 41}, id="reply:41", tx=tx)
        assert job.added and job.state == "waiting"
        assert tx.query("SELECT count(*) FROM messages") == [(3,)]  # the transaction reads its own rows
        assert rows_in(kit, target) == []  # nobody else sees them yet

    assert rows_in(kit, target) == [(41, "hi", None), (42, "a", None), (43, "b", None)]
    assert replies.get("reply:41").payload == {"message_id": 41}


def test_JOB_02_an_exception_in_store_transaction_rolls_back_both_the_rows_and_the_job(
        store: tinystore.Store, kit: kits.Kit, target: str) -> None:
    replies = with_messages(kit, store)
    with pytest.raises(RuntimeError, match="the app failed"):
        with store.transaction() as tx:
            tx.execute(kit.sql(ADD), (41, "hi"))
            replies.add({"message_id": 41}, id="reply:41", tx=tx)
            raise RuntimeError("the app failed")

    assert rows_in(kit, target) == []
    assert replies.get("reply:41") is None
    assert replies.add({"message_id": 41}, id="reply:41").added  # the id was never taken


def test_JOB_02_add_without_tx_while_a_store_transaction_is_open_in_the_thread_is_refused(
        store: tinystore.Store, kit: kits.Kit, target: str) -> None:
    replies = with_messages(kit, store)
    with store.transaction() as tx:
        tx.execute(kit.sql(ADD), (41, "hi"))
        with pytest.raises(tinystore.InvalidArgument, match="tx="):
            replies.add({"message_id": 41}, id="reply:41")
    assert rows_in(kit, target) == [(41, "hi", None)]
    assert replies.get("reply:41") is None


def test_JOB_02_store_execute_and_store_query_run_one_statement_in_its_own_transaction(
        store: tinystore.Store, kit: kits.Kit, target: str) -> None:
    kit.create_table(store, "messages", MESSAGES)
    assert store.execute(kit.sql(ADD), (41, "hi")) == 1
    assert store.execute(kit.sql("UPDATE messages SET body = :body WHERE id = :id"), {"body": "hello", "id": 41}) == 1
    assert rows_in(kit, target) == [(41, "hello", None)]  # committed
    assert store.query(kit.sql("SELECT id, body FROM messages WHERE id = ?"), (41,)) == [(41, "hello")]
    with pytest.raises(kit.IntegrityError):
        store.execute(kit.sql(ADD), (41, "again"))
    assert store.query("SELECT body FROM messages") == [("hello",)]
    with store.transaction() as tx:  # the failed statement left no transaction open
        tx.execute(kit.sql(ADD), (42, "next"))
    assert store.query("SELECT count(*) FROM messages") == [(2,)]


# JOB-02 with the application's own connection (of the backend's own kind)

STYLES = {"driver default": "driver", "explicit BEGIN": "explicit"}  # who opens the application's transaction


@pytest.mark.parametrize("style", list(STYLES))
def test_JOB_02_a_job_added_on_the_applications_own_connection_commits_with_its_transaction(
        store: tinystore.Store, kit: kits.Kit, target: str, style: str) -> None:
    replies = with_messages(kit, store)
    with closing(kit.app_connection(target, STYLES[style])) as app:
        app.execute(kit.sql(ADD), (41, "hi"))
        job = replies.add({"message_id": 41}, id="reply:41", conn=app)
        assert job.added and kit.in_transaction(app)
        assert replies.get("reply:41") is None and rows_in(kit, target) == []  # inside the app's transaction
        app.execute("COMMIT")

    assert rows_in(kit, target) == [(41, "hi", None)]
    assert replies.get("reply:41").payload == {"message_id": 41}


@pytest.mark.parametrize("style", list(STYLES))
def test_JOB_02_a_rollback_of_the_applications_own_connection_leaves_neither_row_nor_job(
        store: tinystore.Store, kit: kits.Kit, target: str, style: str) -> None:
    replies = with_messages(kit, store)
    with closing(kit.app_connection(target, STYLES[style])) as app:
        app.execute(kit.sql(ADD), (41, "hi"))
        replies.add({"message_id": 41}, id="reply:41", conn=app)
        app.execute("ROLLBACK")

    assert rows_in(kit, target) == []
    assert replies.get("reply:41") is None
    assert replies.add({"message_id": 41}, id="reply:41").added


def test_JOB_02_a_connection_to_another_file_is_refused_and_nothing_is_written(
        store: tinystore.Store, kit: kits.Kit, tmp_path: Path) -> None:
    if kit.name != "sqlite":
        pytest.skip("connections to another SQLite file and to :memory:, refused as not the store's file")
    import sqlite3

    replies = with_messages(kit, store)
    other_path = str(tmp_path / "other.db")
    for other in (sqlite3.connect(other_path), sqlite3.connect(":memory:")):
        with closing(other):
            kit.create_table(other, "messages", MESSAGES)
            with pytest.raises(tinystore.InvalidArgument) as refused:
                replies.add({"message_id": 41}, id="reply:41", conn=other)
            message = str(refused.value)
            assert "conn=" in message and "store's file" in message and "replies" in message
            assert not other.in_transaction
    with closing(sqlite3.connect(other_path)) as other:
        assert [name for (name,) in other.execute("SELECT name FROM sqlite_master")] == ["messages"]
    with pytest.raises(tinystore.InvalidArgument, match="conn="):
        replies.add({"message_id": 41}, id="reply:41", conn="not a connection")
    assert replies.get("reply:41") is None


# JOB-02 with SQLAlchemy


@pytest.mark.parametrize("first", ["rows first", "job first"])
@pytest.mark.parametrize("ends", ["commit", "rollback"])
@pytest.mark.parametrize("kind", ["Connection", "Session"])
def test_JOB_02_a_job_added_on_a_sqlalchemy_connection_or_session_commits_or_rolls_back_with_it(
        store: tinystore.Store, kit: kits.Kit, target: str, kind: str, ends: str, first: str) -> None:
    sqlalchemy = pytest.importorskip("sqlalchemy")
    from sqlalchemy.orm import Session

    replies = with_messages(kit, store)
    engine = sqlalchemy.create_engine(kit.sqlalchemy_url(target))
    try:
        with (engine.connect() if kind == "Connection" else Session(engine)) as app:
            def insert_rows() -> None:
                app.execute(sqlalchemy.text("INSERT INTO messages (id, body) VALUES (:id, :body)"),
                            {"id": 41, "body": "hi"})
            if first == "rows first":
                insert_rows()
            job = replies.add({"message_id": 41}, id="reply:41", conn=app)  # "job first": nothing else ran yet
            assert job.added
            if first == "job first":
                assert app.in_transaction()  # as if SQLAlchemy had run the insert: its commit() commits it
                insert_rows()
            assert replies.get("reply:41") is None and rows_in(kit, target) == []
            getattr(app, ends)()
    finally:
        engine.dispose()

    if ends == "commit":
        assert rows_in(kit, target) == [(41, "hi", None)]
        assert replies.get("reply:41").payload == {"message_id": 41}
    else:
        assert rows_in(kit, target) == []
        assert replies.get("reply:41") is None


@pytest.mark.parametrize("kind", ["Connection", "Session"])
def test_JOB_02_a_job_added_alone_on_a_sqlalchemy_connection_commits_with_its_commit(
        store: tinystore.Store, kit: kits.Kit, target: str, kind: str) -> None:
    # SQLAlchemy begins a transaction with the first statement it runs itself; the job's insert is not
    # one, so a commit() that knew of no transaction would do nothing and the pool would roll the job back.
    sqlalchemy = pytest.importorskip("sqlalchemy")
    from sqlalchemy.orm import Session

    replies = store.queue("replies")
    engine = sqlalchemy.create_engine(kit.sqlalchemy_url(target))
    try:
        with (engine.connect() if kind == "Connection" else Session(engine)) as app:
            replies.add({"message_id": 41}, id="reply:41", conn=app)
            app.commit()
    finally:
        engine.dispose()
    assert replies.get("reply:41").payload == {"message_id": 41}


def test_JOB_02_a_sqlalchemy_connection_to_another_file_is_refused(
        store: tinystore.Store, kit: kits.Kit) -> None:
    if kit.name != "sqlite":
        pytest.skip("the refusal names the store's file: a SQLite store's")
    sqlalchemy = pytest.importorskip("sqlalchemy")
    replies = with_messages(kit, store)
    engine = sqlalchemy.create_engine(kit.sqlalchemy_url(kit.new_target("other")))
    try:
        with engine.connect() as app:
            with pytest.raises(tinystore.InvalidArgument, match="store's file"):
                replies.add({"message_id": 41}, id="reply:41", conn=app)
    finally:
        engine.dispose()
    assert replies.get("reply:41") is None


# JOB-02 across a crash

KILLED_INSIDE_THE_TRANSACTION = """
import sys, threading
import kits, tinystore

target, how = sys.argv[1], sys.argv[2]
kit = kits.kit_for(target)
store = tinystore.open(target)
replies = store.queue("replies")
if how == "store.transaction":
    with store.transaction() as tx:
        tx.execute(kit.sql("INSERT INTO messages (id, body) VALUES (?, ?)"), (41, "hi"))
        replies.add({"message_id": 41}, id="reply:41", tx=tx)
        print("inside the transaction", flush=True)
        threading.Event().wait()
else:
    app = kit.app_connection(target)
    app.execute(kit.sql("INSERT INTO messages (id, body) VALUES (?, ?)"), (41, "hi"))
    replies.add({"message_id": 41}, id="reply:41", conn=app)
    print("inside the transaction", flush=True)
    threading.Event().wait()
"""


@pytest.mark.parametrize("how", ["store.transaction", "own connection"])
def test_JOB_02_a_process_killed_inside_the_transaction_leaves_neither_row_nor_job(
        open_store: Callable[..., tinystore.Store], kit: kits.Kit, target: str, child_env: dict[str, str],
        how: str) -> None:
    with_messages(kit, open_store())
    child = start_child(KILLED_INSIDE_THE_TRANSACTION, target, how, env=child_env)
    try:
        wait_for_line(child, "inside the transaction")
    finally:
        child.kill()
        child.wait(WAIT)
    assert child.returncode == -signal.SIGKILL

    store = open_store()
    replies = store.queue("replies")
    assert rows_in(kit, target) == []
    assert replies.get("reply:41") is None
    with store.transaction() as tx:  # the dead process's write lock is gone with it
        tx.execute(kit.sql(ADD), (41, "hi"))
        assert replies.add({"message_id": 41}, id="reply:41", tx=tx).added
    assert rows_in(kit, target) == [(41, "hi", None)]


# JOB-02: waking


def add_in_transaction(kit: kits.Kit, target: str, store: tinystore.Store, replies: tinystore.Queue, how: str,
                       id: str, commit: bool, before_the_end: Callable[[], None]) -> None:
    """Insert a message and add its reply job in one transaction; commit it or roll it back."""
    message_id = int(id.split(":")[1])
    if how == "store.transaction":
        try:
            with store.transaction() as tx:
                tx.execute(kit.sql(ADD), (message_id, "hi"))
                replies.add({"message_id": message_id}, id=id, tx=tx)
                before_the_end()
                if not commit:
                    raise LookupError("roll back")
        except LookupError:
            pass
    else:
        with closing(kit.app_connection(target)) as app:
            app.execute(kit.sql(ADD), (message_id, "hi"))
            replies.add({"message_id": message_id}, id=id, conn=app)
            before_the_end()
            app.commit() if commit else app.rollback()


@pytest.mark.parametrize("how", ["store.transaction", "own connection"])
def test_JOB_02_a_job_added_in_a_transaction_wakes_a_serving_worker_when_it_commits_and_never_when_it_rolls_back(
        store: tinystore.Store, kit: kits.Kit, target: str, how: str) -> None:
    # The store's clock is fake and never moves here: only hearing of a commit can wake the worker.
    replies = with_messages(kit, store)
    ran: list[str] = []
    handled = {id: threading.Event() for id in ("reply:40", "reply:41")}

    @replies.work
    def answer(payload: Any, run: tinystore.Run) -> None:
        ran.append(run.id)
        handled[run.id].set()

    store.start()

    def not_before(id: str) -> Callable[[], None]:
        def check() -> None:
            assert not handled[id].is_set()
            count = kit.sql("SELECT count(*) FROM messages WHERE id = ?")
            assert kit.app_rows(target, count, (int(id[-2:]),)) == [(0,)]  # not committed for any worker yet
        return check

    for id, commit in (("reply:40", False), ("reply:41", True)):
        add_in_transaction(kit, target, store, replies, how, id, commit=commit, before_the_end=not_before(id))
    assert handled["reply:41"].wait(WAIT), "the commit did not wake the serving worker"
    assert ran == ["reply:41"]  # reply:40 would have come first, had it been committed
    assert replies.get("reply:40") is None
    assert rows_in(kit, target) == [(41, "hi", None)]


# JOB-14: run.transaction


def insert_reply(kit: kits.Kit, tx: tinystore.Transaction, text: str) -> int:
    tx.execute(kit.sql("INSERT INTO messages (body, reply_to) VALUES (?, ?)"), (text, 41))
    return tx.query("SELECT id FROM messages WHERE reply_to = 41 ORDER BY id DESC LIMIT 1")[0][0]


@pytest.mark.parametrize("handler", ["def", "async def"])
def test_JOB_14_run_transaction_writes_once_and_a_later_attempt_gets_its_answer_without_running_fn(
        store: tinystore.Store, clock: FakeClock, kit: kits.Kit, target: str, handler: str) -> None:
    replies = with_messages(kit, store)
    calls: list[int] = []
    seen: list[tuple[int, Any]] = []

    def reply(run: Any) -> Callable[[tinystore.Transaction], int]:
        def fn(tx: tinystore.Transaction) -> int:
            calls.append(run.attempt)
            return insert_reply(kit, tx, f"written by attempt {run.attempt}")
        return fn

    if handler == "def":
        @replies.work
        def answer(payload: Any, run: tinystore.Run) -> None:
            seen.append((run.attempt, run.transaction("reply", reply(run))))
            if run.attempt == 1:
                raise RuntimeError("the handler failed after its transaction")
    else:
        @replies.work
        async def answer(payload: Any, run: tinystore.AsyncRun) -> None:  # type: ignore[misc]
            seen.append((run.attempt, await run.transaction("reply", reply(run))))
            if run.attempt == 1:
                raise RuntimeError("the handler failed after its transaction")

    replies.add({"message_id": 41}, id="reply:41")
    store.run_until_idle()
    clock.advance("2s")
    store.run_until_idle()

    assert calls == [1]
    assert rows_in(kit, target) == [(1, "written by attempt 1", 41)]
    assert seen == [(1, 1), (2, 1)]
    assert replies.get("reply:41") is None


@pytest.mark.parametrize("fails", ["fn raises", "its answer is not JSON"])
def test_JOB_14_fn_s_writes_and_its_checkpoint_commit_together_or_not_at_all(
        store: tinystore.Store, clock: FakeClock, kit: kits.Kit, target: str, fails: str) -> None:
    replies = with_messages(kit, store)
    calls: list[int] = []
    raised: list[BaseException] = []

    @replies.work
    def answer(payload: Any, run: tinystore.Run) -> None:
        def fn(tx: tinystore.Transaction) -> Any:
            calls.append(run.attempt)
            row_id = insert_reply(kit, tx, f"written by attempt {run.attempt}")
            if run.attempt == 1:
                if fails == "fn raises":
                    raise ConnectionError("lost the model halfway")
                return object()
            return row_id
        try:
            run.transaction("reply", fn)
        except Exception as exc:
            raised.append(exc)
            raise

    replies.add({"message_id": 41}, id="reply:41")
    store.run_until_idle()
    assert rows_in(kit, target) == []  # the insert was rolled back with the step
    expected = ConnectionError if fails == "fn raises" else tinystore.InvalidArgument
    assert len(raised) == 1 and isinstance(raised[0], expected)
    clock.advance("2s")
    store.run_until_idle()

    assert calls == [1, 2]  # nothing was kept: fn ran again
    # One row, the second attempt's (its id is whatever the database gives: a rolled-back insert may
    # have used one up, as a PostgreSQL sequence does).
    assert [row[1:] for row in rows_in(kit, target)] == [("written by attempt 2", 41)]
    assert replies.get("reply:41") is None


def test_JOB_14_a_run_transaction_from_an_attempt_that_lost_its_lease_is_rolled_back_with_conflict(
        store: tinystore.Store, open_store: Callable[..., tinystore.Store], clock: FakeClock, kit: kits.Kit,
        target: str) -> None:
    # A second open whose clock stands still, as a stopped process's would: it never renews its lease.
    stalled = open_store(clock=FakeClock())
    kit.create_table(store, "messages", MESSAGES)
    calls: list[int] = []
    late: list[BaseException] = []
    first_waits, first_may_go = threading.Event(), threading.Event()

    def answer(payload: Any, run: tinystore.Run) -> None:
        if run.attempt == 1:
            first_waits.set()
            assert first_may_go.wait(WAIT)  # between steps: its lease runs out meanwhile
        try:
            run.transaction("reply", lambda tx: calls.append(run.attempt) or insert_reply(kit, tx, f"by {run.attempt}"))
        except tinystore.Conflict as exc:
            late.append(exc)
            raise

    replies = store.queue("replies", lease="30s")
    replies.work(answer)
    stalled.queue("replies").work(answer)
    replies.add({"message_id": 41}, id="reply:41")
    first = threading.Thread(target=stalled.run_until_idle, daemon=True)
    first.start()
    assert first_waits.wait(WAIT)
    clock.advance("31s")
    store.run_until_idle()  # ends the lease that ran out, runs attempt 2 to the end
    assert calls == [2] and replies.get("reply:41") is None
    first_may_go.set()
    first.join(WAIT)
    assert not first.is_alive()

    assert len(late) == 1 and isinstance(late[0], tinystore.Conflict)
    assert "'reply'" in str(late[0]) and "attempt 1" in str(late[0]) and "reply:41" in str(late[0])
    assert calls == [2]
    assert rows_in(kit, target) == [(1, "by 2", 41)]


# JOB-14 across a crash and a stall: real child processes

CHILD_PRELUDE = """
import os, sys, threading
import kits, tinystore

target, witness = sys.argv[1], sys.argv[2]
kit = kits.kit_for(target)

def note(what):
    with open(witness, "a") as f:
        f.write(what + "\\n")

def insert_reply(tx, text):
    note("insert")
    tx.execute(kit.sql("INSERT INTO messages (body, reply_to) VALUES (?, ?)"), (text, 41))
    return {"written_by": os.getpid()}
"""

KILLED_AFTER_THE_COMMIT = CHILD_PRELUDE + """
store = tinystore.open(target)
replies = store.queue("replies")

@replies.work
def answer(payload, run):
    written = run.transaction("reply", lambda tx: insert_reply(tx, "hello"))
    print("committed", written["written_by"], flush=True)
    threading.Event().wait()  # killed here, before the handler returns

store.run_until_idle()
"""

STALLED_BETWEEN_STEPS = CHILD_PRELUDE + """
store = tinystore.open(target)
replies = store.queue("replies", lease="1s")

@replies.work
def answer(payload, run):
    text = run.step("answer", lambda: note("model") or "hello")
    print("between the steps, attempt", run.attempt, flush=True)
    sys.stdin.readline()  # stopped here with SIGSTOP; the test writes a line before SIGCONT
    try:
        run.transaction("reply", lambda tx: insert_reply(tx, text))
    except tinystore.Conflict as exc:
        print("conflict:", exc, flush=True)
        raise
    print("committed", flush=True)

store.serve()
"""


def note(witness: str, what: str) -> None:
    with open(witness, "a") as f:
        f.write(what + "\n")


def witnessed(witness: str) -> list[str]:
    return Path(witness).read_text().split() if os.path.exists(witness) else []


def test_JOB_14_a_worker_killed_right_after_run_transaction_committed_leaves_the_rows_once_and_the_next_attempt_skips_fn(
        open_store: Callable[..., tinystore.Store], kit: kits.Kit, target: str, tmp_path: Path,
        child_env: dict[str, str]) -> None:
    witness = str(tmp_path / "witness")
    first = open_store()
    with_messages(kit, first).add({"message_id": 41}, id="reply:41")
    first.close()

    child = start_child(KILLED_AFTER_THE_COMMIT, target, witness, env=child_env)
    try:
        line = wait_for_line(child, "committed")
    finally:
        child.kill()
        child.wait(WAIT)
    assert rows_in(kit, target) == [(1, "hello", 41)]
    assert witnessed(witness) == ["insert"]

    store = open_store()  # the next open ends the dead worker's lease at once (DUR-03)
    replies = store.queue("replies")
    seen: list[tuple[int, Any]] = []

    @replies.work
    def answer(payload: Any, run: tinystore.Run) -> None:
        seen.append((run.attempt, run.transaction("reply", lambda tx: insert_reply_noted(kit, tx, witness, "again"))))

    store.run_until_idle()
    assert seen == [(2, {"written_by": child.pid})] and line == f"committed {child.pid}"
    assert witnessed(witness) == ["insert"]  # fn ran once in all
    assert rows_in(kit, target) == [(1, "hello", 41)]
    assert replies.get("reply:41") is None


def insert_reply_noted(kit: kits.Kit, tx: tinystore.Transaction, witness: str, text: str) -> dict:
    note(witness, "insert")
    tx.execute(kit.sql("INSERT INTO messages (body, reply_to) VALUES (?, ?)"), (text, 41))
    return {"written_by": os.getpid()}


def stop_outside_a_write(kit: kits.Kit, proc: subprocess.Popen, target: str) -> None:
    """SIGSTOP the child at a moment it holds no write lock on the store (else every writer would wait for it)."""
    for _ in range(200):
        os.kill(proc.pid, signal.SIGSTOP)
        _, status = os.waitpid(proc.pid, os.WUNTRACED)  # returns once the child is stopped
        assert os.WIFSTOPPED(status), f"the child ended instead of stopping: {status}"
        if kit.write_lock_free(target, timeout=0):
            return
        os.kill(proc.pid, signal.SIGCONT)  # stopped inside a write: let it finish, then stop it again
    raise AssertionError("the child never stopped outside a write")


def test_JOB_14_a_stalled_worker_s_run_transaction_after_another_worker_finished_the_job_is_refused_and_the_rows_exist_once(
        open_store: Callable[..., tinystore.Store], kit: kits.Kit, target: str, tmp_path: Path,
        child_env: dict[str, str]) -> None:
    # Two processes: the real clock and a short lease; every wait below is on a line or an event.
    witness = str(tmp_path / "witness")
    store = open_store()
    kit.create_table(store, "messages", MESSAGES)
    replies = store.queue("replies", lease="1s")
    replies.add({"message_id": 41}, id="reply:41")

    child = start_child(STALLED_BETWEEN_STEPS, target, witness, env=child_env, stdin=subprocess.PIPE)
    try:
        wait_for_line(child, "between the steps, attempt 1")
        stop_outside_a_write(kit, child, target)  # its lease runs out: nothing renews it

        seen: list[tuple[int, Any, Any]] = []
        finished = threading.Event()

        @replies.work
        def answer(payload: Any, run: tinystore.Run) -> None:
            text = run.step("answer", lambda: note(witness, "model") or "hello from the second worker")
            written = run.transaction("reply", lambda tx: insert_reply_noted(kit, tx, witness, text))
            seen.append((run.attempt, text, written))
            finished.set()

        store.start()
        assert finished.wait(WAIT), "no worker took the job over after the stalled one's lease ran out"
        store.stop()  # settles what ran
        assert replies.get("reply:41") is None  # done
        assert seen == [(2, "hello", {"written_by": os.getpid()})]

        child.stdin.write("go on\n")
        child.stdin.flush()
        os.kill(child.pid, signal.SIGCONT)
        refused = wait_for_line(child, "conflict:")
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGCONT)
            child.kill()
        child.wait(WAIT)

    assert "'reply'" in refused and "attempt 1" in refused and "no longer holds its lease" in refused
    assert witnessed(witness) == ["model", "insert"]  # the stale attempt never ran fn
    assert rows_in(kit, target) == [(1, "hello", 41)]
