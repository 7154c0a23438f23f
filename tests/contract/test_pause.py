"""Contract tests of pausing a queue (PAU-*), on every backend.

``queue.pause()`` is kept in the store and binds every process's next claim:
a paused queue starts nothing, while its running jobs go on, renew and
settle, and adds, cancels and retries are accepted; ``queue.resume()`` starts
its due jobs again in start order (JOB-01). Time is a FakeClock the tests
move, except where a second open serves on the real clock; a witness list,
appended by each handler as its first act, records what started.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import pytest

import tinystore
from helpers import Background, run_until_idle

T = 1_800_000_000.0  # where the `clock` fixture's FakeClock starts
WAIT = 30


def wait_until(condition: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        threading.Event().wait(0.01)
    raise AssertionError(f"{what}: not after {timeout}s")


def witnessed(q: tinystore.Queue) -> list:
    order: list = []

    def handler(payload, run):
        order.append(payload)

    q.work(handler)
    return order


def test_PAU_01_a_paused_queue_starts_nothing_while_adds_are_accepted(store, kit, target, clock):
    q = store.queue("reports")
    q.add("before", id="before")
    order = witnessed(q)
    q.pause()
    assert q.paused is True
    added = q.add("during", id="during")
    assert added.added and added.state == "waiting"
    q.add("later", id="later", delay="1m")
    clock.advance("2m")
    run_until_idle(store)
    assert order == []
    assert [q.get(id).state for id in ("before", "during", "later")] == ["waiting"] * 3
    assert kit.leases(target) == []
    assert store.stats()["reports"]["paused"] is True
    assert store.stats()["reports"]["waiting"] == 3


def test_PAU_01_a_pause_is_kept_in_the_store_and_read_by_every_open(store, open_store, clock):
    q = store.queue("reports")
    other = open_store(clock=clock).queue("reports")
    assert (q.paused, other.paused) == (False, False)
    q.pause()
    assert other.paused is True, "another open reads the pause from the store"
    other.resume()
    assert q.paused is False
    q.pause()
    q.pause()  # twice: still one pause, ended by one resume
    q.resume()
    assert other.paused is False


def test_PAU_01_pause_and_resume_return_whether_they_changed_the_queue(store, open_store, clock):
    q = store.queue("reports")
    other = open_store(clock=clock).queue("reports")
    assert q.resume() is False  # it was not paused
    assert q.pause() is True
    assert other.pause() is False  # paused already, by another open
    assert other.resume() is True
    assert q.resume() is False and q.paused is False


def test_PAU_02_running_jobs_of_a_paused_queue_go_on_renew_their_leases_and_settle(store, kit, target, clock):
    q = store.queue("reports", lease="30s", dedupe="1d")
    began, release = threading.Event(), threading.Event()
    order: list = []

    def handler(payload, run):
        order.append(payload)
        began.set()
        assert release.wait(WAIT)

    q.work(handler)
    q.add("running", id="running")
    worker = Background(store.run_until_idle)
    assert began.wait(WAIT)
    q.pause()
    q.add("waiting", id="waiting")
    (lease,) = kit.leases(target)
    clock.advance("20s")  # past lease/2: the renewal is due
    wait_until(lambda: [l for l in kit.leases(target) if l.expires > lease.expires], "the lease was renewed")
    clock.advance("20s")  # past the first lease's end: it was renewed, so no cycle ends it
    release.set()
    worker.join()
    assert order == ["running"]
    assert q.get("running").state == "done" and q.get("running").attempt == 1
    assert q.get("waiting").state == "waiting"
    assert kit.leases(target) == []


def test_PAU_03_resume_starts_the_waiting_jobs_in_start_order(store, clock):
    q = store.queue("reports", concurrency=1)
    q.pause()
    q.add("low", priority=-1)
    q.add("plain-b", at=T - 5)
    q.add("high", priority=10)
    q.add("plain-a", at=T - 10)
    q.add("plain-c", at=T - 5)  # the same time as plain-b: added after it
    order = witnessed(q)
    run_until_idle(store)
    assert order == []
    q.resume()
    run_until_idle(store)
    assert order == ["high", "plain-a", "plain-b", "plain-c", "low"]


def test_PAU_04_a_second_process_stops_starting_within_a_second_of_another_s_pause_and_starts_again_on_resume(
        open_store):
    """Two opens of the store, each its own registration: one serves on the real clock, the other adds,
    pauses and resumes. Its runner sleeps with nothing due once paused: only the resume's notice wakes it."""
    serving, acting = open_store(), open_store()
    q = acting.queue("reports")
    starts: list[tuple[str, float]] = []
    late = threading.Event()  # a start later than the pause's kept time + 1 s
    kept: list[float] = []
    all_done = threading.Event()
    ids = [f"job-{i}" for i in range(60)]

    def handler(payload, run):
        now = time.monotonic()
        starts.append((run.id, now))
        if kept and now > kept[0] + 1.0:
            late.set()
        if len(starts) == len(ids):
            all_done.set()
        threading.Event().wait(0.01)  # a run takes a moment: the queue is busy when the pause comes

    serving.queue("reports").work(handler)
    server = Background(lambda: serving.serve(workers=2))
    try:
        for id in ids[:20]:
            q.add(id, id=id)
        wait_until(lambda: len(starts) >= 5, "the serving open started jobs")
        q.pause()
        kept.append(time.monotonic())
        for id in ids[20:]:  # adds are accepted, and each one's notice wakes the paused runner
            q.add(id, id=id)
        assert not late.wait(2.0), f"a job started later than 1 s after the pause was kept: {starts[-3:]}"
        paused_starts = len(starts)
        assert paused_starts < len(ids)
        q.resume()
        assert all_done.wait(WAIT), f"{len(starts)} of {len(ids)} jobs started after the resume"
        assert sorted(id for id, _ in starts) == sorted(ids), "every job ran once"
    finally:
        serving.close()
        server.join()


def test_PAU_05_a_repeating_job_runs_once_on_resume_for_the_times_it_missed(store, clock):
    q = store.queue("ticks")
    q.add({"tick": True}, id="tick", repeat=tinystore.every("1m"))
    order = witnessed(q)
    clock.advance("1m")
    run_until_idle(store)
    assert len(order) == 1
    q.pause()
    clock.advance("10m")  # ten of its times pass while the queue is paused
    run_until_idle(store)
    assert len(order) == 1
    assert q.get("tick").state == "waiting"
    q.resume()
    run_until_idle(store)
    assert len(order) == 2, "one run for the times it missed, none piled up"
    job = q.get("tick")
    assert job.state == "scheduled" and job.at.timestamp() == T + 12 * 60


def test_PAU_06_cancels_and_retries_are_accepted_while_paused(store, clock):
    q = store.queue("reports", attempts=1)
    order: list = []

    def handler(payload, run):
        order.append(payload)
        if payload == "broken":
            raise RuntimeError("broken")

    q.work(handler)
    q.add("broken", id="broken")
    run_until_idle(store)
    assert q.get("broken").state == "failed"
    q.add("unwanted", id="unwanted")
    q.pause()
    assert q.cancel("unwanted") is True
    assert q.get("unwanted") is None
    assert q.retry("broken") is True
    job = q.get("broken")
    assert (job.state, job.attempt) == ("waiting", 0)
    run_until_idle(store)
    assert order == ["broken"], "the retried job waits for the resume"
    q.resume()
    run_until_idle(store)
    assert order == ["broken", "broken"]


def test_PAU_07_declaring_the_queue_again_with_options_keeps_it_paused(store, open_store, clock):
    q = store.queue("reports", concurrency=2)
    q.pause()
    again = open_store(clock=clock).queue("reports", concurrency=5, attempts=3)
    assert again.paused is True
    assert (again.options.concurrency, again.options.attempts) == (5, 3)
    order = witnessed(store.queue("reports", timeout="5m"))
    q.add("waits")
    run_until_idle(store)
    assert order == [] and q.paused is True
    with pytest.raises(tinystore.InvalidArgument, match="paused"):
        store.queue("reports", paused=False)  # not an option: only resume() ends a pause
    assert q.paused is True


@pytest.mark.parametrize("name", ["Reports", "", "a b", "x" * 65])
def test_PAU_08_an_invalid_queue_name_is_refused_naming_the_queue_and_nothing_is_kept(store, name):
    with pytest.raises(tinystore.InvalidArgument) as caught:
        store.queue(name).pause()
    assert repr(name) in str(caught.value)
    assert store.queues() == []


def test_PAU_08_a_closed_store_s_queue_cannot_be_paused(open_store):
    store = open_store()
    q = store.queue("reports")
    store.close()
    with pytest.raises(tinystore.Closed):
        q.pause()


def test_PAU_09_a_paused_queue_s_cycle_claims_nothing_and_looks_again_only_when_a_lease_runs_out(store, kit, clock):
    """A worker does not spin on the due jobs of a paused queue: its cycle asks to look again only at a
    lease's end (which a cycle must still apply), or never; the resume's notice wakes it."""
    q = store.queue("reports", lease="30s")
    q.add("held", id="held")
    q.add("due", id="due")
    q.add("later", id="later", delay="1m")
    held = kit.claim_cycle(store, q, want=1, now=T)
    assert [c.id for c in held.claimed] == ["held"]
    q.pause()
    paused = kit.claim_cycle(store, q, want=5, now=T + 1)
    assert paused.claimed == [] and paused.wake_at == T + 30, "only the held lease's end"
    assert q.cancel("held")
    paused = kit.claim_cycle(store, q, want=5, now=T + 2)
    assert paused.claimed == [] and paused.wake_at is None, "nothing to look at until the resume"
    q.resume()
    resumed = kit.claim_cycle(store, q, want=5, now=T + 120)
    assert [c.id for c in resumed.claimed] == ["due", "later"]
