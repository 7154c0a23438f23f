"""ASY-01: an awaited call never blocks the event loop while it waits for the disk, the write lock or the
server. ASY-02: once the await returns, its twin's promise holds; a task cancelled while it awaits
promised nothing, and leaves nothing half done.

The loop's stalls are measured by a ticker: a task of the same loop that wakes every few milliseconds
and keeps the longest gap it saw between two wake-ups. Another process holds the store's write lock
(SQLite: ``BEGIN IMMEDIATE``; PostgreSQL: a lock on the jobs table that every insert waits for) for a
second: the awaited call waits for it and the ticker goes on, while the blocking call, made from the
loop, stalls the ticker for that second (the witness that the ticker sees a stall).
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time
from typing import Any, Awaitable, Callable

import pytest

import kits
import tinystore
from helpers import start_child, wait_for_line

WAIT = 30  # seconds an event may take before the test fails instead of hanging (a loaded CI machine)
HELD = 1.5  # seconds the other process holds the write lock
# The longest stall an awaited call may leave the loop with: far below the lock's hold, which the blocking
# call stalls it for, and far above a loaded machine's scheduling (W13 in benchmarks/ measures the stalls).
SMALL_STALL = HELD / 3

MESSAGES = "id INTEGER PRIMARY KEY, body TEXT NOT NULL"
ADD = "INSERT INTO messages (id, body) VALUES (?, ?)"


class Ticker:
    """A task of the running loop that wakes every 5 ms and keeps the longest gap between wake-ups."""

    def __init__(self) -> None:
        self.longest = 0.0
        self._task = asyncio.ensure_future(self._tick())

    async def _tick(self) -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.005)
            now = time.monotonic()
            self.longest = max(self.longest, now - last)
            last = now

    async def stop(self) -> float:
        await asyncio.sleep(0.02)  # one more tick: a stall that ended just now is counted
        self._task.cancel()
        return self.longest


def hold_write_lock(kit: kits.Kit, target: str) -> Any:
    """Another process that holds the store's write lock for ``HELD`` seconds, from when it prints 'held'."""
    if kit.name == "sqlite":
        code = """
            import sqlite3, sys, time
            conn = sqlite3.connect(sys.argv[1], isolation_level=None)
            conn.execute("BEGIN IMMEDIATE")
            print("held", flush=True)
            time.sleep(float(sys.argv[2]))
            conn.execute("COMMIT")
        """
    else:
        code = """
            import psycopg, sys, time
            conn = psycopg.connect(sys.argv[1])
            conn.execute("LOCK TABLE tinystore.jobs IN EXCLUSIVE MODE")  # every insert of a job waits
            print("held", flush=True)
            time.sleep(float(sys.argv[2]))
            conn.commit()
        """
    child = start_child(code, target, str(HELD))
    wait_for_line(child, "held", WAIT)
    return child


async def timed_under_lock(kit: kits.Kit, target: str, call: Callable[[], Awaitable[Any]]) -> tuple[float, float]:
    """How long ``call()`` took while another process held the write lock, and the loop's longest stall."""
    child = hold_write_lock(kit, target)
    try:
        ticker = Ticker()
        await asyncio.sleep(0.02)
        began = time.monotonic()
        await call()
        took = time.monotonic() - began
        return took, await ticker.stop()
    finally:
        child.wait(WAIT)


def test_ASY_01_a_ticker_keeps_ticking_while_add_async_waits_for_another_process_s_write_lock(
        store: tinystore.Store, kit: kits.Kit, target: str) -> None:
    replies = store.queue("replies")

    async def main() -> None:
        took, stall = await timed_under_lock(kit, target, lambda: replies.add_async({"n": 1}, id="a"))
        assert took > HELD / 2, "the add did not wait for the other process's lock: the test proves nothing"
        assert stall < SMALL_STALL, f"add_async stalled the loop {stall:.3f}s"

        async def blocking() -> None:  # the witness: the sync add, called from the loop, stalls it
            replies.add({"n": 2}, id="b")
        took, stall = await timed_under_lock(kit, target, blocking)
        assert stall > HELD / 2, f"the blocking add stalled the loop only {stall:.3f}s: the ticker sees nothing"

    asyncio.run(main())
    assert replies.get("a").payload == {"n": 1} and replies.get("b").payload == {"n": 2}


def test_ASY_01_transaction_async_waits_for_the_write_lock_without_stalling_the_loop(
        store: tinystore.Store, kit: kits.Kit, target: str) -> None:
    kit.create_table(store, "messages", MESSAGES)
    replies = store.queue("replies")

    async def in_transaction() -> None:
        async with store.transaction_async() as tx:
            await tx.execute(kit.sql(ADD), (1, "hi"))
            await replies.add_async({"message_id": 1}, id="reply:1", tx=tx)

    async def main() -> None:
        took, stall = await timed_under_lock(kit, target, in_transaction)
        assert took > HELD / 2, "the transaction did not wait for the other process's lock"
        assert stall < SMALL_STALL, f"transaction_async stalled the loop {stall:.3f}s"

    asyncio.run(main())
    assert kit.app_rows(target, "SELECT id, body FROM messages") == [(1, "hi")]
    assert replies.get("reply:1").payload == {"message_id": 1}


def test_ASY_01_every_async_twin_answers_as_its_sync_call(store: tinystore.Store, clock: Any) -> None:
    replies = store.queue("replies", attempts=1)
    mailer = store.queue("mailer")

    @replies.work
    def fail(payload: Any, run: Any) -> None:
        raise RuntimeError("down")

    async def main() -> None:
        job = await replies.add_async({"n": 1}, id="one", group="g")
        assert (job.id, job.state, job.added, job.group) == ("one", "waiting", True, "g")
        again = await replies.add_async({"n": 9}, id="one")
        assert not again.added and again.payload == {"n": 1}  # JOB-10, as add
        many = await replies.add_many_async([{"n": 2}, tinystore.Job({"n": 3}, id="three", delay="1h")])
        assert [j.state for j in many] == ["waiting", "scheduled"]
        assert (await replies.get_async("one")).payload == {"n": 1}
        assert await replies.get_async("nobody") is None
        assert [j.id for j in await replies.jobs_async(state="scheduled")] == ["three"]
        assert await replies.cancel_async("three") and not await replies.cancel_async("three")
        with pytest.raises(tinystore.InvalidArgument, match="replies"):
            await replies.add_async({"n": 1}, id="")
        await replies.pause_async()
        assert replies.paused and (await store.stats_async())["replies"]["paused"]
        await replies.resume_async()
        assert not replies.paused

        store.run_until_idle()  # both waiting jobs fail for good (attempts=1)
        assert (await replies.get_async("one")).state == "failed"
        assert await replies.retry_async("one")
        assert (await replies.get_async("one")).state == "waiting"
        assert await replies.cancel_many_async(ids=["one"]) == 1
        assert await replies.retry_many_async() == 1  # the job of n=2
        assert await replies.cancel_many_async(state="waiting") == 1
        assert (await store.stats_async())["replies"]["waiting"] == 0

        batch = store.batch(then=(mailer, {"to": "ops"}))
        await replies.add_async({"n": 4}, batch=batch)
        await batch.close_async()
        state = await store.batch_state_async(batch.id)
        assert state.closed and state.total == 1 and state == store.batch_state(batch.id)

    asyncio.run(main())


def test_ASY_01_fifty_tasks_add_thousands_of_jobs_under_write_load_without_stalling_the_loop(
        store: tinystore.Store, kit: kits.Kit, target: str) -> None:
    replies = store.queue("replies")
    others = store.queue("others")
    stop = False

    def write_load() -> int:  # another writer of the store, all along: the adds share its commits and lock
        count = 0
        while not stop:
            others.add({"n": count})
            count += 1
        return count

    async def main() -> tuple[float, int]:
        nonlocal stop
        loop = asyncio.get_running_loop()
        load = loop.run_in_executor(None, write_load)
        ticker = Ticker()

        async def adder(task: int) -> None:
            for n in range(40):
                await replies.add_async({"task": task, "n": n}, id=f"{task}:{n}")
        await asyncio.wait_for(asyncio.gather(*(adder(t) for t in range(50))), WAIT * 4)
        stall = await ticker.stop()
        stop = True
        return stall, await load

    stall, loaded = asyncio.run(main())
    assert loaded > 0
    assert store.stats()["replies"]["waiting"] == 2000
    assert len({r.id for r in kit.job_rows(target) if r.queue == "replies"}) == 2000
    assert stall < SMALL_STALL, f"the loop stalled {stall:.3f}s while 50 tasks added"


def test_ASY_02_once_add_async_returns_the_job_survives_a_sigkill(
        target: str, open_store: Callable[..., tinystore.Store], child_env: dict[str, str]) -> None:
    child = start_child("""
        import asyncio, os, signal, sys, tinystore
        store = tinystore.open(sys.argv[1])
        replies = store.queue("replies")
        async def main():
            await replies.add_async({"message_id": 41}, id="reply:41")
            print("added", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)  # right after the await returned: no close, no flush
        asyncio.run(main())
    """, target, env=child_env)
    wait_for_line(child, "added", WAIT)
    assert child.wait(WAIT) == -signal.SIGKILL
    store = open_store()
    assert store.queue("replies").get("reply:41").payload == {"message_id": 41}


def test_ASY_02_a_task_cancelled_at_random_moments_of_add_async_leaves_each_job_whole_or_absent(
        store: tinystore.Store, kit: kits.Kit, target: str) -> None:
    replies = store.queue("replies")
    chance = random.Random(int.from_bytes(os.urandom(4), "big"))

    async def main() -> tuple[list[asyncio.Task], int]:
        loop = asyncio.get_running_loop()
        tasks = []
        for n in range(300):  # half with an id, half without: an add without one must not land twice
            id = f"job:{n}" if n % 2 else None
            tasks.append(asyncio.ensure_future(replies.add_async({"n": n}, id=id)))
        cancelled = 0
        for task in tasks:
            loop.call_later(chance.uniform(0, 0.05), task.cancel)
        await asyncio.wait(tasks, timeout=WAIT)
        cancelled = sum(t.cancelled() for t in tasks)
        return tasks, cancelled

    tasks, cancelled = asyncio.run(main())
    assert cancelled > 0, "no task was cancelled while it awaited: the test proves nothing"
    rows = [r for r in kit.job_rows(target) if r.queue == "replies"]
    payloads = [r.payload for r in rows]
    for n, task in enumerate(tasks):
        landed = payloads.count(f'{{"n":{n}}}')
        assert landed <= 1, f"job n={n} was added {landed} times"
        if not task.cancelled():
            assert landed == 1 and task.result().payload == {"n": n}  # the await returned: it is kept
        if n % 2:  # get says whether it exists
            found = replies.get(f"job:{n}")
            assert (found is not None) == (landed == 1)
            assert found is None or found.payload == {"n": n}
    assert store.stats()["replies"]["waiting"] == len(rows)


def test_ASY_02_a_task_cancelled_at_random_moments_of_transaction_async_leaves_it_whole_or_absent(
        store: tinystore.Store, kit: kits.Kit, target: str) -> None:
    kit.create_table(store, "messages", MESSAGES)
    replies = store.queue("replies")
    chance = random.Random(int.from_bytes(os.urandom(4), "big"))

    async def one(n: int) -> None:
        async with store.transaction_async() as tx:
            await tx.execute(kit.sql(ADD), (n, f"message {n}"))
            await replies.add_async({"message_id": n}, id=f"reply:{n}", tx=tx)
            await tx.query("SELECT count(*) FROM messages")

    async def main() -> list[asyncio.Task]:
        loop = asyncio.get_running_loop()
        tasks = [asyncio.ensure_future(one(n)) for n in range(60)]
        for task in tasks:
            loop.call_later(chance.uniform(0, 0.1), task.cancel)
        await asyncio.wait(tasks, timeout=WAIT)
        return tasks

    tasks = asyncio.run(main())
    assert any(t.cancelled() for t in tasks), "no task was cancelled while it awaited: the test proves nothing"
    rows = {id for (id,) in kit.app_rows(target, "SELECT id FROM messages")}
    for n, task in enumerate(tasks):
        job = replies.get(f"reply:{n}")
        assert (n in rows) == (job is not None), f"transaction {n}: its row and its job did not commit together"
        if not task.cancelled():
            assert n in rows
    with store.transaction() as tx:  # no transaction was left open holding the write lock
        tx.execute(kit.sql(ADD), (1000, "after"))
    assert 1000 in {id for (id,) in kit.app_rows(target, "SELECT id FROM messages")}


# JOB-02 from async code: conn= takes the application's own async connection, inside its open transaction.


def async_connections(kit: kits.Kit, target: str) -> list[tuple[str, Callable[[], Any]]]:
    """(name, an async context manager giving a connection in an open transaction) for each async driver and
    SQLAlchemy wrapper the backend takes; each ends by committing, or rolling back on an exception."""
    from contextlib import asynccontextmanager

    from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

    url = kit.sqlalchemy_url(target)
    url = url.replace("sqlite://", "sqlite+aiosqlite://") if kit.name == "sqlite" else url

    @asynccontextmanager
    async def driver() -> Any:
        if kit.name == "sqlite":
            import aiosqlite
            conn = await aiosqlite.connect(target)
        else:
            import psycopg
            conn = await psycopg.AsyncConnection.connect(target)
        try:
            yield conn
            await conn.commit()
        except BaseException:
            await conn.rollback()
            raise
        finally:
            await conn.close()

    @asynccontextmanager
    async def connection() -> Any:
        engine = create_async_engine(url)
        try:
            async with engine.begin() as conn:
                yield conn
        finally:
            await engine.dispose()

    @asynccontextmanager
    async def session() -> Any:
        engine = create_async_engine(url)
        try:
            async with AsyncSession(engine) as s, s.begin():
                yield s
        finally:
            await engine.dispose()

    return [("driver", driver), ("AsyncConnection", connection), ("AsyncSession", session)]


async def app_insert(conn: Any, kit: kits.Kit, n: int) -> None:
    """The application's own row, through its own async connection."""
    if hasattr(conn, "exec_driver_sql"):
        await conn.exec_driver_sql(kit.sql(ADD), (n, f"message {n}"))
    elif hasattr(conn, "get_bind"):
        await (await conn.connection()).exec_driver_sql(kit.sql(ADD), (n, f"message {n}"))
    else:
        await conn.execute(kit.sql(ADD), (n, f"message {n}"))


def test_JOB_02_add_async_with_the_application_s_async_connection_commits_with_its_rows_or_not_at_all(
        store: tinystore.Store, kit: kits.Kit, target: str) -> None:
    kit.create_table(store, "messages", MESSAGES)
    replies = store.queue("replies")
    kinds = async_connections(kit, target)

    async def main() -> None:
        for n, (kind, opened) in enumerate(kinds):
            async with opened() as conn:
                await app_insert(conn, kit, n)
                job = await replies.add_async({"message_id": n}, id=f"reply:{n}", conn=conn)
                assert job.added, kind
                assert replies.get(f"reply:{n}") is None, f"{kind}: the job was seen before the commit"
            assert replies.get(f"reply:{n}") is not None, f"{kind}: the job did not commit with the rows"

            with pytest.raises(KeyError):
                async with opened() as conn:
                    await app_insert(conn, kit, 100 + n)
                    await replies.add_async({"message_id": 100 + n}, id=f"reply:{100 + n}", conn=conn)
                    raise KeyError("the application's transaction fails")
            assert replies.get(f"reply:{100 + n}") is None, f"{kind}: the job outlived the rollback"

    asyncio.run(main())
    assert [id for (id,) in kit.app_rows(target, "SELECT id FROM messages ORDER BY id")] == [0, 1, 2]


def test_JOB_02_add_async_refuses_a_connection_it_cannot_add_through(store: tinystore.Store) -> None:
    replies = store.queue("replies")

    class Other:
        pass

    async def main() -> None:
        with pytest.raises(tinystore.InvalidArgument, match="replies"):
            await replies.add_async({"n": 1}, conn=Other())
    asyncio.run(main())
