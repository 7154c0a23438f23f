"""Contract tests of the core: DUR-01..03, JOB-01, JOB-03..05, JOB-07..09, LIM-04.

Each test is named after the contract it shows, as a sentence. They run on
real stores; crashes are real child processes killed with SIGKILL; time
is a FakeClock that the test moves, so nothing here sleeps to wait.

A child process that must agree with the test about time opens its store on
a FakeClock started at the same instant (``T``), so that a lease it takes
runs out at ``T + lease`` however long the machine takes.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Iterator

import pytest

import tinystore
from helpers import Background, run_child, run_until_idle, start_child, wait_for_line
from tinystore.testing import FakeClock

T = 1_800_000_000.0  # where every FakeClock of these tests starts (the `clock` fixture's default)
WAIT = 30  # seconds a test waits for something that should take milliseconds, before it fails


# ---------------------------------------------------------------------------
# Helpers


def at(job: tinystore.JobState) -> float:
    return job.at.timestamp()


@pytest.fixture
def gate(open_store: Callable[..., tinystore.Store]) -> Iterator[Callable[[], threading.Event]]:
    """Events that handlers block on; all are set when the test ends, so that no handler blocks forever."""
    made: list[threading.Event] = []

    def make() -> threading.Event:
        event = threading.Event()
        made.append(event)
        return event

    yield make
    for event in made:
        event.set()


def child_store(target: str, start: float = T) -> str:
    """Code opening the test's store in a child, on a FakeClock at ``start``."""
    return (f"import os, signal, sys, threading, tinystore\n"
            f"from tinystore.testing import FakeClock\n"
            f"store = tinystore.open({target!r}, clock=FakeClock({start!r}))\n")


def kill_and_wait(proc: Any) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(WAIT) == -signal.SIGKILL


# ---------------------------------------------------------------------------
# DUR-01: once add returns, the job is on the disk


def test_DUR_01_a_job_added_is_read_back_after_the_store_is_closed_and_reopened(open_store, clock):
    first = open_store(clock=clock)
    added = first.queue("replies").add({"message_id": 41}, id="reply:41", group="chat:7")
    assert added.added and added.state == "waiting"
    first.close()

    second = open_store(clock=clock)
    job = second.queue("replies").get("reply:41")
    assert job is not None
    assert (job.id, job.queue, job.state, job.payload, job.group, job.attempt) == (
        "reply:41", "replies", "waiting", {"message_id": 41}, "chat:7", 0)
    assert job.at == added.at


def test_DUR_01_a_process_killed_right_after_add_returned_loses_nothing_and_the_job_runs_when_a_worker_comes(
        target, open_store, clock):
    code = child_store(target) + (
        "store.queue('replies').add({'message_id': 41}, id='reply:41')\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n")
    child = run_child(code, timeout=WAIT)
    assert child.returncode == -signal.SIGKILL, child.stderr

    store = open_store(clock=clock)
    replies = store.queue("replies")
    job = replies.get("reply:41")
    assert job is not None and job.state == "waiting" and job.payload == {"message_id": 41}

    ran = []
    replies.work(lambda payload, run: ran.append((run.id, payload)))
    run_until_idle(store)
    assert ran == [("reply:41", {"message_id": 41})]


def test_DUR_01_every_add_that_returned_before_a_SIGKILL_is_in_the_file(target, open_store, clock):
    code = child_store(target) + (
        "q = store.queue('bulk')\n"
        "i = 0\n"
        "while True:\n"
        "    q.add({'n': i}, id=f'job-{i}')\n"
        "    print('added', i, flush=True)\n"
        "    i += 1\n")
    proc = start_child(code)
    try:
        wait_for_line(proc, "added 30", timeout=WAIT)
    finally:
        kill_and_wait(proc)
    rest, _ = proc.communicate(timeout=WAIT)
    returned = set(range(31)) | {int(line.split()[1]) for line in rest.splitlines() if line.startswith("added ")}

    store = open_store(clock=clock)
    bulk = store.queue("bulk")
    missing = [n for n in sorted(returned) if bulk.get(f"job-{n}") is None]
    assert missing == [], f"adds that returned but are not in the file: {missing}"

    ran: list[int] = []
    bulk.work(lambda payload, run: ran.append(payload["n"]))
    run_until_idle(store)
    assert returned <= set(ran)
    assert len(ran) == len(set(ran)), "a job ran twice"


# ---------------------------------------------------------------------------
# DUR-02: a crash before add returned promised nothing; get says which


def test_DUR_02_a_crash_before_the_add_committed_promised_nothing_and_get_says_there_is_no_job(
        target, open_store, clock):
    code = child_store(target) + (
        "q = store.queue('replies')\n"
        "with store.transaction() as tx:\n"
        "    q.add({'message_id': 41}, id='reply:41', tx=tx)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n")
    child = run_child(code, timeout=WAIT)
    assert child.returncode == -signal.SIGKILL, child.stderr

    store = open_store(clock=clock)
    replies = store.queue("replies")
    assert replies.get("reply:41") is None
    assert replies.jobs() == []
    again = replies.add({"message_id": 41}, id="reply:41")
    assert again.added, "the id of a job that never committed must be free"


def test_DUR_02_after_a_crash_in_the_middle_of_adds_get_says_for_each_job_whether_it_exists(
        target, open_store, clock):
    code = child_store(target) + (
        "q = store.queue('bulk')\n"
        "i = 0\n"
        "while True:\n"
        "    q.add({'n': i}, id=f'job-{i}')\n"
        "    print('added', i, flush=True)\n"
        "    i += 1\n")
    proc = start_child(code)
    try:
        wait_for_line(proc, "added 20", timeout=WAIT)
    finally:
        kill_and_wait(proc)
    rest, _ = proc.communicate(timeout=WAIT)
    returned = max([20] + [int(line.split()[1]) for line in rest.splitlines() if line.startswith("added ")])

    store = open_store(clock=clock)
    bulk = store.queue("bulk")
    there = []
    while (job := bulk.get(f"job-{len(there)}")) is not None:  # get never raises: a job is whole, or absent
        assert job.payload == {"n": len(there)} and job.state == "waiting" and job.attempt == 0
        there.append(job.id)
    assert len(there) > returned, "an add that returned was lost"
    beyond = [n for n in range(len(there), len(there) + 50) if bulk.get(f"job-{n}") is not None]
    assert beyond == [], "the child added one job at a time: nothing can exist past the first one missing"
    listed = {job.id for job in bulk.jobs(limit=10_000)}
    assert listed == set(there), "get and the queue's listing must agree on what exists"

    ran: list[str] = []
    bulk.work(lambda payload, run: ran.append(run.id))
    run_until_idle(store)
    assert sorted(ran) == sorted(listed), "a worker must run exactly the jobs get says exist"


# ---------------------------------------------------------------------------
# DUR-03: the next open after a process died ends its leases at once

CLAIM_AND_HANG = """
q = store.queue("jobs")
expected, claimed, lock = int(sys.argv[1]), [], threading.Lock()
@q.work
def handle(payload, run):
    with lock:
        claimed.append(run.id)
        if len(claimed) == expected:
            print("claimed", *sorted(claimed), flush=True)
    threading.Event().wait()
store.run_until_idle()
"""


def test_DUR_03_the_next_open_after_a_process_died_ends_its_leases_at_once_and_their_attempts_stay_counted(
        target, open_store, clock):
    store = open_store(clock=clock)
    jobs = store.queue("jobs", lease="30s", attempts=5)
    for n in range(3):
        jobs.add({"n": n}, id=f"job-{n}")

    proc = start_child(child_store(target) + CLAIM_AND_HANG, "3")
    try:
        wait_for_line(proc, "claimed job-0 job-1 job-2", timeout=WAIT)
    finally:
        kill_and_wait(proc)
    assert [jobs.get(f"job-{n}").state for n in range(3)] == ["running"] * 3  # nothing ended them yet

    reopened = open_store(clock=clock)
    after = reopened.queue("jobs")
    assert clock.now() == T, "time did not move: the leases (30 s) have not run out"
    for n in range(3):
        job = after.get(f"job-{n}")
        assert job.state == "waiting", "the open must end a dead process's leases at once"
        assert job.attempt == 1, "the attempt of the dead process stays counted"
        assert "lease" in job.error and job.payload == {"n": n}

    ran = []
    after.work(lambda payload, run: ran.append((run.id, run.attempt)))
    run_until_idle(reopened)
    assert sorted(ran) == [("job-0", 2), ("job-1", 2), ("job-2", 2)]
    assert [after.get(f"job-{n}") for n in range(3)] == [None] * 3  # done


def test_DUR_03_a_dead_processs_leases_end_in_bulk_as_settle_decides_a_lost_lease_at_each_attempt(
        kit, target, open_store, clock):
    """A dead process's leases end with one statement per queue (``owner_lost``), whose parameters come
    from ``_settle.lost_in_bulk``: each job ends as ``_settle.decide_lost`` decides for its attempt, the
    one at its last attempt failed for good, the others waiting again at once."""
    from tinystore._options import QueueOptions
    from tinystore._settle import decide_lost, lost_in_bulk

    store = open_store(clock=clock)
    jobs = store.queue("jobs", lease="30s", attempts=3, keep="1h")
    jobs.add({"n": 2}, id="job-2")
    assert [c.id for c in kit.claim_cycle(store, jobs, 1, clock.now()).claimed] == ["job-2"]
    clock.advance(31)  # its lease runs out: the next cycle ends it, and takes it again with job-1
    jobs.add({"n": 1}, id="job-1")
    assert sorted(c.id for c in kit.claim_cycle(store, jobs, 2, clock.now()).claimed) == ["job-1", "job-2"]
    clock.advance(31)
    kit.claim_cycle(store, jobs, 0, clock.now())  # both leases run out: attempts 2 and 1 stay counted
    jobs.add({"n": 0}, id="job-0")
    store.close()

    proc = start_child(child_store(target, clock.now()) + CLAIM_AND_HANG, "3")
    try:
        wait_for_line(proc, "claimed job-0 job-1 job-2", timeout=WAIT)
    finally:
        kill_and_wait(proc)

    open_store(clock=clock)  # finds the child dead and ends its leases
    opts = QueueOptions(lease=30.0, attempts=3, keep=3600.0)
    now = clock.now()
    expected = []
    for id, attempt in (("job-0", 1), ("job-1", 2), ("job-2", 3)):
        decision = decide_lost(attempt, opts, now)
        if attempt >= opts.attempts:
            expected.append((id, "failed", attempt, now, decision.expires, decision.error))  # its time as it was
        else:
            expected.append((id, "queued", attempt, decision.at, None, decision.error))
    assert kit.job_ends(target) == expected
    bulk = lost_in_bulk(opts, now)
    assert (bulk["failed_expires"], bulk["failed_error"]) == (expected[2][4], expected[2][5])
    assert (bulk["again_at"], bulk["again_error"]) == (expected[0][3], expected[0][5])


def test_DUR_03_a_serving_worker_ends_the_leases_of_a_process_killed_meanwhile_with_no_open_and_runs_its_jobs(
        target, open_store, clock):
    store = open_store(clock=clock)
    jobs = store.queue("jobs", lease="1h", attempts=5)  # the leases cannot run out in this test
    for n in range(2):
        jobs.add({"n": n}, id=f"job-{n}")
    proc = start_child(child_store(target) + CLAIM_AND_HANG, "2")
    try:
        wait_for_line(proc, "claimed job-0 job-1", timeout=WAIT)
    except BaseException:
        kill_and_wait(proc)
        raise

    ran: list[tuple[str, int]] = []
    both = threading.Event()

    @jobs.work
    def handle(payload: Any, run: tinystore.Run) -> None:
        ran.append((run.id, run.attempt))
        if len(ran) == 2:
            both.set()

    store.start()
    try:
        kill_and_wait(proc)  # while this worker serves: no open follows
        began = clock.now()
        while not both.wait(0.05):  # the store's clock moves on; the worker looks for the dead every 2 s
            assert clock.now() - began < 600, "the worker never ended the dead process's leases"
            clock.advance("2s")
    finally:
        store.stop()
    assert sorted(ran) == [("job-0", 2), ("job-1", 2)]  # the dead attempts stay counted
    assert clock.now() - began < 3600, "the leases ran out instead of ending"


def test_DUR_03_an_open_while_the_holder_is_alive_leaves_its_leases_alone(target, open_store, clock):
    store = open_store(clock=clock)
    jobs = store.queue("jobs", lease="30s")
    jobs.add({}, id="held")

    proc = start_child(child_store(target) + CLAIM_AND_HANG, "1")
    try:
        wait_for_line(proc, "claimed held", timeout=WAIT)
        while_alive = open_store(clock=clock).queue("jobs").get("held")
        assert while_alive.state == "running" and while_alive.attempt == 1, \
            "a live process was taken for a dead one"
    finally:
        kill_and_wait(proc)
    assert open_store(clock=clock).queue("jobs").get("held").state == "waiting"


def test_DUR_03_a_worker_still_running_elsewhere_takes_an_expired_lease_only_after_it_runs_out(
        open_store, clock, gate):
    holder = open_store(clock=clock)
    release = gate()
    started = threading.Event()

    def stalled(payload, run):
        started.set()
        release.wait(WAIT)

    q = holder.queue("jobs", lease="10s")
    q.work(stalled)
    q.add({}, id="j")
    bg = Background(holder.run_until_idle)  # claims, and never renews: a stalled worker
    assert started.wait(WAIT)

    late_clock = FakeClock(T + 9)
    other = open_store(clock=late_clock)
    ran = []
    other.queue("jobs").work(lambda payload, run: ran.append(run.attempt))
    run_until_idle(other)
    assert ran == [] and other.queue("jobs").get("j").state == "running"

    late_clock.advance("1s")  # the lease runs out now
    run_until_idle(other)
    assert ran == [2]
    release.set()
    bg.join()


# ---------------------------------------------------------------------------
# JOB-01: due jobs start in the order of their time, ties in the order added


def test_JOB_01_with_concurrency_1_due_jobs_run_strictly_in_order_of_time_then_of_adding(store, clock):
    q = store.queue("ordered", concurrency=1)
    q.add("a", delay="5s")
    q.add("b", at=datetime.fromtimestamp(T + 1, tz=timezone.utc))
    q.add("c", at=T + 3)
    q.add("d", delay=timedelta(seconds=1))
    q.add("e", at=datetime.fromtimestamp(T + 3, tz=timezone(timedelta(hours=2))))
    q.add("f", delay="1s")
    q.add("g")  # due now
    q.add("h", at=T - 60)  # was due a minute ago

    witness: list[str] = []
    active = [0]
    overlap = []
    lock = threading.Lock()

    def handler(payload, run):
        with lock:
            active[0] += 1
            overlap.append(active[0])
            witness.append(payload)
        with lock:
            active[0] -= 1

    q.work(handler)
    clock.advance("10s")
    run_until_idle(store)
    assert witness == ["h", "g", "b", "d", "f", "c", "e", "a"]
    assert max(overlap) == 1


def test_JOB_01_due_jobs_start_in_order_of_time_without_a_concurrency_limit(store, clock):
    q = store.queue("fast")
    order = []
    for n in range(60):
        q.add(n, at=T + (n * 7919) % 60, id=f"job-{n:02}")  # times out of order, all distinct

    async def handler(payload, run):
        order.append(payload)  # the first thing each handler does: its start

    q.work(handler)
    clock.advance("1m")
    run_until_idle(store)
    assert order == sorted(range(60), key=lambda n: (n * 7919) % 60)


def test_JOB_01_a_scheduled_job_reads_waiting_once_its_time_has_passed_before_any_worker(store, clock):
    q = store.queue("later")
    job = q.add({}, id="j", delay="10m")
    assert job.state == "scheduled" and at(job) == pytest.approx(T + 600)
    clock.advance("9m59s")
    assert q.get("j").state == "scheduled"
    clock.advance("1s")
    assert q.get("j").state == "waiting"


def test_JOB_01_ahead_counts_the_due_waiting_jobs_that_start_before_this_one(store, clock, gate):
    q = store.queue("line", concurrency=1)
    q.add("x", id="x", at=T - 5)
    q.add("y", id="y")
    q.add("z", id="z")
    q.add("later", id="later", delay="1h")
    assert [q.get(i).ahead for i in ("x", "y", "z")] == [0, 1, 2]
    assert q.get("later").state == "scheduled" and q.get("later").ahead == 0

    release, started = gate(), threading.Event()

    def handler(payload, run):
        started.set()
        release.wait(WAIT)

    q.work(handler)
    bg = Background(store.run_until_idle)
    assert started.wait(WAIT)
    assert q.get("x").state == "running"
    assert [q.get(i).ahead for i in ("y", "z")] == [0, 1], "a running job is not ahead of anyone"
    release.set()
    bg.join()


# ---------------------------------------------------------------------------
# JOB-03: a job runs at least once, until done or failed for good


def test_JOB_03_a_job_whose_handler_raises_runs_again_until_it_is_done(store, clock):
    q = store.queue("flaky")
    runs = []

    def handler(payload, run):
        runs.append(run.attempt)
        if run.attempt < 3:
            raise ConnectionError("the model did not answer")

    q.work(handler)
    q.add({}, id="j")
    for _ in range(5):
        run_until_idle(store)
        clock.advance("1m")
    assert runs == [1, 2, 3]
    assert q.get("j") is None  # done, and dedupe is 0: gone
    assert store.stats()["flaky"]["waiting"] == 0


def test_JOB_03_a_process_killed_after_the_handler_but_before_settling_runs_the_job_again(
        target, open_store, clock, kit):
    store = open_store(clock=clock)
    kit.create_table(store, "runs", "job text not null, attempt integer not null")
    store.queue("jobs").add({"n": 1}, id="j")
    insert = kit.sql("insert into runs (job, attempt) values (?, ?)")
    code = child_store(target) + (
        "q = store.queue('jobs')\n"
        "@q.work\n"
        "def handle(payload, run):\n"
        f"    store.execute({insert!r}, (run.id, run.attempt))\n"
        "    os.kill(os.getpid(), signal.SIGKILL)  # the work is done; the settlement never is\n"
        "store.run_until_idle()\n")
    child = run_child(code, timeout=WAIT)
    assert child.returncode == -signal.SIGKILL, child.stderr

    after = open_store(clock=clock)
    q = after.queue("jobs")
    assert q.get("j").state == "waiting"

    def handle(payload, run):
        after.execute(insert, (run.id, run.attempt))

    q.work(handle)
    run_until_idle(after)
    assert after.query("select job, attempt from runs order by attempt") == [("j", 1), ("j", 2)]
    assert q.get("j") is None


# ---------------------------------------------------------------------------
# JOB-04: every attempt is counted when it is claimed, before the handler runs


def test_JOB_04_the_attempt_is_counted_when_the_job_is_claimed_before_the_handler_runs(store, clock):
    q = store.queue("counted")
    seen = []

    def handler(payload, run):
        job = q.get(run.id)
        seen.append((run.attempt, job.state, job.attempt))
        if run.attempt == 1:
            raise RuntimeError("first attempt fails")

    q.work(handler)
    q.add({}, id="j")
    run_until_idle(store)
    clock.advance("1m")
    run_until_idle(store)
    assert seen == [(1, "running", 1), (2, "running", 2)]


def test_JOB_04_a_handler_that_kills_its_process_every_time_reaches_attempts_and_fails_for_good(
        kit, target, open_store, clock):
    store = open_store(clock=clock)
    store.queue("deadly", attempts=2).add({}, id="poison")
    store.close()
    code = child_store(target) + (
        "q = store.queue('deadly')\n"
        "@q.work\n"
        "def handle(payload, run):\n"
        "    print('attempt', run.attempt, flush=True)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "store.run_until_idle()\n"
        "print('idle', flush=True)\n")
    outcomes = []
    for _ in range(3):  # the worker is restarted after every death, as a supervisor would
        child = run_child(code, timeout=WAIT)
        outcomes.append((child.returncode, child.stdout.split("\n")[0]))  # the next one starts at once
    assert outcomes == [(-signal.SIGKILL, "attempt 1"), (-signal.SIGKILL, "attempt 2"), (0, "idle")]

    job = open_store(clock=clock).queue("deadly").get("poison")
    assert job.state == "failed" and job.attempt == 2
    assert "lease" in job.error


def test_JOB_04_jobs_failed_for_good_when_the_next_open_ends_a_killed_process_leases_count_in_the_last_minute(
        target, open_store, clock):
    store = open_store(clock=clock)
    jobs = store.queue("jobs", attempts=2, lease="30s")
    jobs.add({}, id="job-0")
    jobs.add({}, id="job-1")

    def first_attempt_fails(payload, run):
        raise RuntimeError("first attempt fails")

    jobs.work(first_attempt_fails)
    run_until_idle(store)  # job-0 and job-1 used attempt 1 of 2
    jobs.add({}, id="job-2")
    clock.advance("2s")  # past the backoff (1 s +-10 %): all three are due
    store.close()

    proc = start_child(child_store(target, start=T + 2) + CLAIM_AND_HANG, "3")
    try:
        wait_for_line(proc, "claimed job-0 job-1 job-2", timeout=WAIT)
    finally:
        kill_and_wait(proc)

    reopened = open_store(clock=clock)  # ends the dead process's leases
    after = reopened.queue("jobs")
    states = {id: (after.get(id).state, after.get(id).attempt) for id in ("job-0", "job-1", "job-2")}
    assert states == {"job-0": ("failed", 2), "job-1": ("failed", 2), "job-2": ("waiting", 1)}
    stats = reopened.stats()["jobs"]
    assert (stats["failed"], stats["waiting"]) == (2, 1)
    assert stats["failed_last_minute"] == 2, "a job that failed for good as its process died is a failure"
    assert (stats["started_last_minute"], stats["done_last_minute"]) == (5, 0)


def test_JOB_04_a_job_failed_for_good_when_its_last_lease_ran_out_counts_in_the_last_minute(open_store, clock, gate):
    holder = open_store(clock=clock)
    release = gate()
    started = threading.Event()

    def stalled(payload, run):
        started.set()
        release.wait(WAIT)

    q = holder.queue("jobs", lease="10s", attempts=1, timeout="1h")
    q.work(stalled)
    q.add({}, id="j")
    bg = Background(holder.run_until_idle)  # claims its only attempt, then stalls past its lease
    assert started.wait(WAIT)

    other = open_store(clock=FakeClock(T + 11))  # a worker whose time is past the lease
    other.queue("jobs").work(lambda payload, run: None)
    run_until_idle(other)  # ends the lease that ran out: the attempts are used up
    job = other.queue("jobs").get("j")
    assert (job.state, job.attempt) == ("failed", 1) and "lease" in job.error
    stats = other.stats()["jobs"]
    assert stats["failed_last_minute"] == 1, "a job that failed for good as its lease ran out is a failure"
    assert (stats["started_last_minute"], stats["done_last_minute"]) == (1, 0)

    release.set()
    bg.join()  # its late settlement changes nothing, and counts nothing again
    assert other.stats()["jobs"]["failed_last_minute"] == 1


# ---------------------------------------------------------------------------
# JOB-05: a settlement names its attempt; a late one changes nothing


@pytest.mark.parametrize("late_answer", ["returns", "raises", "fails"])
def test_JOB_05_a_late_settlement_after_the_lease_ran_out_and_another_worker_took_the_job_changes_nothing(
        open_store, clock, gate, late_answer):
    release = {1: gate(), 2: gate()}
    started = {1: threading.Event(), 2: threading.Event()}
    finished = []

    def handler(payload, run):
        started[run.attempt].set()
        release[run.attempt].wait(WAIT)
        finished.append(run.attempt)
        if run.attempt == 2:
            return run.fail("attempt 2 settled it")
        if late_answer == "raises":
            raise RuntimeError("late attempt 1")
        if late_answer == "fails":
            return run.fail("late attempt 1")
        return None

    stalled = open_store(clock=clock)  # claims attempt 1, then stalls past its lease
    q1 = stalled.queue("jobs", lease="10s", timeout="1h")
    q1.work(handler)
    q1.add({}, id="j")
    first = Background(stalled.run_until_idle)
    assert started[1].wait(WAIT)

    other = open_store(clock=FakeClock(T + 11))  # a worker whose time is past the lease
    q2 = other.queue("jobs")
    q2.work(handler)
    second = Background(other.run_until_idle)
    assert started[2].wait(WAIT), "the other worker must take the job once its lease ran out"

    release[1].set()
    first.join()  # attempt 1 answered and its worker tried to settle it
    assert finished == [1]
    job = q2.get("j")
    assert (job.state, job.attempt, job.error) == ("running", 2, None), "the late settlement changed the job"

    release[2].set()
    second.join()
    job = q2.get("j")
    assert (job.state, job.attempt, job.error) == ("failed", 2, "attempt 2 settled it")


def test_JOB_05_a_stale_attempt_settled_in_the_same_cycle_as_the_attempt_that_holds_the_lease_changes_nothing(
        kit, store, clock):
    # One process claimed the job again (attempt 2) after attempt 1's lease ran out while attempt 1's handler
    # still ran there: both end before its next cycle, which settles them together (a soak on PostgreSQL
    # saw a job settled done at attempt 2 by attempt 1's OK, while attempt 2 had asked to run again).
    q = store.queue("jobs", lease="2s", backoff=("1s", "1s"))
    q.add({}, id="j")
    [first] = kit.claim_attempts(store, q, 1, clock.now())
    clock.advance(5)  # attempt 1's lease ran out: the next cycle ends it and claims the job again
    [second] = kit.claim_attempts(store, q, 1, clock.now())
    assert (first.attempt, second.attempt) == (1, 2)
    kit.settle_together(store, q, [(second, tinystore.Retry(1.0)), (first, None)], clock.now())
    job = q.get("j")
    assert job is not None, "attempt 1's late OK settled the job done (and a done job leaves)"
    assert (job.state, job.attempt) == ("scheduled", 2)  # attempt 2's retry holds


@pytest.mark.parametrize("kind", ["async", "def"])
def test_JOB_05_a_process_that_claims_again_a_job_whose_older_attempt_still_runs_there_takes_that_attempt_away(
        kit, target, store, clock, gate, kind):
    # A soak on PostgreSQL: attempt 1's lease ran out while its handler still ran (its renewal came too late, a slow
    # write) and the same process's next cycle claimed the job again. Attempt 1 must be told, at once, that it lost
    # its lease; attempt 2 must be renewed until it ends, and hold its slot (and a def one its thread) till then.
    q = store.queue("jobs", lease="2s")
    other = store.queue("other")
    keys = [("j", 1), ("j", 2), ("k", 1)]
    release = {key: gate() for key in keys}
    began = {key: threading.Event() for key in keys + [("x", 1), ("y", 1)]}
    ended = {key: threading.Event() for key in began}
    runs: dict[tuple[str, int], Any] = {}
    told: dict[tuple[str, int], Any] = {}  # what each run of j saw as it ended: run.cancelled, or its cancellation
    pair = threading.Barrier(2, timeout=WAIT)  # x and y run only if both run at once
    lock = threading.Lock()
    running, most = [0], [0]
    marked = threading.Event()

    def enter(key: tuple[str, int], run: Any) -> None:
        runs[key] = run
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        began[key].set()

    def leave(key: tuple[str, int]) -> None:
        with lock:
            running[0] -= 1
        ended[key].set()

    def answer(key: tuple[str, int], run: Any) -> Any:
        told[key] = run.cancelled
        return run.fail("settled by attempt 2") if key == ("j", 2) else None

    if kind == "async":
        async def handler(payload, run):
            key, loop = (run.id, run.attempt), asyncio.get_running_loop()
            enter(key, run)
            try:
                if run.id in ("x", "y"):
                    return await loop.run_in_executor(None, pair.wait)
                await loop.run_in_executor(None, release[key].wait, WAIT)
                return answer(key, run)
            except asyncio.CancelledError:
                told[key] = "cancelled"
                raise
            finally:
                leave(key)
    else:
        def handler(payload, run):
            key = (run.id, run.attempt)
            enter(key, run)
            try:
                if run.id in ("x", "y"):
                    return pair.wait()
                release[key].wait(WAIT)
                return answer(key, run)
            finally:
                leave(key)

    async def mark(payload, run):
        marked.set()

    def lease_of(id: str) -> Any:
        [lease] = [lease for lease in kit.leases(target) if lease.id == id]
        return lease

    def renewed_past(id: str, expires: float) -> bool:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if lease_of(id).expires > expires:
                return True
            time.sleep(0.02)
        return False

    q.work(handler)
    other.work(mark)
    store.start(workers=2)
    try:
        q.add({}, id="j")
        assert began[("j", 1)].wait(WAIT)
        q.add({}, id="k")
        assert began[("k", 1)].wait(WAIT)
        kit.run_out_lease(target, "jobs", "j", clock.now())  # attempt 1's renewal came too late
        release[("k", 1)].set()  # k ends: the next cycle settles it, ends j's lease and claims j again, here
        assert began[("j", 2)].wait(WAIT), "the process must claim again the job whose lease ran out"
        assert runs[("j", 1)].cancelled, "attempt 1 was not told that its lease was gone"

        release[("j", 1)].set()
        assert ended[("j", 1)].wait(WAIT)
        assert told[("j", 1)] == ("cancelled" if kind == "async" else True)
        other.add({}, id="m")  # its claim comes after attempt 1's end on the worker's loop
        assert marked.wait(WAIT)

        for _ in range(2):  # past attempt 2's first lease: its renewals keep it
            expires = lease_of("j").expires
            clock.advance("1.5s")  # the renewals' thread renews every lease/2
            assert renewed_past("j", expires), "attempt 2's lease was no longer renewed once attempt 1 ended"
        assert (lease_of("j").attempt, q.get("j").attempt) == (2, 2)

        release[("j", 2)].set()
        job = wait_for(q, "j", "failed")
        assert (job.attempt, job.error) == (2, "settled by attempt 2")
        assert told[("j", 2)] is False, "attempt 2 was told to stop"

        q.add({}, id="x")
        q.add({}, id="y")  # both run at once: the queue's 2 slots (and a def handler's 2 threads) are free
        assert ended[("x", 1)].wait(WAIT) and ended[("y", 1)].wait(WAIT)
        assert not pair.broken, "x and y could not run at once: a slot or a thread was lost"
        assert most[0] <= 2, "more handlers ran at once than the queue's workers"
    finally:
        for event in release.values():
            event.set()
        store.stop()


# ---------------------------------------------------------------------------
# JOB-07: backoff 1 s, 2 s, 4 s ... up to the longest wait, +-10 %; then the last error


def test_JOB_07_a_raising_handler_runs_again_after_a_doubling_backoff_then_fails_with_the_last_error(store, clock):
    q = store.queue("boom", backoff=("1s", "4s"), attempts=6)
    runs = []

    def handler(payload, run):
        runs.append(run.attempt)
        raise ValueError(f"boom {run.attempt}")

    q.work(handler)
    q.add({}, id="j")
    run_until_idle(store)
    for n, wait in enumerate([1, 2, 4, 4, 4], start=1):
        job = q.get("j")
        assert (job.state, job.attempt) == ("scheduled", n)
        assert "ValueError" in job.error and f"boom {n}" in job.error
        assert wait * 0.9 - 1e-3 <= at(job) - clock.now() <= wait * 1.1 + 1e-3
        clock.set(at(job) - 0.01)
        run_until_idle(store)
        assert len(runs) == n, "ran before its backoff passed"
        clock.set(at(job) + 0.01)
        run_until_idle(store)
        assert len(runs) == n + 1
    job = q.get("j")
    assert (job.state, job.attempt) == ("failed", 6)
    assert "boom 6" in job.error and "boom 5" not in job.error
    clock.advance("1d")
    run_until_idle(store)
    assert runs == [1, 2, 3, 4, 5, 6]


def test_run_until_idle_inside_an_open_store_transaction_is_refused_saying_why_instead_of_waiting(store):
    q = store.queue("inside")
    q.work(lambda payload, run: None)
    refused = []

    def inside() -> None:
        with store.transaction() as tx:
            q.add({}, id="j", tx=tx)
            try:
                store.run_until_idle()
            except tinystore.InvalidArgument as exc:
                refused.append(str(exc))

    Background(inside).join(WAIT)
    assert refused and refused[0].startswith("run_until_idle() inside a store.transaction() of this thread")
    run_until_idle(store)  # committed: it runs
    assert q.get("j") is None


@pytest.mark.parametrize("kind", ["def", "async def"])
@pytest.mark.parametrize("raised", [SystemExit, KeyboardInterrupt])
def test_JOB_07_a_handler_that_raises_systemexit_or_keyboardinterrupt_fails_its_attempt_and_the_next_job_runs(
        store, kind, raised):
    q = store.queue("exits", attempts=1)
    ran = []

    def call(payload):
        ran.append(payload["n"])
        if payload["n"] == 1:
            raise raised(3)

    async def async_handler(payload, run):
        call(payload)

    q.work((lambda payload, run: call(payload)) if kind == "def" else async_handler)
    q.add({"n": 1}, id="exits")
    q.add({"n": 2}, id="next")
    run_until_idle(store)
    assert sorted(ran) == [1, 2]  # both ran: def handlers of one claim run at once, in threads of their own
    job = q.get("exits")
    assert job.state == "failed" and job.error.startswith(f"{raised.__name__}: 3")
    assert q.get("next") is None  # done (and not kept)


def test_JOB_07_by_default_the_wait_doubles_from_1s_and_stops_at_1h(store, clock):
    q = store.queue("defaults", attempts=15)
    q.work(lambda payload, run: 1 / 0)
    q.add({}, id="j")
    waits = []
    for _ in range(14):
        run_until_idle(store)
        job = q.get("j")
        waits.append(at(job) - clock.now())
        clock.set(at(job) + 0.01)
    expected = [min(2.0 ** n, 3600.0) for n in range(14)]
    for wait, want in zip(waits, expected):
        assert want * 0.9 - 1e-3 <= wait <= want * 1.1 + 1e-3, (waits, expected)


def test_JOB_07_each_wait_is_a_tenth_longer_or_shorter_at_random(store, clock):
    q = store.queue("herd", backoff=("10s", "1h"))
    q.work(lambda payload, run: 1 / 0)
    for n in range(40):
        q.add({}, id=f"job-{n}")
    run_until_idle(store)
    waits = [at(q.get(f"job-{n}")) - clock.now() for n in range(40)]
    assert all(9.0 - 1e-3 <= w <= 11.0 + 1e-3 for w in waits), waits
    assert min(waits) < 10.0 < max(waits), "the waits must spread both ways around the backoff"
    assert len({round(w, 6) for w in waits}) > 30, "a thousand failed jobs must not retry in the same instant"


# ---------------------------------------------------------------------------
# JOB-08: run.retry counted, run.snooze not counted, run.fail fails now


def test_JOB_08_run_retry_runs_again_after_its_delay_and_counts_as_an_attempt(store, clock):
    q = store.queue("retrying", attempts=3)
    runs = []

    def handler(payload, run):
        runs.append(run.attempt)
        return run.retry("10m")

    q.work(handler)
    q.add({}, id="j")
    run_until_idle(store)
    job = q.get("j")
    assert (job.state, job.attempt) == ("scheduled", 1)
    assert at(job) == pytest.approx(T + 600, abs=1e-3)
    clock.advance("9m59s")
    run_until_idle(store)
    assert runs == [1]
    clock.advance("1s")
    run_until_idle(store)
    assert runs == [1, 2]
    clock.advance("10m")
    run_until_idle(store)
    assert runs == [1, 2, 3]
    job = q.get("j")
    assert (job.state, job.attempt) == ("failed", 3), "retries are counted: the third one was the last"


def test_JOB_08_run_snooze_runs_again_after_its_delay_without_counting_the_attempt(store, clock):
    q = store.queue("snoozing", attempts=2)
    runs = []

    def handler(payload, run):
        runs.append(run.attempt)
        if len(runs) == 1:
            raise RuntimeError("first")
        if len(runs) <= 4:
            return run.snooze("10m")
        return None

    q.work(handler)
    q.add({}, id="j")
    run_until_idle(store)
    clock.advance("1m")
    run_until_idle(store)  # attempt 2 snoozes
    job = q.get("j")
    assert (job.state, job.attempt) == ("scheduled", 1), "a snoozed attempt is given back"
    assert at(job) == pytest.approx(T + 60 + 600, abs=1e-3)
    clock.advance("9m")
    run_until_idle(store)
    assert runs == [1, 2]
    for _ in range(3):
        clock.advance("10m")
        run_until_idle(store)
    assert runs == [1, 2, 2, 2, 2], "the run after a snooze has the same run.attempt"
    assert q.get("j") is None  # done, never failed although attempts=2


def test_JOB_08_run_fail_fails_for_good_now_with_the_reason_as_its_error(store, clock):
    q = store.queue("failing", attempts=10)
    runs = []

    def handler(payload, run):
        runs.append(run.attempt)
        return run.fail("message 41 no longer exists")

    q.work(handler)
    q.add({}, id="j")
    run_until_idle(store)
    job = q.get("j")
    assert (job.state, job.attempt) == ("failed", 1)
    assert "message 41 no longer exists" in job.error
    clock.advance("1d")
    run_until_idle(store)
    assert runs == [1]


# ---------------------------------------------------------------------------
# JOB-09: a handler past its timeout is stopped and its attempt fails


def test_JOB_09_an_async_handler_past_its_timeout_is_cancelled_and_its_attempt_fails_with_timeout(store, clock):
    q = store.queue("slow", timeout="5s", attempts=3)
    started, cancelled = threading.Event(), threading.Event()

    async def handler(payload, run):
        if run.attempt > 1:
            return None
        started.set()
        try:
            await asyncio.Event().wait()  # never set: only a cancel ends it
        except asyncio.CancelledError:
            cancelled.set()
            raise

    q.work(handler)
    q.add({}, id="j")
    bg = Background(store.run_until_idle)
    assert started.wait(WAIT)
    clock.advance("5s")
    bg.join()
    assert cancelled.is_set(), "the handler must be cancelled"
    job = q.get("j")
    assert (job.state, job.attempt) == ("scheduled", 1), "a timed-out attempt is retried like an exception"
    assert "timeout" in job.error
    assert 0.9 - 1e-3 <= at(job) - clock.now() <= 1.1 + 1e-3
    clock.advance("2s")
    run_until_idle(store)
    assert q.get("j") is None


def test_JOB_09_an_async_handler_that_answers_within_its_timeout_is_not_stopped(store, clock):
    q = store.queue("slow", timeout="5s")
    started = threading.Event()
    box: dict[str, Any] = {}

    async def handler(payload, run):
        box["loop"], box["go"] = asyncio.get_running_loop(), asyncio.Event()
        started.set()
        await box["go"].wait()
        box["answered"] = True

    q.work(handler)
    q.add({}, id="j")
    bg = Background(store.run_until_idle)
    assert started.wait(WAIT)
    clock.advance("4.9s")  # a timeout that fired now would be handled before the answer below
    box["loop"].call_soon_threadsafe(box["go"].set)
    bg.join()
    assert box.get("answered") and q.get("j") is None


def test_JOB_09_a_sync_handler_past_its_timeout_fails_its_attempt_and_its_late_answer_is_ignored(
        store, clock, gate):
    q = store.queue("slow", timeout="5s", attempts=1)
    release, started = gate(), threading.Event()
    answered = []

    def handler(payload, run):
        started.set()
        release.wait(WAIT)
        answered.append(run.attempt)
        return None  # "done", too late

    q.work(handler)
    q.add({}, id="j")
    bg = Background(store.run_until_idle)
    assert started.wait(WAIT)
    clock.advance("5s")
    release.set()
    bg.join()
    assert answered == [1]
    job = q.get("j")
    assert job is not None, "the late answer must not settle the job as done"
    assert (job.state, job.attempt) == ("failed", 1)
    assert "timeout" in job.error


def wait_for(q: tinystore.Queue, id: str, state: str) -> tinystore.JobState:
    """The job once it is in ``state``, as a watcher sees it (fails the test if it ends otherwise)."""
    for seen in q.watch(id):
        if seen.state == state:
            return seen
    raise AssertionError(f"{id} ended without being {state}")


@pytest.mark.parametrize("kind", ["async", "def"])
def test_JOB_09_a_timeout_counts_from_its_own_handlers_beginning_and_ends_only_its_own_attempt(
        store, clock, gate, kind):
    # A begins, 0.6 s later B begins in a claim of its own; 0.6 s later A is past the timeout of 1 s
    # and B is not: A's attempt fails, B runs on and is done.
    q = store.queue("work", timeout="1s", attempts=1, keep="1h", dedupe="1h")
    began = {"A": threading.Event(), "B": threading.Event()}
    release = {"A": gate(), "B": gate()}

    if kind == "async":
        async def handler(payload, run):
            began[payload].set()
            while not release[payload].is_set():
                await asyncio.sleep(0.002)
    else:
        def handler(payload, run):
            began[payload].set()
            release[payload].wait(WAIT)
    q.work(handler)
    store.start()
    try:
        q.add("A", id="A")
        assert began["A"].wait(WAIT)
        clock.advance("0.6s")
        q.add("B", id="B")
        assert began["B"].wait(WAIT)
        clock.advance("0.6s")
        release["A"].set()
        assert "timeout" in wait_for(q, "A", "failed").error
        release["B"].set()
        assert wait_for(q, "B", "done").attempt == 1
    finally:
        for event in release.values():
            event.set()
        store.stop()


def test_JOB_09_a_handler_that_answers_past_its_timeout_before_the_timer_fired_still_fails_by_it(store, clock):
    # The loop is busy past the deadline (here: the handler itself moves the clock without yielding),
    # so the handler's answer is heard before the timer: the attempt ran past its timeout all the same.
    q = store.queue("busy", timeout="1s", attempts=1, keep="1h")

    async def handler(payload, run):
        clock.advance("1.5s")
        return None

    q.work(handler)
    q.add({}, id="j")
    run_until_idle(store)
    job = q.get("j")
    assert job is not None and job.state == "failed", f"an answer past the timeout must not be done: {job}"
    assert job.error.startswith("timeout")


def test_JOB_09_timeout_None_lets_a_handler_run_as_long_as_it_takes(store, clock, gate):
    q = store.queue("long", timeout=None, attempts=1, lease="1d")  # one jump of the clock, no renewal needed
    started, release = threading.Event(), gate()

    def handler(payload, run):
        started.set()
        release.wait(WAIT)
        assert not run.cancelled

    q.work(handler)
    q.add({}, id="j")
    bg = Background(store.run_until_idle)
    assert started.wait(WAIT)
    clock.advance("2h")  # past the default timeout of a minute, many times
    release.set()
    bg.join()
    assert q.get("j") is None, f"the job must be done, not {q.get('j')}"
    assert store.queue("long").options.timeout is None, "None is kept as no timeout"


# ---------------------------------------------------------------------------
# LIM-04: a value over its limit is refused with a clear error, nothing written


def nothing_written(q: tinystore.Queue, *ids: str) -> None:
    assert q.jobs(limit=10_000) == []
    for id in ids:
        assert q.get(id) is None


def test_LIM_04_a_payload_over_1_MiB_of_JSON_is_refused_naming_queue_and_job_and_nothing_is_written(store):
    q = store.queue("replies")
    over = "x" * (1024 * 1024 - 1)  # 1 MiB + 1 byte of JSON with its quotes
    with pytest.raises(tinystore.InvalidArgument) as caught:
        q.add(over, id="reply:41")
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, tinystore.Error)
    assert caught.value.queue == "replies" and caught.value.job_id == "reply:41"
    assert "replies" in str(caught.value) and "reply:41" in str(caught.value)
    assert "1048577" in str(caught.value) or "MiB" in str(caught.value) or "limit" in str(caught.value)
    nothing_written(q, "reply:41")

    at_limit = q.add("x" * (1024 * 1024 - 2), id="just-fits")  # exactly 1 MiB of JSON
    assert at_limit.added and len(q.get("just-fits").payload) == 1024 * 1024 - 2


def test_LIM_04_a_payload_counts_bytes_of_utf8_not_characters(store):
    q = store.queue("replies")
    with pytest.raises(tinystore.InvalidArgument):
        q.add("é" * (512 * 1024), id="wide")  # 512 Ki characters, 1 MiB + 2 bytes of JSON
    nothing_written(q, "wide")


@pytest.mark.parametrize("size", [0, 1025])
def test_LIM_04_an_id_outside_1_to_1024_bytes_is_refused_and_nothing_is_written(store, size):
    q = store.queue("replies")
    with pytest.raises(tinystore.InvalidArgument) as caught:
        q.add({}, id="i" * size)
    assert caught.value.queue == "replies" and "replies" in str(caught.value)
    nothing_written(q)


def test_LIM_04_ids_are_measured_in_bytes_1_and_1024_fit(store):
    q = store.queue("replies")
    assert q.add({}, id="i").added
    assert q.add({}, id="i" * 1024).added
    with pytest.raises(tinystore.InvalidArgument):
        q.add({}, id="é" * 513)  # 513 characters, 1026 bytes
    assert len(q.jobs()) == 2


@pytest.mark.parametrize("name", ["", "Replies", "-replies", "_replies", "re plies", "re.plies", "rëplies",
                                  "replies\n", "q" * 65, "a/b", "x;drop table jobs"])
def test_LIM_04_a_queue_name_outside_the_pattern_is_refused_naming_it_and_nothing_is_written(store, name):
    with pytest.raises(ValueError) as caught:
        store.queue(name)
    assert isinstance(caught.value, tinystore.InvalidArgument)
    assert repr(name) in str(caught.value)
    assert name not in store.queues()
    assert store.stats().get(name) is None


@pytest.mark.parametrize("name", ["a", "0", "replies", "chat_7-replies", "q" * 64])
def test_LIM_04_queue_names_in_the_pattern_are_accepted(store, name):
    store.queue(name).add({}, id="j")
    assert store.queue(name).get("j") is not None
    assert name in store.queues()


@pytest.mark.parametrize("payload", [object(), {"at": datetime(2026, 1, 1, tzinfo=timezone.utc)}, {1, 2},
                                     b"bytes", float("nan"), {"x": float("inf")}, [lambda: None]],
                         ids=["object", "datetime", "set", "bytes", "nan", "inf", "function"])
def test_LIM_04_a_payload_that_is_not_JSON_is_refused_naming_queue_and_job_and_nothing_is_written(store, payload):
    q = store.queue("replies")
    with pytest.raises(tinystore.InvalidArgument) as caught:
        q.add(payload, id="reply:41")
    assert isinstance(caught.value, ValueError)
    assert caught.value.queue == "replies" and caught.value.job_id == "reply:41"
    assert "JSON" in str(caught.value)
    nothing_written(q, "reply:41")


def test_LIM_04_a_naive_datetime_is_refused_and_nothing_is_written(store):
    q = store.queue("replies")
    with pytest.raises(tinystore.InvalidArgument) as caught:
        q.add({}, id="reply:41", at=datetime(2027, 1, 1, 12, 0))
    assert caught.value.queue == "replies" and caught.value.job_id == "reply:41"
    assert "naive" in str(caught.value) or "timezone" in str(caught.value)
    nothing_written(q, "reply:41")


def test_LIM_04_one_bad_item_of_add_many_refuses_the_whole_batch_naming_that_item(store):
    q = store.queue("replies")
    with pytest.raises(tinystore.InvalidArgument) as caught:
        q.add_many([tinystore.Job({"n": 1}, id="ok-1"), tinystore.Job({"n": object()}, id="bad"),
                    tinystore.Job({"n": 3}, id="ok-3")])
    assert caught.value.job_id == "bad"
    nothing_written(q, "ok-1", "bad", "ok-3")


def test_LIM_04_a_refused_value_leaves_no_trace_in_the_file(store, kit, target):
    q = store.queue("replies")
    for bad in [dict(payload="x" * (2 << 20)), dict(payload=object()), dict(id=""),
                dict(at=datetime(2027, 1, 1))]:
        kwargs = {"payload": {}, "id": "reply:41", **bad}
        with pytest.raises(tinystore.InvalidArgument):
            q.add(**kwargs)
    assert len(kit.job_rows(target)) == 0


@pytest.mark.parametrize("answer", ["raise", "fail"])
def test_JOB_07_an_error_text_with_a_lone_surrogate_is_kept_escaped_and_the_other_jobs_settle(store, answer):
    q = store.queue("odd", attempts=1, keep="1h")

    def handler(payload, run):
        if payload == "bad":
            if answer == "fail":
                return run.fail("reason \udcff")
            raise ValueError("message \udcff")
        return None

    q.work(handler)
    q.add_many([tinystore.Job("ok", id="a"), tinystore.Job("bad", id="b"), tinystore.Job("ok", id="c")])
    run_until_idle(store)
    job = q.get("b")
    assert job.state == "failed" and "\\udcff" in job.error, job
    assert q.get("a") is None and q.get("c") is None, "the other jobs of the batch are done"
