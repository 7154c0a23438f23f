"""JOB-09 under traffic: timeouts while jobs arrive back to back and a worker serves them.

Each test serves with ``store.start()`` on the real clock (one on a
``FakeClock``), while a producer adds jobs one after another. Handlers record
each run in a ``Witness`` (begin, end, when they were told to stop); a
``Monitor`` notes when the store first showed a job failed. The contract,
sharpened: the timeout counts from when the handler begins, never from the
claim, and ends only its own attempt; a ``def`` handler past it keeps its
place (concurrency, worker slots) until its thread returns, and sees
``run.cancelled``; ``timeout=None`` means no timeout.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import pytest
from traffic_tools import (Monitor, Producer, Witness, failed_jobs, first_line, handler_for, overlapping,
                           peak, settle, some)

import tinystore
from tinystore.testing import FakeClock

KINDS = ["async", "def"]
# The handler's first line runs a moment after its attempt begins, where a timer may have been set: a run is
# "at least the timeout" long when it is within this of it. A timeout that fires early misses by far more.
BEGIN_SLACK = 0.02


def serve(store: tinystore.Store, **options: Any) -> None:
    store.start(grace=5, **options)


@pytest.mark.parametrize("kind", KINDS)
def test_JOB_09_jobs_shorter_than_the_timeout_added_back_to_back_never_time_out(
        open_store: Callable[..., tinystore.Store], kind: str) -> None:
    store = open_store()
    q = store.queue("replies", timeout="1s", attempts=1)
    witness = Witness()
    q.work(handler_for(kind, witness))
    serve(store)
    producer = Producer(q, [(f"j{i:02}", {"s": 0.3}) for i in range(20)], every=0.15)
    ids = settle(q, producer)
    store.stop()
    runs = witness.by_id()
    failed = failed_jobs(q, ids)
    assert not failed, (
        f"{len(failed)} of {len(ids)} jobs of 0.3 s, added one every 0.15 s, failed against a timeout of 1 s: "
        + "; ".join(f"{id}: {error} after {runs.get(id)}" for id, error in some(failed).items()))
    not_once = {id: runs.get(id) for id in ids if [e.outcome for e in runs.get(id, [])] != ["returned"]}
    assert not not_once, f"jobs that did not run exactly once to their end: {some(not_once)}"


@pytest.mark.parametrize("kind", KINDS)
def test_JOB_09_a_timeout_under_back_to_back_traffic_fails_only_attempts_that_ran_past_it(
        open_store: Callable[..., tinystore.Store], kind: str) -> None:
    store = open_store()
    q = store.queue("replies", timeout="1s", attempts=1)
    witness = Witness()
    q.work(handler_for(kind, witness))
    jobs = [(f"slow{i:02}", {"s": 1.6}) if i % 4 == 3 else (f"fast{i:02}", {"s": 0.05 + (i * 37 % 100) / 1000})
            for i in range(16)]
    slow = [id for id, _ in jobs if id.startswith("slow")]
    fast = [id for id, _ in jobs if id.startswith("fast")]
    monitor = Monitor(q, slow)
    serve(store)
    producer = Producer(q, jobs, every=0.1)
    settle(q, producer)
    witness.wait_for("every run ending", lambda es: all(e.ended is not None for e in es))
    store.stop()
    monitor.stop()
    runs = witness.by_id()

    failed = failed_jobs(q, fast)
    assert not failed, ("fast jobs (50-150 ms against a timeout of 1 s) that failed: "
                        + "; ".join(f"{id}: {error} after {runs.get(id)}" for id, error in some(failed).items()))
    not_once = {id: runs.get(id) for id in fast if [e.outcome for e in runs.get(id, [])] != ["returned"]}
    assert not not_once, f"fast jobs that did not run exactly once to their end: {some(not_once)}"

    for id in slow:
        state = q.get(id)
        assert state is not None and state.state == "failed" and first_line(state.error).startswith("timeout"), (
            f"{id} worked 1.6 s against a timeout of 1 s and should have failed with 'timeout', not {state!r}")
        (entry,) = runs[id]
        seen_failed = monitor.first(id, "failed")
        assert seen_failed is not None and seen_failed - entry.started >= 1.0 - BEGIN_SLACK, (
            f"{id} was failed {seen_failed - entry.started:.2f}s after its handler began, before its timeout of 1 s")
        if kind == "async":
            assert entry.outcome == "cancelled", f"{id} was not cancelled past its timeout: {entry}"
            assert entry.told >= 1.0 - BEGIN_SLACK, f"{id} was cancelled before its timeout of 1 s: {entry}"


def test_JOB_09_a_def_handler_past_its_timeout_keeps_its_place_under_concurrency_1_no_overlap_with_the_next(
        open_store: Callable[..., tinystore.Store]) -> None:
    store = open_store()
    q = store.queue("reports", concurrency=1, timeout="1s", attempts=2, backoff=("100ms", "100ms"))
    witness = Witness()
    handler = handler_for("def", witness)

    def stuck_once(payload: dict, run: tinystore.Run) -> Any:
        if run.id == "stuck" and run.attempt == 1:
            payload = {"s": 2.5}  # past its timeout, and deaf to run.cancelled: its thread holds on
        return handler(payload, run)

    q.work(stuck_once)
    serve(store)
    q.add({"s": 0.05}, id="stuck")
    witness.wait_started("stuck")
    producer = Producer(q, [(f"n{i}", {"s": 0.1}) for i in range(6)], every=0.15)
    ids = settle(q, producer) + ["stuck"]
    witness.wait_started("stuck", attempt=2)  # its retry, once attempt 1's thread returned and the backoff passed
    witness.wait_for("every run ending", lambda es: all(e.ended is not None for e in es))
    store.stop()

    entries = witness.entries()
    intervals = [(f"{e.id}#{e.attempt}", e.started, e.ended) for e in entries]
    assert peak([(s, e) for _, s, e in intervals]) <= 1, (
        f"with concurrency=1, runs overlapped while a def handler ran past its timeout: "
        f"{overlapping(intervals, 1)[:3]}")
    runs = witness.by_id()
    assert [(e.attempt, e.outcome) for e in runs["stuck"]] == [(1, "returned"), (2, "returned")], runs["stuck"]
    assert runs["stuck"][1].started >= runs["stuck"][0].ended, (
        f"attempt 2 of stuck began before attempt 1's thread returned: {runs['stuck']}")
    not_once = {id: runs.get(id) for id in ids if id != "stuck"
                and [e.outcome for e in runs.get(id, [])] != ["returned"]}
    assert not not_once, f"jobs that did not run exactly once to their end: {some(not_once)}"
    assert failed_jobs(q, ids) == {}


def test_JOB_09_behind_two_stuck_def_handlers_in_two_slots_jobs_wait_then_run_none_fails_timeout_unrun(
        open_store: Callable[..., tinystore.Store]) -> None:
    store = open_store()
    q = store.queue("reports", timeout="1s", attempts=1)
    witness = Witness()
    q.work(handler_for("def", witness))
    serve(store, workers=2)
    q.add({"s": 2.5}, id="stuck1")  # past its timeout, deaf to run.cancelled: its thread holds a slot
    q.add({"s": 2.5}, id="stuck2")
    witness.wait_started("stuck1")
    witness.wait_started("stuck2")
    producer = Producer(q, [(f"n{i}", {"s": 0.1}) for i in range(8)], every=0.1)
    ids = settle(q, producer)
    witness.wait_for("every run ending", lambda es: all(e.ended is not None for e in es))
    store.stop()
    runs = witness.by_id()

    failed = failed_jobs(q, ids)
    assert not failed, ("jobs queued behind two stuck def handlers failed: "
                        + "; ".join(f"{id}: {error}, "
                                    + (f"after {runs[id]}" if id in runs else "without its handler ever beginning")
                                    for id, error in some(failed).items()))
    not_once = {id: runs.get(id) for id in ids if [e.outcome for e in runs.get(id, [])] != ["returned"]}
    assert not not_once, f"jobs that did not run exactly once to their end: {some(not_once)}"
    entries = witness.entries()
    intervals = [(f"{e.id}#{e.attempt}", e.started, e.ended) for e in entries]
    assert peak([(s, e) for _, s, e in intervals]) <= 2, (
        f"more handlers ran at once than the worker's 2 slots: {overlapping(intervals, 2)[:3]}")
    freed = min(runs["stuck1"][0].ended, runs["stuck2"][0].ended)
    early = [e for e in entries if e.id in ids and e.started < freed]
    assert not early, f"jobs began while both slots were held by stuck def handlers: {early}"
    for id in ("stuck1", "stuck2"):
        state = q.get(id)
        assert state is not None and first_line(state.error).startswith("timeout"), (id, state)


def test_JOB_09_run_cancelled_turns_true_in_a_def_handler_past_its_timeout_and_only_there(
        open_store: Callable[..., tinystore.Store]) -> None:
    store = open_store()
    q = store.queue("reports", timeout="1s", attempts=1)
    witness = Witness()
    q.work(handler_for("def", witness))
    jobs = [(f"fast{i}", {"s": 0.1}) for i in range(10)]
    jobs[2] = ("slow2", {"s": 3.0, "stop_when_told": True})  # stops as soon as it sees run.cancelled
    jobs[6] = ("slow6", {"s": 3.0, "stop_when_told": True})
    serve(store)
    producer = Producer(q, jobs, every=0.1)
    ids = settle(q, producer)
    witness.wait_for("every run ending", lambda es: all(e.ended is not None for e in es))
    store.stop()
    runs = witness.by_id()

    for id in ("slow2", "slow6"):
        (entry,) = runs[id]
        assert entry.told is not None, (
            f"run.cancelled never turned true in {id}, a def handler that ran {entry.ran:.2f}s"
            " against a timeout of 1 s")
        assert entry.told >= 1.0 - BEGIN_SLACK, f"run.cancelled turned true in {id} before its timeout of 1 s: {entry}"
        state = q.get(id)
        assert state is not None and state.state == "failed" and first_line(state.error).startswith("timeout"), (
            id, state)
    fast = [id for id in ids if id.startswith("fast")]
    told = {id: runs[id] for id in fast if any(e.told is not None for e in runs.get(id, []))}
    assert not told, f"run.cancelled turned true in fast jobs that ran within their timeout: {told}"
    assert failed_jobs(q, fast) == {}, "fast jobs failed"


@pytest.mark.parametrize("kind", KINDS)
def test_JOB_09_timeout_None_means_no_timeout_a_handler_longer_than_the_old_default_runs_to_completion(
        open_store: Callable[..., tinystore.Store], kind: str) -> None:
    clock = FakeClock()
    store = open_store(clock=clock)
    try:  # a lease longer than the test's clock moves: no renewal is needed to keep it
        q = store.queue("exports", timeout=None, lease="1h", attempts=1, dedupe="1d")
    except tinystore.Error as exc:
        pytest.fail(f"store.queue(..., timeout=None) was refused: {exc}")
    witness = Witness()
    release = threading.Event()
    q.work(handler_for(kind, witness, release))
    serve(store)
    try:
        q.add({"hold": True}, id="long")
        witness.wait_started("long")
        for k in range(8):  # 8 x 15 s: two minutes pass while the long job runs and others come and go
            clock.advance("15s")
            q.add({"s": 0.02}, id=f"f{k}")
            witness.wait_for(f"f{k} ending", lambda es, k=k: any(e.id == f"f{k}" and e.ended for e in es))
        (entry,) = witness.runs_of("long")
        assert entry.ended is None and entry.told is None and not entry.notes["run"].cancelled, (
            f"with timeout=None the long handler was stopped after 2 minutes of the store's clock: {entry}")
    finally:
        release.set()
    witness.wait_for("the long job ending", lambda es: all(e.ended is not None for e in es))
    store.stop()
    state = q.get("long")
    assert state is not None and (state.state, state.attempt) == ("done", 1), state
    assert [e.outcome for e in witness.runs_of("long")] == ["returned"]
    for k in range(8):
        assert q.get(f"f{k}").state == "done", q.get(f"f{k}")
