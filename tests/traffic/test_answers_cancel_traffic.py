"""JOB-07, JOB-08 and JOB-12 under traffic: raises, retries, snoozes and cancels among jobs added back to back.

Each test serves with ``store.start()`` on the real clock while a producer
adds jobs one after another; the handlers (``traffic_tools.handler_for``)
record every run in a ``Witness``. At the end the tests compare, job by job,
the runs the witness saw with the runs the contract allows.
"""

from __future__ import annotations

import threading
from typing import Callable

import pytest
from traffic_tools import WAIT, Follower, Producer, Witness, failed_jobs, handler_for, settle, some

import tinystore

KINDS = ["async", "def"]
DELAY = 0.1  # every retry, snooze and backoff of these tests: 100 ms (a backoff ±10 %)
CLOCKS = 0.005  # the witness reads time.monotonic, the store time.time: they may differ by this much

# What each kind of job answers, and the runs the contract makes of it: (run.attempt, outcome) in order.
KINDS_OF_JOB = {
    "plain": ({}, [(1, "returned")]),
    "raises": ({"fail": 1}, [(1, "raised"), (2, "returned")]),  # JOB-07: runs again after its backoff
    "retries": ({"retry": 1}, [(1, "retry"), (2, "returned")]),  # JOB-08: counted
    "snoozes": ({"snooze": 1}, [(1, "snooze"), (1, "returned")]),  # JOB-08: not counted
    "snoozes_then_raises": ({"snooze": 1, "fail": 1}, [(1, "snooze"), (1, "raised"), (2, "returned")]),
    "retries_twice": ({"retry": 2}, [(1, "retry"), (2, "retry"), (3, "returned")]),
}


@pytest.mark.parametrize("kind", KINDS)
def test_JOB_07_JOB_08_raises_retries_and_snoozes_among_plain_jobs_all_end_done_with_attempts_counted_as_promised(
        open_store: Callable[..., tinystore.Store], kind: str) -> None:
    store = open_store()
    q = store.queue("payments", attempts=5, backoff=("100ms", "100ms"))
    witness = Witness()
    q.work(handler_for(kind, witness))
    names = list(KINDS_OF_JOB)
    jobs, expected = [], {}
    for i in range(24):
        name = names[i % len(names)] if i % 2 else "plain"  # every other job a plain one
        payload, runs = KINDS_OF_JOB[name]
        id = f"{name}:{i:02}"
        jobs.append((id, {**payload, "s": 0.02 + (i * 29 % 100) / 1000}))
        expected[id] = runs
    store.start(grace=5)
    producer = Producer(q, jobs, every=0.05)
    ids = settle(q, producer)
    store.stop()  # handlers finish first: a run after its job was done would be in the witness now

    assert failed_jobs(q, ids) == {}, "jobs failed"
    left = {id: q.get(id) for id in ids if q.get(id) is not None}
    assert not left, f"jobs the store still holds though each should be done and removed: {some(left)}"
    runs = witness.by_id()
    wrong = {id: [(e.attempt, e.outcome) for e in runs.get(id, [])] for id in ids
             if [(e.attempt, e.outcome) for e in runs.get(id, [])] != expected[id]}
    assert not wrong, "jobs whose runs were not those promised (run.attempt, outcome): " + "; ".join(
        f"{id} ran {got}, expected {expected[id]}" for id, got in some(wrong).items())
    for id in ids:
        for before, after in zip(runs[id], runs[id][1:]):
            assert after.started - before.ended >= DELAY * 0.9 - CLOCKS, (
                f"{id} ran again {after.started - before.ended:.3f}s after its run answered, "
                f"sooner than its 100 ms delay: {before} then {after}")


@pytest.mark.parametrize("kind", KINDS)
def test_JOB_12_cancels_of_waiting_and_running_jobs_amid_traffic_settle_nothing_and_leave_the_others_alone(
        open_store: Callable[..., tinystore.Store], kind: str) -> None:
    store = open_store()
    # Done jobs are kept an hour: a cancelled job that became done would show as done.
    q = store.queue("mail", group_concurrency=1, attempts=3, dedupe="1h")
    witness, release = Witness(), threading.Event()
    q.work(handler_for(kind, witness, release))
    store.start(workers=4, grace=5)
    try:
        # A full group: "gate" runs until released, so the jobs of its group behind it are waiting.
        q.add({"hold": True}, id="gate", group="g")
        witness.wait_started("gate")
        waiting = [f"w{k}" for k in range(4)]
        for id in waiting:
            q.add({"s": 0.05}, id=id, group="g")
        scheduled = [f"s{k}" for k in range(2)]
        for id in scheduled:
            q.add({"s": 0.05}, id=id, delay="1h")
        # Traffic: plain jobs, and among them jobs that run until they are told (async: cancelled; def:
        # until run.cancelled is true, then they answer "done", which must settle nothing).
        running = [f"hold{k}" for k in range(3)]
        jobs: list[tuple] = [(f"p{i:02}", {"s": 0.05 + (i * 31 % 100) / 1000}) for i in range(24)]
        for k, id in enumerate(running):
            jobs.insert(3 + 7 * k, (id, {"hold": True, "stop_when_told": True, "s": 10.0}))
        victims = waiting + scheduled + running
        followers = {id: Follower(q, id) for id in waiting + scheduled}
        for f in followers.values():
            f.wait_registered()
        producer = Producer(q, jobs, every=0.05)
        cancelled = {}
        for k, id in enumerate(running):  # cancel while the producer adds and the worker runs the others
            witness.wait_started(id)
            followers[id] = Follower(q, id)
            followers[id].wait_registered()
            assert q.get(id).state == "running", q.get(id)
            cancelled[id] = q.cancel(id)
            for other in (waiting[2 * k:2 * k + 2] + scheduled[k:k + 1]) if k < 2 else ():
                expected = "scheduled" if other in scheduled else "waiting"
                assert q.get(other).state == expected, q.get(other)
                cancelled[other] = q.cancel(other)
        producer.join()
        witness.wait_for("every cancelled running job's handler being told",
                         lambda es: all(e.told is not None for e in es if e.id in running), timeout=10)
    finally:
        release.set()
    plain = [id for id, _ in jobs if id.startswith("p")]
    settle(q, producer)
    witness.wait_for("every run ending", lambda es: all(e.ended is not None for e in es))
    store.stop()

    assert cancelled == {id: True for id in victims}, f"cancel did not take every job away: {cancelled}"
    runs = witness.by_id()
    for id in victims:
        assert q.get(id) is None, f"{id} was cancelled but the store still shows it: {q.get(id)!r}"
        seen = followers[id].wait_ended(WAIT)
        assert [s.state for s in seen][-1] == "cancelled" and "done" not in [s.state for s in seen], (
            f"a watcher of {id} saw {followers[id].summary()}, not its cancel")
    ran = {id: runs[id] for id in waiting + scheduled if id in runs}
    assert not ran, f"cancelled jobs that were not running ran after all: {ran}"
    for id in running:
        (entry,) = runs[id]
        assert entry.told is not None, f"{id} was cancelled while it ran but its handler was never told: {entry}"
        if kind == "async":
            assert entry.outcome == "cancelled", f"{id}'s async handler was not cancelled: {entry}"
    others = plain + ["gate"]
    wrong = {id: [(e.attempt, e.outcome) for e in runs.get(id, [])] for id in others
             if [(e.attempt, e.outcome) for e in runs.get(id, [])] != [(1, "returned")]}
    assert not wrong, f"jobs beside the cancelled ones that did not run once to their end: {some(wrong)}"
    not_done = {id: q.get(id) for id in others if q.get(id) is None or q.get(id).state != "done"}
    assert not not_done, f"jobs beside the cancelled ones that are not done: {some(not_done)}"
    stats = store.stats()["mail"]
    assert (stats["waiting"], stats["running"], stats["scheduled"], stats["failed"]) == (0, 0, 0, 0), stats
