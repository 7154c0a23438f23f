"""A batch's then job is added exactly once, whatever crashes, and however its last jobs' ends meet.

Worker processes (``crash_child.py``) run a batch's jobs and its then job,
each run appending "start" and "end" to the witness file; the tests SIGKILL
them around the batch's last settlement, or let two of them settle a batch's
last two jobs at the same moment, and read the store afterwards: one then
job per batch, with the counts of its jobs, none missing, and the then job's
first start after the last end of every job of its batch.
"""

from __future__ import annotations

import collections
import signal
import time

import pytest

import tinystore
from helpers import kill_child, lines_of, stderr_of, wait_child, wait_for_line

WAIT = 60
DRAIN_TIMEOUT = 240  # bounds a broken test, never a passing one's speed


def then_jobs(lab, queue: str) -> collections.Counter:
    """How many rows of ``queue`` the store holds per id: a then job added twice would be two."""
    return collections.Counter(row.id for row in lab.kit.job_rows(lab.target) if row.queue == queue)


def assert_then_after_its_jobs(lab, members: dict[str, str], then_queue: str) -> None:
    """In the witness, each then job's first start comes after the last end of every job of its batch
    (``members``: a job's id, its batch's)."""
    runs = lab.runs()
    last_end = {}
    for n, run in enumerate(runs):
        if run.phase == "end" and run.id in members:
            last_end[members[run.id]] = max(last_end.get(members[run.id], -1), n)
    first_start = {}
    for n, run in enumerate(runs):
        if run.phase == "start" and run.queue == then_queue:
            first_start.setdefault(run.id, n)
    early = [batch for batch, n in first_start.items() if n < last_end.get(batch, -1)]
    assert not early, f"then jobs that started before a job of their batch ended: {early[:5]}"


@pytest.mark.parametrize("attempts", [1, 2])
def test_BAT_14_a_worker_killed_before_the_last_settlement_committed_leaves_the_then_job_to_be_added_once(
        lab, open_store, attempts):
    lab.prepare("crawl", attempts=attempts, dedupe="1d", keep="1d")
    lab.prepare("mailer", dedupe="1d")
    store = open_store()
    crawl, mailer = store.queue("crawl"), store.queue("mailer")
    batch = store.batch(then=(mailer, {"report": 1}))
    crawl.add_many([tinystore.Job({}, id="a"), tinystore.Job({}, id="b"),
                    tinystore.Job({"hang_after_on": [1]}, id="last")], batch=batch)
    batch.close()

    worker = lab.worker("crawl:async", "mailer:async", serve=True)
    wait_for_line(worker, "handled last 1", timeout=WAIT)  # its work is done; its settlement never comes
    lab.watch_until_ended(crawl, ["a", "b"], timeout=WAIT)
    assert store.batch_state(batch).then_id is None, "the batch's last job has not ended"
    kill_child(worker)

    reopened = open_store()  # finds the worker dead and ends its lease (DUR-03)
    state = reopened.batch_state(batch.id)
    if attempts == 1:  # its only attempt: failed for good by the lease's end, which added the then job
        assert (state.done, state.failed, state.then_id) == (2, 1, batch.id)
    else:  # it waits again, and its next run's settlement adds the then job
        assert (state.done, state.waiting, state.then_id) == (2, 1, None)
    second = lab.worker("crawl:async", "mailer:async", until_idle=True)
    assert wait_child(second, timeout=WAIT) == 0, stderr_of(second)

    assert then_jobs(lab, "mailer") == {batch.id: 1}
    assert [(r.id, r.attempt) for r in lab.runs("start") if r.queue == "mailer"] == [(batch.id, 1)]
    then = reopened.queue("mailer").get(batch.id)
    assert then.state == "done"
    assert then.payload == {"report": 1, "batch": {"id": batch.id, "done": 2 + (attempts == 2),
                                                   "failed": int(attempts == 1), "cancelled": 0}}
    assert_then_after_its_jobs(lab, {"a": batch.id, "b": batch.id, "last": batch.id}, "mailer")
    lab.assert_sound(finished=[("crawl", "a"), ("crawl", "b"), ("mailer", batch.id)])
    lab.assert_consistent()


def test_BAT_14_a_worker_killed_right_after_the_last_settlement_committed_runs_the_one_then_job_again(
        lab, open_store):
    lab.prepare("crawl", dedupe="1d")
    lab.prepare("mailer", dedupe="1d")
    store = open_store()
    crawl, mailer = store.queue("crawl"), store.queue("mailer")
    batch = store.batch(then=(mailer, {"kill_on": [1]}))  # the then job's first run kills its worker
    crawl.add_many([tinystore.Job({}, id=f"page-{n}") for n in range(3)], batch=batch)
    batch.close()

    worker = lab.worker("crawl:async", "mailer:async", serve=True)
    assert wait_child(worker, timeout=WAIT) == -signal.SIGKILL, stderr_of(worker)
    assert then_jobs(lab, "mailer") == {batch.id: 1}, "the then job committed with the last settlement"

    reopened = open_store()  # ends the dead worker's lease of the then job: it waits again
    assert reopened.queue("mailer").get(batch.id).state == "waiting"
    second = lab.worker("crawl:async", "mailer:async", until_idle=True)
    assert wait_child(second, timeout=WAIT) == 0, stderr_of(second)

    assert then_jobs(lab, "mailer") == {batch.id: 1}
    assert [(r.id, r.attempt) for r in lab.runs("start") if r.queue == "mailer"] == [(batch.id, 1), (batch.id, 2)]
    assert sorted((r.id, r.attempt) for r in lab.runs("end") if r.queue == "crawl") == [
        (f"page-{n}", 1) for n in range(3)], "the batch's jobs ran once each"
    assert reopened.batch_state(batch.id).then_id == batch.id
    lab.assert_sound(finished=[("mailer", batch.id)])
    lab.assert_consistent()


def test_BAT_15_two_processes_settling_a_batch_s_last_two_jobs_at_once_add_its_then_job_once(lab, open_store):
    """Each batch has one job in "left", run by one worker process, and one in "right", run by another,
    added at the same moment and working as long: the two ends of a batch are written side by side
    (on PostgreSQL in transactions that take no queue lock). None may add the then job twice, and none
    may leave it out."""
    batches = 300
    for queue in ("left", "right", "then"):
        lab.prepare(queue, dedupe="1d")
    workers = [lab.worker("left:async", "then:async", serve=True), lab.worker("right:async", serve=True)]
    for w in workers:
        wait_for_line(w, "serving", timeout=WAIT)

    store = open_store()
    left, right, then = store.queue("left"), store.queue("right"), store.queue("then")
    members, ids = {}, []
    for n in range(batches):
        batch = store.batch(then=(then, {"n": n}))
        left.add({"work": 0.002}, id=f"left-{n}", batch=batch)
        right.add({"work": 0.002}, id=f"right-{n}", batch=batch)
        batch.close()
        members[f"left-{n}"] = members[f"right-{n}"] = batch.id
        ids.append(batch.id)

    lab.watch_until_ended(left, [f"left-{n}" for n in range(batches)], timeout=DRAIN_TIMEOUT)
    lab.watch_until_ended(right, [f"right-{n}" for n in range(batches)], timeout=DRAIN_TIMEOUT)
    added = then_jobs(lab, "then")
    missing = [id for id in ids if id not in added]
    assert not missing, f"{len(missing)} batches whose jobs all ended have no then job, e.g. {missing[:5]}"
    last = lab.watch_until_ended(then, ids, timeout=DRAIN_TIMEOUT)
    for w in workers:
        w.send_signal(signal.SIGTERM)
    for w in workers:
        assert wait_child(w) == 0, stderr_of(w)
        assert "stopped" in lines_of(w)

    assert then_jobs(lab, "then") == {id: 1 for id in ids}, "one then job per batch"
    assert {s.state for s in last.values()} == {"done"}
    for n, id in enumerate(ids):
        assert last[id].payload == {"n": n, "batch": {"id": id, "done": 2, "failed": 0, "cancelled": 0}}
    starts = collections.Counter(r.id for r in lab.runs("start") if r.queue == "then")
    assert starts == {id: 1 for id in ids}, "each then job ran once"
    ended_by = collections.defaultdict(set)
    for r in lab.runs("end"):
        if r.id in members:
            ended_by[members[r.id]].add(r.pid)
    assert all(len(pids) == 2 for pids in ended_by.values()), "each batch's two jobs were run by two processes"
    assert_then_after_its_jobs(lab, members, "then")
    lab.assert_sound(finished=[(q, id) for id in members for q in ("left", "right") if id.startswith(q)])
    lab.assert_consistent()


def test_BAT_16_under_traffic_with_workers_killed_at_any_moment_every_batch_adds_its_then_job_once(lab, open_store):
    """Small batches of three jobs go to two worker processes for a few seconds: some jobs fail for good,
    some are cancelled, some SIGKILL their process on their first attempt, and the test SIGKILLs a
    worker now and then wherever it is (its last settlement may be before, in, or after its commit);
    each dead worker is replaced. Every batch, closed right after its jobs or a batch later, ends with
    one then job whose counts are its jobs' ends, and none is missing."""
    seconds = 5
    lab.prepare("work", attempts=3, lease="2s", dedupe="1h", keep="1h")
    lab.prepare("then", lease="2s", dedupe="1h")
    kinds = iter(["sync", "async"] * 50)

    def worker():
        proc = lab.worker(f"work:{next(kinds)}", "then:async", serve=True)
        wait_for_line(proc, "serving", timeout=WAIT)
        return proc

    workers = [worker(), worker()]
    store = open_store()
    q, then = store.queue("work"), store.queue("then")
    expected: dict[str, collections.Counter] = {}
    members: dict[str, str] = {}
    open_batch, kills, n, began = None, 0, 0, time.time()
    last_kill = began
    while time.time() - began < seconds:
        batch = store.batch(then=(then, {"b": len(expected)}))
        outcomes = collections.Counter()
        for _ in range(3):
            n += 1
            payload = {"work": (n * 7 % 5) / 1000}
            if n % 5 == 0:
                payload["fail_on"] = [1, 2, 3]
            if n % 23 == 0 and kills < 3:
                payload["kill_on"], kills = [1], kills + 1
            q.add(payload, id=f"job-{n}", batch=batch)
            members[f"job-{n}"] = batch.id
            outcomes["failed" if "fail_on" in payload else "done"] += 1
        if n % 4 == 0 and q.cancel(f"job-{n}"):  # taken away wherever it was, waiting or running
            outcomes["failed" if n % 5 == 0 else "done"] -= 1
            outcomes["cancelled"] += 1
        expected[batch.id] = outcomes
        if open_batch is not None:
            open_batch.close()  # a batch later: its jobs may all have ended already
        open_batch = batch if len(expected) % 2 else None
        if open_batch is None:
            batch.close()
        if time.time() - last_kill > 1:  # a worker killed wherever it is
            kill_child(workers[0])
            last_kill = time.time()
        for i, proc in enumerate(workers):
            if proc.poll() is not None:  # killed: replaced, as a supervisor would
                assert proc.returncode == -signal.SIGKILL, stderr_of(proc)
                workers[i] = worker()
        time.sleep(0.02)  # the pace of the traffic, not a synchronisation
    if open_batch is not None:
        open_batch.close()

    live = [id for id in members if q.get(id) is not None]
    lab.watch_until_ended(q, live, timeout=DRAIN_TIMEOUT)
    ids = list(expected)
    missing = [id for id in ids if store.batch_state(id) is None or store.batch_state(id).then_id is None]
    assert not missing, f"{len(missing)} batches whose jobs all ended have no then job, e.g. {missing[:5]}"
    last = lab.watch_until_ended(then, ids, timeout=DRAIN_TIMEOUT)
    for proc in workers:
        proc.send_signal(signal.SIGTERM)
    for proc in workers:
        assert wait_child(proc) == 0, stderr_of(proc)

    assert then_jobs(lab, "then") == {id: 1 for id in ids}, "one then job per batch"
    assert {s.state for s in last.values()} == {"done"}
    for id, outcomes in expected.items():
        counts = {k: outcomes[k] for k in ("done", "failed", "cancelled")}
        assert last[id].payload["batch"] == {"id": id, **counts}, (id, last[id].payload)
    assert {r.id for r in lab.runs("end") if r.queue == "then"} == set(ids), "every then job ran to its end"
    assert_then_after_its_jobs(lab, members, "then")
    lab.assert_consistent()


def test_BAT_14_a_dead_worker_s_jobs_failed_for_good_in_bulk_count_in_each_of_their_batches(lab, open_store):
    """The leases of a dead process end with one statement per queue (``owner_lost``); the jobs it fails
    for good count in their own batches, two of one batch as two."""
    lab.prepare("crawl", attempts=1, keep="1d")
    lab.prepare("mailer", dedupe="1d")
    store = open_store()
    crawl, mailer = store.queue("crawl"), store.queue("mailer")
    two, one = store.batch(then=(mailer, {"of": "two"})), store.batch(then=(mailer, {"of": "one"}))
    block = {"block_on": [1]}
    crawl.add_many([tinystore.Job(block, id="two-a"), tinystore.Job(block, id="two-b")], batch=two)
    crawl.add(block, id="one-a", batch=one)
    crawl.add(block, id="alone")
    two.close()
    one.close()

    worker = lab.worker("crawl:async", serve=True)
    for id in ("two-a", "two-b", "one-a", "alone"):
        wait_for_line(worker, f"started {id} 1", timeout=WAIT)
    kill_child(worker)
    reopened = open_store()  # ends the dead worker's four leases: their only attempts, failed for good

    assert {id: reopened.queue("crawl").get(id).state for id in ("two-a", "two-b", "one-a", "alone")} == {
        "two-a": "failed", "two-b": "failed", "one-a": "failed", "alone": "failed"}
    then = reopened.queue("mailer")
    assert then.get(two.id).payload == {"of": "two", "batch": {"id": two.id, "done": 0, "failed": 2, "cancelled": 0}}
    assert then.get(one.id).payload == {"of": "one", "batch": {"id": one.id, "done": 0, "failed": 1, "cancelled": 0}}
    assert then_jobs(lab, "mailer") == {two.id: 1, one.id: 1}
    lab.assert_consistent()
