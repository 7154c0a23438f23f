"""Cancel (JOB-12), watch (JOB-13) and progress, on real stores, with real child processes.

Nothing here sleeps to wait for something: handlers wait on events the test
sets, watchers are read with a timeout that only a failing test reaches, and
children say where they are by printing a line. The timeouts are generous so
that a loaded machine does not fail a test that is right; how fast a watcher
sees a change is measured by ``benchmarks/watch.py``.
"""

from __future__ import annotations

import asyncio
import queue as queue_module
import signal
import subprocess
import threading
from typing import Any, Callable, Iterator, Optional

import pytest
from helpers import start_child, wait_for_line

import kits
import tinystore
from tinystore.testing import FakeClock

WAIT = 30.0  # seconds: reached only when a test fails
_END = object()


class Follower:
    """Follows a job with ``queue.watch`` in a thread of its own; the test takes each state with a timeout."""

    def __init__(self, queue: tinystore.Queue, id: str):
        self._states: "queue_module.SimpleQueue[Any]" = queue_module.SimpleQueue()
        self.seen: list[tinystore.JobState] = []
        self.ended = False
        self._thread = threading.Thread(target=self._follow, args=(queue, id), daemon=True)
        self._thread.start()

    def _follow(self, queue: tinystore.Queue, id: str) -> None:
        try:
            for state in queue.watch(id):
                self._states.put(state)
        except BaseException as exc:  # handed to the test
            self._states.put(exc)
        self._states.put(_END)

    def next(self, timeout: float = WAIT) -> tinystore.JobState:
        """The next state the watcher yields; AssertionError when none comes or the watch ended."""
        try:
            item = self._states.get(timeout=timeout)
        except queue_module.Empty:
            raise AssertionError(f"the watcher yielded nothing new within {timeout:g}s; it saw "
                                 f"{[summary(s) for s in self.seen]}") from None
        if item is _END:
            self.ended = True
            raise AssertionError(f"the watch ended after {[summary(s) for s in self.seen]}")
        if isinstance(item, BaseException):
            raise item
        self.seen.append(item)
        return item

    def end(self, timeout: float = WAIT) -> None:
        """Assert that the watch ends now, yielding nothing more."""
        item = self._states.get(timeout=timeout)
        assert item is _END, f"the watch yielded {item!r} where it should have ended"
        self.ended = True
        self._thread.join(timeout)


def summary(s: tinystore.JobState) -> tuple:
    return (s.state, s.attempt, s.ahead, s.progress, s.error and s.error.splitlines()[0])


class Gates:
    """Named events a handler waits on and the test opens; all open at the end, so no thread is left waiting."""

    def __init__(self) -> None:
        self._events: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def __getitem__(self, name: str) -> threading.Event:
        with self._lock:
            return self._events.setdefault(name, threading.Event())

    def wait(self, name: str) -> None:
        assert self[name].wait(WAIT), f"the test never opened {name!r}"

    def open_all(self) -> None:
        for event in list(self._events.values()):
            event.set()


@pytest.fixture
def gates() -> Iterator[Gates]:
    g = Gates()
    yield g
    g.open_all()


class Background:
    """``store.run_until_idle()`` in a thread, so that the test can watch and cancel meanwhile."""

    def __init__(self, store: tinystore.Store):
        self.error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._run, args=(store,), daemon=True)
        self._thread.start()

    def _run(self, store: tinystore.Store) -> None:
        try:
            store.run_until_idle()
        except BaseException as exc:
            self.error = exc

    def join(self) -> None:
        self._thread.join(WAIT)
        assert not self._thread.is_alive(), "run_until_idle did not return"
        if self.error is not None:
            raise self.error


# JOB-12: cancel


@pytest.mark.parametrize("delay", ["1h", None], ids=["scheduled", "waiting"])
def test_JOB_12_cancel_takes_a_scheduled_or_waiting_job_away_at_once_and_its_watchers_see_cancelled(
        store: tinystore.Store, delay: Optional[str], kit: kits.Kit, target: str) -> None:
    q = store.queue("mail")
    ran: list[Any] = []
    q.work(lambda payload, run: ran.append(payload))
    q.add({"v": 1}, id="a", delay=delay, group="g")
    watcher = Follower(q, "a")
    assert watcher.next().state == ("scheduled" if delay else "waiting")

    assert q.cancel("a") is True
    assert q.get("a") is None
    assert watcher.next().state == "cancelled"
    watcher.end()
    assert q.cancel("a") is False
    assert q.jobs() == []
    assert kit.job_rows(target) == [] and kit.groups(target) == []
    store.run_until_idle()
    assert ran == []
    assert q.add({"v": 2}, id="a").added  # the id is free again


def test_JOB_12_cancel_of_an_unknown_id_takes_nothing(store: tinystore.Store) -> None:
    q = store.queue("mail")
    q.add({"v": 1}, id="a")
    assert store.queue("other").cancel("a") is False
    assert q.cancel("b") is False
    assert q.get("a").state == "waiting"


def test_JOB_12_cancelling_the_first_job_of_a_full_group_lets_the_next_one_run(store: tinystore.Store) -> None:
    q = store.queue("mail", group_concurrency=1)
    ran: list[str] = []
    q.work(lambda payload, run: ran.append(run.id))
    q.add({}, id="first", group="g")
    q.add({}, id="second", group="g")
    assert q.cancel("first")
    store.run_until_idle()
    assert ran == ["second"]


def test_JOB_12_cancelling_a_running_async_handler_cancels_it_and_its_answer_settles_nothing(
        store: tinystore.Store, gates: Gates, kit: kits.Kit, target: str) -> None:
    q = store.queue("mail", dedupe="1h")  # a done job would stay visible
    told: list[str] = []

    @q.work
    async def handler(payload: Any, run: tinystore.AsyncRun) -> None:
        gates["running"].set()
        try:
            await asyncio.wait_for(asyncio.Event().wait(), WAIT)
        except asyncio.CancelledError:
            told.append(f"CancelledError cancelled={run.cancelled}")
            return None  # an answer that would make the job done, were it heard
        told.append("not told")

    q.add({"v": 1}, id="a")
    watcher = Follower(q, "a")
    assert watcher.next().state == "waiting"
    worker = Background(store)
    assert gates["running"].wait(WAIT)
    assert watcher.next().state == "running"

    assert q.cancel("a") is True
    assert q.get("a") is None
    assert watcher.next().state == "cancelled"
    watcher.end()
    worker.join()
    assert told == ["CancelledError cancelled=True"]
    assert q.get("a") is None  # never done
    assert store.stats()["mail"]["done_last_minute"] == 0
    assert kit.job_rows(target) == [] and kit.leases(target) == []


@pytest.mark.parametrize("answer", ["none", "raise", "retry", "fail"])
def test_JOB_12_a_cancelled_sync_handler_sees_run_cancelled_and_whatever_it_answers_settles_nothing(
        store: tinystore.Store, gates: Gates, answer: str, kit: kits.Kit, target: str) -> None:
    q = store.queue("mail", dedupe="1h", attempts=1)
    seen: list[bool] = []

    @q.work
    def handler(payload: Any, run: tinystore.Run) -> Any:
        if payload.get("new"):
            return None
        seen.append(run.cancelled)
        gates["running"].set()
        gates.wait("answer")
        seen.append(run.cancelled)
        if answer == "raise":
            raise RuntimeError("late")
        return {"none": None, "retry": run.retry("1s"), "fail": run.fail("late")}[answer]

    q.add({"v": 1}, id="a")
    worker = Background(store)
    assert gates["running"].wait(WAIT)
    assert q.cancel("a") is True
    again = q.add({"new": True}, id="a", delay="1h")  # the id is free: a new job, not the old one
    assert again.added
    gates["answer"].set()
    worker.join()

    assert seen == [False, True]
    state = q.get("a")
    assert (state.state, state.attempt, state.payload, state.error) == ("scheduled", 0, {"new": True}, None)
    stats = store.stats()["mail"]
    assert (stats["done_last_minute"], stats["failed_last_minute"], stats["failed"], stats["done"]) == (0, 0, 0, 0)
    assert kit.leases(target) == []


def test_JOB_12_a_job_cancelled_through_another_open_of_the_file_tells_its_handler(
        open_store: Callable[..., tinystore.Store], clock: FakeClock, gates: Gates) -> None:
    store, other = open_store(clock=clock), open_store(clock=clock)
    q = store.queue("mail")
    told: list[bool] = []

    @q.work
    async def handler(payload: Any, run: tinystore.AsyncRun) -> None:
        gates["running"].set()
        try:
            await asyncio.wait_for(asyncio.Event().wait(), WAIT)
        except asyncio.CancelledError:
            told.append(run.cancelled)
            raise

    q.add({"v": 1}, id="a")
    worker = Background(store)
    assert gates["running"].wait(WAIT)
    assert other.queue("mail").cancel("a") is True
    worker.join()
    assert told == [True]
    assert q.get("a") is None


def test_JOB_12_a_cancelled_handlers_late_answer_does_not_settle_the_job_added_after_it(
        store: tinystore.Store) -> None:
    # The cancelled job leaves the file; a job added next may take its place there (its seq). The
    # late answer of the cancelled attempt must settle nothing, and so must not settle that job.
    q = store.queue("mail")
    started_a = threading.Event()
    events: dict[str, asyncio.Event] = {}

    def event(name: str) -> asyncio.Event:
        return events.setdefault(name, asyncio.Event())  # both handlers run on the worker's loop

    @q.work
    async def handler(payload: Any, run: tinystore.AsyncRun) -> Any:
        if run.id == "a":
            started_a.set()
            try:
                await asyncio.wait_for(asyncio.Event().wait(), WAIT)
            except asyncio.CancelledError:
                pass  # told; it answers anyway, once b runs
            await asyncio.wait_for(event("b started").wait(), WAIT)
            event("a answered").set()
            return None  # "done", were it heard
        event("b started").set()
        await asyncio.wait_for(event("a answered").wait(), WAIT)
        return run.retry("1m")  # b's own answer, after a's

    q.add({}, id="a")
    worker = Background(store)
    assert started_a.wait(WAIT)
    assert q.cancel("a") is True
    q.add({}, id="b")
    worker.join()
    b = q.get("b")
    assert b is not None, "the cancelled attempt's answer settled job b as done"
    assert (b.state, b.attempt, b.error) == ("scheduled", 1, "retry requested after 60s")


CANCELLED_CHILD = """
    import asyncio, sys, tinystore
    store = tinystore.open(sys.argv[1])
    queue = store.queue("mail")

    @queue.work
    async def handler(payload, run):
        print("running", run.id, run.attempt, flush=True)
        try:
            await asyncio.wait_for(asyncio.Event().wait(), 120)
        except asyncio.CancelledError:
            with open(sys.argv[2], "w") as witness:
                witness.write(f"CancelledError cancelled={run.cancelled}")
            print("told", flush=True)
            return None  # would make the job done, were it heard
        print("timed out untold", flush=True)

    store.serve()
    store.close()
    print("stopped", flush=True)
"""


def test_JOB_12_cancelling_a_job_running_in_another_process_tells_its_handler_and_settles_nothing(
        open_store: Callable[..., tinystore.Store], target: str, tmp_path: Any, child_env: dict, kit: kits.Kit) -> None:
    store = open_store()  # the real clock: the child's
    q = store.queue("mail")
    q.add({"v": 1}, id="a")
    witness = tmp_path / "witness.txt"
    child = start_child(CANCELLED_CHILD, target, str(witness), env=child_env)
    try:
        assert wait_for_line(child, "running", WAIT) == "running a 1"
        watcher = Follower(q, "a")
        assert watcher.next().state == "running"
        assert q.cancel("a") is True
        assert q.get("a") is None
        assert watcher.next().state == "cancelled"
        wait_for_line(child, "told", WAIT)
        assert witness.read_text() == "CancelledError cancelled=True"
        again = q.add({"new": True}, id="a", delay="1h")
        assert again.added
        child.send_signal(signal.SIGTERM)
        wait_for_line(child, "stopped", WAIT)
        assert child.wait(WAIT) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(WAIT)
    state = q.get("a")
    assert (state.state, state.attempt, state.payload) == ("scheduled", 0, {"new": True})
    stats = store.stats()["mail"]
    assert (stats["started_last_minute"], stats["done_last_minute"]) == (1, 0)
    assert kit.leases(target) == []


# JOB-13: watch


def test_JOB_13_a_watcher_sees_each_step_of_a_job_in_order(
        store: tinystore.Store, clock: FakeClock, gates: Gates) -> None:
    q = store.queue("work", concurrency=1, backoff=("1s", "1s"))

    @q.work
    def handler(payload: Any, run: tinystore.Run) -> None:
        if run.id != "w":
            gates.wait(f"finish {run.id}")
            return
        if run.attempt == 1:
            gates.wait("progress 10")
            run.progress({"done": "10%"})
            gates.wait("progress 50")
            run.progress({"done": "50%"})
            gates.wait("fail")
            raise RuntimeError("the first attempt fails")
        gates.wait("finish w")

    q.add_many([tinystore.Job({}, id=id) for id in ("a", "b", "c")])
    q.add({}, id="w", delay="10s")
    watcher = Follower(q, "w")
    assert summary(watcher.next()) == ("scheduled", 0, 0, None, None)
    clock.advance("10s")
    assert summary(watcher.next()) == ("waiting", 0, 3, None, None)

    worker = Background(store)  # concurrency=1: a, then b, then c, then w
    assert summary(watcher.next()) == ("waiting", 0, 2, None, None)
    gates["finish a"].set()
    assert summary(watcher.next()) == ("waiting", 0, 1, None, None)
    gates["finish b"].set()
    assert summary(watcher.next()) == ("waiting", 0, 0, None, None)
    gates["finish c"].set()
    assert summary(watcher.next()) == ("running", 1, 0, None, None)
    gates["progress 10"].set()
    assert summary(watcher.next()) == ("running", 1, 0, {"done": "10%"}, None)
    gates["progress 50"].set()
    assert summary(watcher.next()) == ("running", 1, 0, {"done": "50%"}, None)
    gates["fail"].set()
    failed = watcher.next()
    assert (failed.state, failed.attempt) == ("scheduled", 1)  # waits out its backoff
    assert failed.error.startswith("RuntimeError: the first attempt fails")
    worker.join()  # nothing is due: the backoff has not passed

    clock.advance("2s")
    due = watcher.next()
    assert (due.state, due.attempt, due.ahead) == ("waiting", 1, 0)
    worker = Background(store)
    assert summary(watcher.next()) == ("running", 2, 0, None, None)
    gates["finish w"].set()
    done = watcher.next()
    assert (done.state, done.attempt, done.id, done.queue) == ("done", 2, "w", "work")
    watcher.end()
    worker.join()


def test_JOB_13_watch_async_yields_the_job_then_each_change_until_it_ends(
        store: tinystore.Store, gates: Gates) -> None:
    q = store.queue("mail", attempts=1)

    @q.work
    def handler(payload: Any, run: tinystore.Run) -> None:
        gates.wait("report")
        run.progress(["half", 0.5])
        gates.wait("fail")
        raise ValueError("no luck")

    q.add({"v": 1}, id="a")

    async def follow() -> list[tinystore.JobState]:
        seen: list[tinystore.JobState] = []
        loop = asyncio.get_running_loop()
        worker: Any = None
        async with asyncio.timeout(WAIT):
            async for state in q.watch_async("a"):
                seen.append(state)
                if state.state == "waiting":
                    worker = loop.run_in_executor(None, store.run_until_idle)
                elif state.state == "running" and state.progress is None:
                    gates["report"].set()
                elif state.progress is not None and state.state == "running":
                    gates["fail"].set()
            await worker
        return seen

    seen = asyncio.run(follow())
    assert [(s.state, s.attempt) for s in seen] == [("waiting", 0), ("running", 1), ("running", 1), ("failed", 1)]
    assert [s.progress for s in seen[:3]] == [None, None, ["half", 0.5]]
    assert seen[-1].error.startswith("ValueError: no luck")


def test_JOB_13_watching_a_job_that_ended_yields_it_once_and_ends(
        store: tinystore.Store) -> None:
    q = store.queue("mail", attempts=1, dedupe="1h")
    answers = {"ok": None, "bad": RuntimeError("bad")}

    @q.work
    def handler(payload: Any, run: tinystore.Run) -> None:
        if answers[run.id] is not None:
            raise answers[run.id]

    q.add({}, id="ok")
    q.add({}, id="bad")
    store.run_until_idle()
    assert [s.state for s in q.watch("ok")] == ["done"]
    assert [s.state for s in q.watch("bad")] == ["failed"]
    assert list(q.watch("nobody")) == []


def test_JOB_13_many_watchers_of_one_job_each_see_every_change(store: tinystore.Store, gates: Gates) -> None:
    q = store.queue("mail")

    @q.work
    def handler(payload: Any, run: tinystore.Run) -> None:
        gates.wait("report")
        run.progress(1)
        gates.wait("finish")

    q.add({}, id="a")
    watchers = [Follower(q, "a") for _ in range(20)]
    assert {w.next().state for w in watchers} == {"waiting"}
    worker = Background(store)
    assert {w.next().state for w in watchers} == {"running"}
    gates["report"].set()
    assert {w.next().progress for w in watchers} == {1}
    gates["finish"].set()
    assert {w.next().state for w in watchers} == {"done"}
    for w in watchers:
        w.end()
    worker.join()


def test_JOB_13_watchers_of_many_waiting_jobs_each_see_their_own_place_change(
        store: tinystore.Store, clock: FakeClock) -> None:
    q = store.queue("mail")
    store.queue("other").add({}, id="elsewhere")  # another queue's jobs are never ahead
    groups = ["g0", "g1", None]
    jobs = [tinystore.Job({"n": n}, id=f"j{n}", group=groups[n % 3], delay="1m" if n % 4 == 3 else None)
            for n in range(24)]
    q.add_many(jobs)
    watchers = {job.id: Follower(q, job.id) for job in jobs}
    due = [job.id for job in jobs if job.delay is None]
    later = [job.id for job in jobs if job.delay is not None]
    first = {id: watchers[id].next() for id in due + later}
    assert {id: s.ahead for id, s in first.items() if id in due} == {id: n for n, id in enumerate(due)}
    assert {first[id].state for id in later} == {"scheduled"}

    assert q.cancel(due[0])
    assert watchers[due[0]].next().state == "cancelled"
    moved = {id: watchers[id].next().ahead for id in due[1:]}  # every waiting one moves up by one
    assert moved == {id: n for n, id in enumerate(due[1:])} == {id: q.get(id).ahead for id in due[1:]}

    clock.advance("1m")  # the later ones fall due, behind the others (their time is later)
    became = {id: watchers[id].next() for id in later}
    assert {s.state for s in became.values()} == {"waiting"}
    assert {id: s.ahead for id, s in became.items()} == {id: len(due) - 1 + n for n, id in enumerate(later)}


def test_JOB_13_an_async_watcher_left_in_a_closed_event_loop_does_not_stop_the_other_watchers(
        store: tinystore.Store) -> None:
    q = store.queue("mail")
    q.add({}, id="abandoned")
    q.add({}, id="followed")
    loop = asyncio.new_event_loop()
    left = q.watch_async("abandoned")
    assert loop.run_until_complete(left.__anext__()).state == "waiting"
    loop.close()  # without ending the watch: its watcher stays registered
    watcher = Follower(q, "followed")
    assert (watcher.next().state, watcher.seen[-1].ahead) == ("waiting", 1)
    q.cancel("abandoned")
    assert (watcher.next().state, watcher.seen[-1].ahead) == ("waiting", 0)
    q.cancel("followed")
    assert watcher.next().state == "cancelled"
    watcher.end()


def test_JOB_13_a_watcher_of_a_job_done_after_another_was_cancelled_sees_done(
        store: tinystore.Store, gates: Gates) -> None:
    q = store.queue("mail")

    @q.work
    def handler(payload: Any, run: tinystore.Run) -> None:
        gates.wait("finish")

    q.add({}, id="a")
    assert q.cancel("a")
    q.add({}, id="b")
    watcher = Follower(q, "b")
    assert watcher.next().state == "waiting"
    worker = Background(store)
    assert watcher.next().state == "running"
    gates["finish"].set()
    worker.join()
    assert watcher.next().state == "done"


WATCHED_CHILD = """
    import sys, tinystore
    store = tinystore.open(sys.argv[1])
    queue = store.queue("mail")

    @queue.work
    def handler(payload, run):
        print("running", flush=True)
        sys.stdin.readline()
        run.progress({"step": 1})
        sys.stdin.readline()
        return None

    store.run_until_idle()
    store.close()
    print("closed", flush=True)
"""


def test_JOB_13_a_watcher_sees_changes_made_by_another_process(
        open_store: Callable[..., tinystore.Store], target: str, child_env: dict) -> None:
    store = open_store()  # the real clock: the child's
    q = store.queue("mail")
    q.add({"v": 1}, id="a")
    watcher = Follower(q, "a")
    assert watcher.next().state == "waiting"
    # From here this process commits nothing: the watcher hears of the child's commits by itself.
    child = start_child(WATCHED_CHILD, target, env=child_env, stdin=subprocess.PIPE)
    try:
        wait_for_line(child, "running", WAIT)
        assert summary(watcher.next()) == ("running", 1, 0, None, None)
        child.stdin.write("report\n")
        child.stdin.flush()
        assert summary(watcher.next()) == ("running", 1, 0, {"step": 1}, None)
        child.stdin.write("finish\n")
        child.stdin.flush()
        assert watcher.next().state == "done"
        watcher.end()
        wait_for_line(child, "closed", WAIT)
        assert child.wait(WAIT) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(WAIT)


FAST_CHILD = """
import sys
import tinystore

store = tinystore.open(sys.argv[1])
q = store.queue("fast", backoff=("1ms", "1ms"))

@q.work
def handler(payload, run):
    if run.attempt < 3:
        raise RuntimeError(f"attempt {run.attempt} fails")
    for n in range(3):
        run.progress({"n": n})

print("serving", flush=True)
while store.queue("fast").get("j") is not None:
    store.run_until_idle()
store.close()
"""


def test_JOB_13_a_watcher_sees_the_running_state_of_every_attempt_however_fast_the_job_moves(
        open_store: Callable[..., tinystore.Store], target: str, child_env: dict) -> None:
    # Another process runs the job: it fails twice and succeeds at once, reporting progress as it
    # goes, while this process only reads. The watcher must see attempts 1, 2 and 3 running, each
    # progress report and the end, in order.
    store = open_store()
    q = store.queue("fast")
    q.add({}, id="j")
    watcher = Follower(q, "j")
    assert watcher.next().state == "waiting"
    child = start_child(FAST_CHILD, target, env=child_env)
    try:
        seen = []
        while not seen or seen[-1][0] not in ("done", "failed", "cancelled"):
            state = watcher.next()
            seen.append((state.state, state.attempt, state.progress))
        assert child.wait(WAIT) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(WAIT)
    running = [(attempt, progress) for state, attempt, progress in seen if state == "running"]
    assert [a for a, p in running if p is None] == [1, 2, 3], seen
    assert [p for a, p in running if p is not None] == [{"n": 0}, {"n": 1}, {"n": 2}], seen
    assert seen[-1][:2] == ("done", 3), seen


# progress


def test_JOB_13_progress_over_4_KiB_or_not_JSON_is_refused_and_never_reaches_get(
        store: tinystore.Store, gates: Gates) -> None:
    q = store.queue("mail")
    refused: list[str] = []

    @q.work
    def handler(payload: Any, run: tinystore.Run) -> None:
        gates.wait("first")
        run.progress("x" * 4094)  # 4,096 bytes of JSON with its quotes: the most allowed
        gates.wait("bad")
        for bad in ("x" * 4095, {"big": "é" * 2100}, object(), float("nan"), {1, 2}):
            try:
                run.progress(bad)
            except tinystore.Error as exc:
                refused.append(type(exc).__name__)
        run.progress({"ok": True})
        gates.wait("finish")

    q.add({}, id="a")
    watcher = Follower(q, "a")
    assert watcher.next().state == "waiting"
    worker = Background(store)
    assert (watcher.next().state, watcher.seen[-1].progress) == ("running", None)
    gates["first"].set()
    assert watcher.next().progress == "x" * 4094
    assert q.get("a").progress == "x" * 4094
    gates["bad"].set()
    assert watcher.next().progress == {"ok": True}  # nothing refused came between
    assert q.get("a").progress == {"ok": True}
    gates["finish"].set()
    assert watcher.next().state == "done"
    worker.join()
    assert refused == ["LimitExceeded", "LimitExceeded", "InvalidArgument", "InvalidArgument", "InvalidArgument"]


def test_JOB_13_a_watch_ends_with_Closed_when_the_store_closes(open_store: Any, clock: FakeClock) -> None:
    store = open_store(clock=clock)
    q = store.queue("mail")
    q.add({"n": 1}, id="followed")
    watch = q.watch("followed")
    assert next(watch).state == "waiting"
    outcome: list[BaseException] = []
    started = threading.Event()

    def follow() -> None:
        started.set()
        try:
            next(watch)
        except BaseException as exc:  # the test asserts which
            outcome.append(exc)

    thread = threading.Thread(target=follow)
    thread.start()
    started.wait()
    store.close()
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], tinystore.Closed)
