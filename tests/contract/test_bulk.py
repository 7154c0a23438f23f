"""Contract tests of acting on many jobs (BULK-*): ``cancel_many`` and ``retry_many``, on every backend.

Both take the filters of ``queue.jobs`` (state, group) or a list of ids (both:
the ids that the filters list), act on each job as ``cancel`` and ``retry``
act on one, at most once, and walk the queue in bounded transactions. Most
tests walk in chunks of a few rows (``kit.small_chunks``), so that a few
dozen jobs cross many chunks; the transactions themselves are counted by a
trigger (``kit.rows_per_transaction``), not timed.

- BULK-01: the filters and ids name what ``jobs`` lists; nothing else moves.
- BULK-02: each job once; jobs added between two chunks are not touched.
- BULK-03: running jobs cancelled are told, and their answers settle nothing.
- BULK-04: bad input is refused naming the queue, nothing written.
- BULK-05: every transaction acts on one bounded chunk.
- BULK-06: beside a worker process that serves and adds, with a witness of
  claims and removals (triggers on the jobs table).
- BULK-07: retried jobs run again in a worker process the commit wakes.
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any, Optional

import pytest
from helpers import start_child, wait_for_line

import kits
import tinystore
from tinystore.testing import FakeClock

WAIT = 30.0  # seconds: reached only when a test fails
T = 1_800_000_000.0  # where the `clock` fixture's FakeClock starts
CANCELLABLE = ("scheduled", "waiting", "running")


def listed(q: tinystore.Queue, state: Optional[str] = None, group: Optional[str] = None) -> list[tinystore.JobState]:
    """Every job ``queue.jobs`` lists with these filters, page after page."""
    out: list[tinystore.JobState] = []
    while True:
        page = q.jobs(state=state, group=group, limit=7, after=out[-1].id if out else None)
        out += page
        if len(page) < 7:
            return out


def mixed_queue(store: tinystore.Store, fail: dict[str, bool]) -> tinystore.Queue:
    """A queue of 60 jobs in every state but running, in two groups and none: 12 failed, 12 done (kept by
    dedupe), 12 scheduled, 24 waiting. A job whose payload says so fails while ``fail["on"]``."""
    q = store.queue("reports", attempts=1, dedupe="1h")

    @q.work
    def handler(payload: Any, run: tinystore.Run) -> None:
        if payload["end"] == "fail" and fail["on"]:
            raise RuntimeError("no luck")

    def group(i: int) -> Optional[str]:
        return ("g1", "g2", None)[i % 3]

    ends = [tinystore.Job({"end": "fail" if i % 2 else "done"}, id=f"ended:{i:02d}", group=group(i))
            for i in range(24)]
    q.add_many(ends)
    store.run_until_idle()
    later = [tinystore.Job({"end": "done"}, id=f"later:{i:02d}", group=group(i), delay="1h") for i in range(12)]
    due = [tinystore.Job({"end": "done"}, id=f"due:{i:02d}", group=group(i)) for i in range(24)]
    q.add_many(later + due)
    return q


def assert_sound(store: tinystore.Store, kit: kits.Kit, target: str, now: float) -> None:
    """The store's bookkeeping agrees with itself, and its kept counts with its jobs."""
    problems = kit.inconsistencies(target)
    assert not any(problems.values()), {name: found for name, found in problems.items() if found}
    scan = kit.counted_by_scan(target, now)
    for name, counts in store.stats().items():
        expected = scan.get(name, {})
        for state in ("scheduled", "waiting", "running", "done", "failed"):
            assert counts[state] == expected.get(state, 0), (name, state, counts, expected)


@pytest.mark.parametrize("group", [None, "g1"])
@pytest.mark.parametrize("state", [None, "scheduled", "waiting"])
def test_BULK_01_cancel_many_takes_away_what_jobs_lists_with_the_same_filters_and_nothing_else(
        store: tinystore.Store, kit: kits.Kit, target: str, monkeypatch: pytest.MonkeyPatch,
        state: Optional[str], group: Optional[str]) -> None:
    kit.small_chunks(monkeypatch, 4)
    q = mixed_queue(store, {"on": True})
    expected = {s.id for s in listed(q, state, group) if s.state in CANCELLABLE}
    before = kit.listed_by_scan(target, "reports", T)
    assert expected and len(expected) < len(before)

    assert q.cancel_many(state=state, group=group) == len(expected)

    assert kit.listed_by_scan(target, "reports", T) == [row for row in before if row[0] not in expected]
    assert all(q.get(id) is None for id in expected)
    assert [s.id for s in listed(q, state, group) if s.state in CANCELLABLE] == []
    assert_sound(store, kit, target, T)


@pytest.mark.parametrize("group", [None, "g2"])
def test_BULK_01_retry_many_runs_again_the_failed_jobs_jobs_lists_with_the_same_filters(
        store: tinystore.Store, kit: kits.Kit, target: str, monkeypatch: pytest.MonkeyPatch,
        group: Optional[str]) -> None:
    kit.small_chunks(monkeypatch, 3)
    fail = {"on": True}
    q = mixed_queue(store, fail)
    expected = {s.id for s in listed(q, "failed", group)}
    others = {s.id for s in listed(q, "failed")} - expected
    assert expected and (others or group is None)

    assert q.retry_many(group=group) == len(expected)

    for id in expected:
        job = q.get(id)
        assert (job.state, job.attempt) == ("waiting", 0), id  # as retry leaves it: its last error kept
    assert {s.id for s in listed(q, "failed")} == others
    assert_sound(store, kit, target, T)
    fail["on"] = False
    store.run_until_idle()
    assert {id for id in expected if q.get(id).state == "done"} == expected  # they ran again
    assert q.retry_many(state="failed", group=group) == 0


def test_BULK_01_ids_act_on_the_jobs_they_name_and_with_filters_on_those_the_filters_list_too(
        store: tinystore.Store, kit: kits.Kit, target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    kit.small_chunks(monkeypatch, 2)
    q = mixed_queue(store, {"on": True})
    ids = ["due:00", "due:01", "due:01", "later:00", "ended:00", "ended:01", "nobody", "due:02"]
    # due:00 is in g1, due:01 in g2: only the waiting one of g1 goes; then every one named that can.
    assert q.cancel_many(state="waiting", group="g1", ids=ids) == 1
    assert q.get("due:00") is None and q.get("due:01").state == "waiting"
    assert q.cancel_many(ids=ids) == 3  # due:01, later:00, due:02; done, failed and unknown ones are not
    assert [q.get(id) for id in ("due:01", "later:00", "due:02")] == [None, None, None]
    assert q.get("ended:00").state == "done" and q.get("ended:01").state == "failed"
    assert q.retry_many(ids=ids) == 1 and q.get("ended:01").state == "waiting"
    assert q.cancel_many(ids=[]) == 0 and q.retry_many(ids=[]) == 0
    assert_sound(store, kit, target, T)


class AddingClock(FakeClock):
    """A FakeClock that runs ``between`` (once) the ``at``-th time it is read after ``armed``: the walk
    reads the clock once before each chunk, so an add there commits between two chunks."""

    def __init__(self) -> None:
        super().__init__()
        self.between: Optional[Any] = None
        self.reads = 0
        self.at = 0

    def armed(self, at: int, between: Any) -> None:
        self.reads, self.at, self.between = 0, at, between

    def now(self) -> float:
        self.reads += 1
        if self.between is not None and self.reads == self.at:
            between, self.between = self.between, None
            between()
        return super().now()


def test_BULK_02_each_job_is_acted_on_at_most_once_and_jobs_added_during_the_walk_are_not_touched(
        open_store: Any, kit: kits.Kit, target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    kit.small_chunks(monkeypatch, 5)
    clock = AddingClock()
    store = open_store(clock=clock)
    q = store.queue("reports")
    q.add_many([tinystore.Job({"i": i}, id=f"job:{i:02d}") for i in range(23)])
    assert q.cancel_many(ids=[f"job:{i:02d}" for i in range(23)] * 2) == 23  # each named twice, taken once
    assert q.cancel_many() == 0 and q.jobs() == []

    q.add_many([tinystore.Job({"i": i}, id=f"job:{i:02d}") for i in range(23)])
    added: list[tinystore.JobState] = []
    # Between the walk's first and second chunks: a job whose id the walk has yet to reach, and one
    # behind it; both were added after the walk began.
    clock.armed(2, lambda: added.extend([q.add({"late": True}, id="job:20b"), q.add({"late": True}, id="job:00b")]))
    assert q.cancel_many(state="waiting") == 23
    assert [a.added for a in added] == [True, True]
    assert [s.id for s in q.jobs()] == ["job:00b", "job:20b"]
    assert_sound(store, kit, target, T)


def test_BULK_03_running_jobs_cancelled_together_are_told_and_what_their_handlers_answer_settles_nothing(
        store: tinystore.Store, kit: kits.Kit, target: str) -> None:
    q = store.queue("reports", dedupe="1h", group_concurrency=2)
    running = threading.Semaphore(0)
    release = threading.Event()
    told: list[tuple[str, bool]] = []

    @q.work
    def handler(payload: Any, run: tinystore.Run) -> None:
        running.release()
        assert release.wait(WAIT)
        told.append((run.id, run.cancelled))
        return None  # an answer that would make the job done, were it heard

    q.add_many([tinystore.Job({}, id=f"run:{i}", group="g") for i in range(2)]
               + [tinystore.Job({}, id="alone")])
    worker = threading.Thread(target=store.run_until_idle, daemon=True)
    worker.start()
    for _ in range(3):
        assert running.acquire(timeout=WAIT)
    q.add({}, id="next", group="g")  # waits: its group is full
    assert {s.id for s in q.jobs(state="running")} == {"run:0", "run:1", "alone"}

    assert q.cancel_many(state="running", group="g") == 2
    assert q.get("run:0") is None and q.get("run:1") is None and q.get("alone").state == "running"
    release.set()
    worker.join(WAIT)
    assert not worker.is_alive()
    assert sorted(told) == [("alone", False), ("next", False), ("run:0", True), ("run:1", True)]
    assert [q.get(id) for id in ("run:0", "run:1")] == [None, None]  # never done
    assert q.get("alone").state == "done" and q.get("next").state == "done"  # the group had room again
    assert_sound(store, kit, target, T)


def test_BULK_04_bad_input_is_refused_naming_the_queue_with_nothing_written(
        store: tinystore.Store, kit: kits.Kit, target: str) -> None:
    q = mixed_queue(store, {"on": True})
    before = kit.listed_by_scan(target, "reports", T)
    calls = [
        (q.cancel_many, {"state": "done"}, "cancel_many acts on scheduled, waiting or running jobs"),
        (q.cancel_many, {"state": "failed"}, "state='failed' names none of them"),
        (q.cancel_many, {"state": "bogus"}, "state='bogus'"),
        (q.retry_many, {"state": "waiting"}, "retry_many acts on failed jobs"),
        (q.cancel_many, {"group": 7}, "group must be a str"),
        (q.retry_many, {"ids": "due:00"}, "must be a list of job ids"),
        (q.cancel_many, {"ids": ["due:00", 3]}, "id must be a str"),
        (q.cancel_many, {"ids": ["due:00", ""]}, "id must be 1 to 1024 bytes"),
        (q.retry_many, {"ids": 5}, "must be a list of job ids"),
    ]
    for call, kwargs, message in calls:
        with pytest.raises(tinystore.InvalidArgument) as raised:
            call(**kwargs)
        assert message in str(raised.value) and raised.value.queue == "reports", (kwargs, str(raised.value))
    assert kit.listed_by_scan(target, "reports", T) == before


def test_BULK_05_a_million_jobs_are_never_one_commit_each_transaction_acts_on_one_bounded_chunk(
        store: tinystore.Store, kit: kits.Kit, target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    kit.small_chunks(monkeypatch, 50)
    q = store.queue("reports")
    q.add_many([{"i": i} for i in range(420)])
    with kit.rows_per_transaction(store, target) as rows:
        assert q.cancel_many() == 420
    assert sum(rows.values()) == 420
    assert max(rows.values()) <= 50 and len(rows) >= 420 // 50, rows

    fail = {"on": True}
    f = store.queue("flaky", attempts=1)
    f.work(lambda payload, run: (_ for _ in ()).throw(RuntimeError("no")) if fail["on"] else None)
    f.add_many([{"i": i} for i in range(120)])
    store.run_until_idle()
    with kit.rows_per_transaction(store, target) as rows:
        assert f.retry_many() == 120
    assert sum(rows.values()) == 120 and max(rows.values()) <= 50 and len(rows) >= 3, rows
    assert_sound(store, kit, target, T)


# Under traffic: a worker process serves the queue and adds to it, one job at a time, while this
# process cancels every job it holds. The witness (triggers on the jobs table, kit.witness_*) records
# each claim and each removal in commit order; the child's handler writes nothing of its own.
TRAFFIC_CHILD = r"""
import os, sys, threading, time
import tinystore
target, folder = sys.argv[1], sys.argv[2]
store = tinystore.open(target)
q = store.queue("work", dedupe="1h")
started = threading.Event()

@q.work
def handle(payload, run):
    if not started.is_set():
        started.set()
        print("running", flush=True)
    time.sleep(0.001)  # the work itself: the queue keeps a backlog while the cancel walks it

stop = threading.Event()

def add():
    n = 0
    while not stop.is_set():
        # Where the test's cancel_many was when this add began: not begun, walking, or returned.
        tag = next((t for t in ("returned", "walking") if os.path.exists(os.path.join(folder, t))), "before")
        q.add({"n": n}, id=f"then-{tag}:{n:05d}")
        n += 1
        if n % 25 == 0:
            print(f"added {n}", flush=True)

adder = threading.Thread(target=add)
adder.start()
store.serve(workers=4)  # until SIGTERM
stop.set()
adder.join()
store.close()
print("stopped", flush=True)
"""


def test_BULK_06_cancel_many_over_thousands_of_jobs_beside_a_worker_process_that_serves_and_adds(
        open_store: Any, kit: kits.Kit, target: str, tmp_path: Path, child_env: dict[str, str]) -> None:
    store = open_store()  # the real clock: the child's
    q = store.queue("work", dedupe="1h")
    kit.witness_claims_and_removals(target)
    for k in range(2):
        q.add_many([tinystore.Job({"n": n}, id=f"first:{n:05d}") for n in range(k * 5000, k * 5000 + 5000)])
    child = start_child(TRAFFIC_CHILD, target, str(tmp_path), env=child_env)
    try:
        wait_for_line(child, "running", WAIT)
        wait_for_line(child, "added 25", WAIT)
        (tmp_path / "walking").write_text("")
        cancelled = q.cancel_many()
        (tmp_path / "returned").write_text("")
        wait_for_line(child, "added 100", WAIT)
        # Past every add that may have begun before the marker: the next lines are the child's after it.
        wait_for_line(child, "added 150", WAIT)
        child.send_signal(signal.SIGTERM)
        wait_for_line(child, "stopped", WAIT)
        assert child.wait(WAIT) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(WAIT)
    q.work(lambda payload, run: None)
    store.run_until_idle()  # what the child left queued runs here

    witness = kit.witnessed(target)
    removed = {id: n for n, (seq, id, what) in enumerate(witness) if what == "removed"}
    assert len(removed) == cancelled > 0  # only cancels remove rows here: done jobs are kept (dedupe)
    assert 0 < cancelled < 10_000 + 150, "the worker ran some before the cancel reached them"
    claimed_after = [id for n, (seq, id, what) in enumerate(witness) if what == "claimed" and id in removed
                     and n > removed[id]]
    assert claimed_after == []
    kept = {row.id: row.state for row in kit.job_rows(target)}
    assert all(state == "done" for state in kept.values()), "every job not cancelled ran to its end"
    assert not set(kept) & set(removed)
    assert {f"first:{n:05d}" for n in range(10_000)} <= set(kept) | set(removed), "nothing was lost"
    # The child's adds sort after the first jobs, where the walk comes last. Those added while it walked
    # are not touched, but for the one add under way when it began (and one more begun as it did).
    walking = [id for id in kept if id.startswith("then-walking:")]
    assert len(walking) >= 3 and len([id for id in removed if id.startswith("then-walking:")]) <= 2
    assert [id for id in kept if id.startswith("then-returned:")]
    assert not [id for id in removed if id.startswith("then-returned:")]
    assert_sound(store, kit, target, time.time())


RETRY_CHILD = r"""
import os, sys
import tinystore
target, folder = sys.argv[1], sys.argv[2]
store = tinystore.open(target)
q = store.queue("work", attempts=1, dedupe="1h")

@q.work
def handle(payload, run):
    if not os.path.exists(os.path.join(folder, "mended")):
        raise RuntimeError("not yet")

print("serving", flush=True)
store.serve(workers=4)  # until SIGTERM
store.close()
print("stopped", flush=True)
"""


def test_BULK_07_jobs_retried_together_run_again_in_a_worker_process_woken_by_the_commit(
        open_store: Any, kit: kits.Kit, target: str, tmp_path: Path, child_env: dict[str, str]) -> None:
    store = open_store()  # the real clock: the child's
    q = store.queue("work", attempts=1, dedupe="1h")
    child = start_child(RETRY_CHILD, target, str(tmp_path), env=child_env)
    try:
        wait_for_line(child, "serving", WAIT)
        q.add_many([tinystore.Job({"n": n}, id=f"job:{n:02d}") for n in range(30)])
        assert [q.wait(f"job:{n:02d}", timeout=WAIT).state for n in range(30)] == ["failed"] * 30
        (tmp_path / "mended").write_text("")
        assert q.retry_many() == 30
        # The worker sleeps with nothing due: only the retry's notice wakes it.
        ends = [q.wait(f"job:{n:02d}", timeout=WAIT) for n in range(30)]
        assert [(e.state, e.attempt) for e in ends] == [("done", 1)] * 30
        child.send_signal(signal.SIGTERM)
        wait_for_line(child, "stopped", WAIT)
        assert child.wait(WAIT) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(WAIT)
    assert_sound(store, kit, target, time.time())
