"""Ids and retention (JOB-10, JOB-11), retry, listing and stats, on a real store file and a fake clock.

Time is moved with the FakeClock, never slept: seven days of `keep` pass in
one call. Handlers run with `store.run_until_idle()` in the test's thread.
"""

from __future__ import annotations

from typing import Any

import pytest

import kits
import tinystore
from tinystore.testing import FakeClock


def job_rows(kit: kits.Kit, target: str, id: str) -> int:
    """How many job rows with this id the store holds (in any queue, past its keep or not)."""
    return sum(1 for row in kit.job_rows(target) if row.id == id)


def failing(queue: tinystore.Queue, **steps: Any) -> list[int]:
    """Register a handler that keeps the given steps, then raises; returns the attempts it saw."""
    seen: list[int] = []

    @queue.work
    def handler(payload: Any, run: tinystore.Run) -> None:
        seen.append(run.attempt)
        for name, answer in steps.items():
            run.step(name, lambda: answer)
        raise RuntimeError(f"boom {payload}")
    return seen


# JOB-10: an id names one job while the job is kept


def test_JOB_10_adding_the_id_of_a_scheduled_job_adds_nothing_and_returns_it(
        store: tinystore.Store, kit: kits.Kit, target: str) -> None:
    q = store.queue("mail")
    first = q.add({"v": 1}, id="a", delay="10m")
    again = q.add({"v": 2}, id="a")
    assert first.added and first.state == "scheduled"
    assert not again.added
    assert (again.state, again.payload, again.at) == ("scheduled", {"v": 1}, first.at)
    assert len(kit.job_rows(target)) == 1


def test_JOB_10_adding_the_id_of_a_waiting_job_adds_nothing_and_returns_it_with_its_place(
        store: tinystore.Store) -> None:
    q = store.queue("mail")
    q.add({"v": 0}, id="before")
    q.add({"v": 1}, id="a")
    again = q.add({"v": 2}, id="a", delay="1h")
    assert not again.added
    assert (again.state, again.payload, again.ahead) == ("waiting", {"v": 1}, 1)
    assert q.get("a").state == "waiting"


def test_JOB_10_adding_the_id_of_a_running_job_adds_nothing_and_returns_it_running(
        store: tinystore.Store) -> None:
    q = store.queue("mail")
    seen: list[tinystore.JobState] = []

    @q.work
    def handler(payload: Any, run: tinystore.Run) -> None:
        seen.append(q.add({"v": 2}, id="a"))  # while this attempt holds the job

    q.add({"v": 1}, id="a")
    store.run_until_idle()
    [again] = seen
    assert not again.added
    assert (again.state, again.payload, again.attempt) == ("running", {"v": 1}, 1)


def test_JOB_10_adding_the_id_of_a_failed_job_adds_nothing_and_returns_it_with_its_error(
        store: tinystore.Store) -> None:
    q = store.queue("mail", attempts=1)
    failing(q)
    q.add({"v": 1}, id="a")
    store.run_until_idle()
    again = q.add({"v": 2}, id="a")
    assert not again.added
    assert (again.state, again.payload, again.attempt) == ("failed", {"v": 1}, 1)
    assert "RuntimeError: boom {'v': 1}" in again.error
    store.run_until_idle()
    assert q.get("a").state == "failed"  # and it did not run again


def test_JOB_10_adding_the_id_of_a_done_job_within_dedupe_adds_nothing(
        store: tinystore.Store, clock: FakeClock) -> None:
    q = store.queue("mail", dedupe="1h")
    runs: list[Any] = []
    q.work(lambda payload, run: runs.append(payload))
    q.add({"v": 1}, id="a")
    store.run_until_idle()
    clock.advance("59m")
    again = q.add({"v": 2}, id="a")
    store.run_until_idle()
    assert not again.added
    assert (again.state, again.payload) == ("done", {"v": 1})
    assert runs == [{"v": 1}]


def test_JOB_10_without_dedupe_a_done_job_is_removed_at_once_so_its_id_adds_anew(
        store: tinystore.Store, kit: kits.Kit, target: str) -> None:
    q = store.queue("mail")
    runs: list[Any] = []
    q.work(lambda payload, run: runs.append(payload))
    q.add({"v": 1}, id="a")
    store.run_until_idle()
    assert q.get("a") is None
    assert job_rows(kit, target, "a") == 0
    again = q.add({"v": 2}, id="a")
    assert again.added and again.state == "waiting" and again.attempt == 0
    store.run_until_idle()
    assert runs == [{"v": 1}, {"v": 2}]


def test_JOB_10_ids_are_per_queue(store: tinystore.Store) -> None:
    a = store.queue("mail").add({"v": 1}, id="same")
    b = store.queue("sms").add({"v": 2}, id="same")
    assert a.added and b.added
    assert store.queue("sms").get("same").payload == {"v": 2}


def test_JOB_10_add_many_returns_one_state_per_item_in_order(store: tinystore.Store) -> None:
    q = store.queue("mail")
    q.add({"v": 0}, id="kept", delay="1h")
    states = q.add_many([{"v": 1}, tinystore.Job({"v": 2}, id="kept"),
                         tinystore.Job({"v": 3}, id="new", delay="5m", group="g")])
    assert [s.added for s in states] == [True, False, True]
    assert [s.payload for s in states] == [{"v": 1}, {"v": 0}, {"v": 3}]
    assert [s.state for s in states] == ["waiting", "scheduled", "scheduled"]
    assert states[2].group == "g" and states[2].id == "new"
    assert q.get(states[0].id).payload == {"v": 1}


def test_JOB_10_an_id_given_twice_in_one_batch_adds_the_first_and_returns_it_for_the_second(
        store: tinystore.Store, kit: kits.Kit, target: str) -> None:
    q = store.queue("mail")
    first, second = q.add_many([tinystore.Job({"v": 1}, id="x"), tinystore.Job({"v": 2}, id="x", delay="1h")])
    assert first.added and not second.added
    assert first.payload == second.payload == {"v": 1}
    assert second.state == "waiting"
    assert job_rows(kit, target, "x") == 1


@pytest.mark.parametrize("bad", [
    tinystore.Job(object(), id="bad-payload"),
    tinystore.Job({"v": 1}, id="x" * 1025),
    tinystore.Job({"v": 1}, id="bad-at", at="tomorrow"),
    tinystore.Job({"v": "x" * (1024 * 1024)}, id="too-big"),
], ids=["not-json", "long-id", "bad-at", "payload-over-1MiB"])
def test_JOB_10_add_many_with_one_bad_item_writes_nothing(
        store: tinystore.Store, bad: tinystore.Job, kit: kits.Kit, target: str) -> None:
    q = store.queue("mail")
    with pytest.raises(tinystore.InvalidArgument):
        q.add_many([tinystore.Job({"v": 0}, id="good-1"), bad, tinystore.Job({"v": 2}, id="good-2")])
    assert q.get("good-1") is None and q.get("good-2") is None
    assert q.jobs() == []
    assert len(kit.job_rows(target)) == 0


def test_JOB_10_add_many_in_a_transaction_that_rolls_back_writes_nothing(
        store: tinystore.Store, kit: kits.Kit, target: str) -> None:
    q = store.queue("mail")
    with pytest.raises(RuntimeError):
        with store.transaction() as tx:
            q.add_many([{"v": 1}, tinystore.Job({"v": 2}, id="b")], tx=tx)
            raise RuntimeError("the application changed its mind")
    assert len(kit.job_rows(target)) == 0


# JOB-11: failed jobs are kept for `keep`, done jobs for `dedupe`


def test_JOB_11_a_failed_job_is_kept_with_its_error_for_seven_days_by_default(
        store: tinystore.Store, clock: FakeClock) -> None:
    q = store.queue("mail", attempts=1)
    failing(q)
    q.add({"v": 2}, id="b")
    store.run_until_idle()
    clock.advance(7 * 86400 - 1)
    kept = q.get("b")
    assert kept is not None and kept.state == "failed"
    assert kept.error.startswith("RuntimeError: boom {'v': 2}")
    assert [j.id for j in q.jobs(state="failed")] == ["b"]
    clock.advance("2s")
    assert q.get("b") is None


def test_JOB_11_past_keep_a_failed_job_is_gone_and_its_id_free_before_maintenance_runs(
        store: tinystore.Store, clock: FakeClock, kit: kits.Kit, target: str) -> None:
    q = store.queue("mail", attempts=1, keep="1h")
    failing(q, fetched="kept answer")
    q.add({"v": 1}, id="a")
    store.run_until_idle()
    clock.advance("1h1s")
    assert job_rows(kit, target, "a") == 1  # maintenance has not run: the row is still in the file
    assert q.get("a") is None
    assert q.jobs() == [] and q.jobs(state="failed") == []
    assert store.stats()["mail"]["failed"] == 0
    assert q.retry("a") is False
    again = q.add({"v": 2}, id="a")
    assert again.added and (again.state, again.attempt, again.error) == ("waiting", 0, None)
    assert len(kit.steps(target)) == 0  # the old job's steps left with it


def test_JOB_11_a_done_job_is_kept_for_dedupe_then_gone_and_its_id_free(
        store: tinystore.Store, clock: FakeClock) -> None:
    q = store.queue("mail", dedupe="1d")
    q.work(lambda payload, run: None)
    q.add({"v": 1}, id="a")
    store.run_until_idle()
    clock.advance("23h59m")
    assert q.get("a").state == "done"
    assert [j.id for j in q.jobs(state="done")] == ["a"]
    assert store.stats()["mail"]["done"] == 1
    clock.advance("2m")
    assert q.get("a") is None
    assert store.stats()["mail"]["done"] == 0
    assert q.add({"v": 2}, id="a").added


def test_JOB_11_maintain_removes_rows_payloads_and_steps_past_their_time_in_batches(
        open_store: Any, clock: FakeClock, kit: kits.Kit, target: str) -> None:
    store = open_store(clock=clock, durability="off")  # a thousand jobs: no fsync per commit
    failed = store.queue("failed", attempts=1, keep="1h")
    failing(failed, first="an answer", second=[1, 2, 3])
    done = store.queue("done", dedupe="10m")

    @done.work
    async def finish(payload: Any, run: tinystore.AsyncRun) -> None:
        return None

    n = 1001  # more than two batches of 500
    failed.add_many([tinystore.Job({"secret": i}, id=f"f{i}") for i in range(3)])
    done.add_many([tinystore.Job({"secret": i}, id=f"d{i}") for i in range(n)])
    store.run_until_idle()
    assert len(kit.steps(target)) == 2 * 3  # kept under the failed jobs
    assert store.maintain() == {"removed": 0}  # nothing is past its time yet

    clock.advance("30m")
    later = failed.add({"n": "later"}, id="later")  # fails within its keep: stays
    store.run_until_idle()
    waiting = done.add({"n": "waiting"}, id="waiting", delay="1d")
    assert later.added and waiting.added
    assert len(kit.job_rows(target)) == n + 3 + 2

    clock.advance("31m")
    assert store.maintain() == {"removed": n + 3}
    assert [(row.queue, row.id) for row in kit.job_rows(target)] == [("done", "waiting"), ("failed", "later")]
    assert [row for row in kit.job_rows(target) if "secret" in row.payload] == []
    assert [step.answer for step in kit.steps(target)] == ['"an answer"', "[1,2,3]"]  # only the steps of "later"
    assert failed.get("later").state == "failed" and done.get("waiting").state == "scheduled"
    assert store.maintain() == {"removed": 0}


def test_JOB_11_maintain_never_removes_a_running_or_queued_job(store: tinystore.Store, clock: FakeClock) -> None:
    q = store.queue("mail", keep="1s", dedupe="1s")
    seen: list[dict] = []

    @q.work
    def handler(payload: Any, run: tinystore.Run) -> None:
        clock.advance("10s")  # past keep and dedupe, within the lease and the timeout
        seen.append(store.maintain())

    q.add({"v": 1}, id="running")
    q.add({"v": 2}, id="scheduled", delay="30d")
    store.run_until_idle()
    assert seen == [{"removed": 0}]
    assert q.get("running").state == "done"
    assert q.get("scheduled").state == "scheduled"


# retry


def test_retry_runs_a_failed_job_again_with_its_attempts_from_zero(store: tinystore.Store, clock: FakeClock) -> None:
    q = store.queue("mail", attempts=2, backoff=("1s", "1s"))
    seen = failing(q)
    q.add({"v": 1}, id="a")
    store.run_until_idle()
    clock.advance("2s")
    store.run_until_idle()
    assert seen == [1, 2] and q.get("a").state == "failed"

    assert q.retry("a") is True
    state = q.get("a")
    assert (state.state, state.attempt) == ("waiting", 0)
    store.run_until_idle()
    clock.advance("2s")
    store.run_until_idle()
    assert seen == [1, 2, 1, 2]  # a full set of attempts again
    assert (q.get("a").state, q.get("a").attempt) == ("failed", 2)


def test_retry_takes_only_a_failed_job(store: tinystore.Store) -> None:
    q = store.queue("mail")
    q.add({"v": 1}, id="waiting")
    q.add({"v": 1}, id="scheduled", delay="1h")
    assert q.retry("waiting") is False
    assert q.retry("scheduled") is False
    assert q.retry("nobody") is False
    assert (q.get("scheduled").state, q.get("waiting").state) == ("scheduled", "waiting")


def test_retry_of_a_failed_job_in_a_group_lets_the_group_run_it(store: tinystore.Store) -> None:
    q = store.queue("mail", attempts=1, group_concurrency=1)
    answers = [RuntimeError("first"), None]

    @q.work
    def handler(payload: Any, run: tinystore.Run) -> None:
        answer = answers.pop(0)
        if answer is not None:
            raise answer

    q.add({"v": 1}, id="a", group="g")
    store.run_until_idle()
    assert q.get("a").state == "failed"
    assert q.retry("a")
    store.run_until_idle()
    assert q.get("a") is None and answers == []


# listing and stats


def test_jobs_pages_through_a_queue_in_the_order_jobs_were_added(store: tinystore.Store) -> None:
    q = store.queue("mail")
    store.queue("other").add({"v": "x"}, id="elsewhere")
    ids = [f"j{i}" for i in range(7)]
    q.add_many([tinystore.Job({"i": i}, id=id) for i, id in enumerate(ids)])
    pages, after = [], None
    while True:
        page = q.jobs(limit=3, after=after)
        if not page:
            break
        pages.append([j.id for j in page])
        after = page[-1].id
    assert pages == [ids[0:3], ids[3:6], ids[6:7]]
    assert all(isinstance(j, tinystore.JobState) for j in q.jobs())
    assert q.jobs(after=ids[-1]) == []  # after= need not name a job that is still there


def test_jobs_pages_on_when_the_last_job_of_a_page_left_meanwhile(store: tinystore.Store) -> None:
    q = store.queue("mail")
    q.add_many([tinystore.Job({"i": i}, id=f"j{i}") for i in range(5)])
    page = q.jobs(limit=2)
    assert [j.id for j in page] == ["j0", "j1"]
    assert q.cancel(page[-1].id)  # it leaves while the operator reads the page
    assert [j.id for j in q.jobs(limit=2, after=page[-1].id)] == ["j2", "j3"]


def test_jobs_filters_by_state_and_group(store: tinystore.Store, clock: FakeClock) -> None:
    q = store.queue("mail", attempts=1)
    failing(q)
    q.add({"v": 1}, id="fails", group="g1")
    store.run_until_idle()
    q.add({"v": 2}, id="w1", group="g1")
    q.add({"v": 3}, id="w2", group="g2")
    q.add({"v": 4}, id="w3")
    q.add({"v": 5}, id="s1", delay="1h", group="g1")

    def ids(**kw: Any) -> list[str]:
        return [j.id for j in q.jobs(**kw)]
    assert ids() == ["fails", "s1", "w1", "w2", "w3"]  # in the order of their ids
    assert ids(state="waiting") == ["w1", "w2", "w3"]
    assert ids(state="scheduled") == ["s1"]
    assert ids(state="failed") == ["fails"]
    assert ids(state="running") == [] and ids(state="done") == []
    assert ids(group="g1") == ["fails", "s1", "w1"]
    assert ids(state="waiting", group="g1") == ["w1"]
    assert ids(state="waiting", limit=2, after="w1") == ["w2", "w3"]
    clock.advance("1h")
    assert ids(state="waiting", group="g1") == ["s1", "w1"]  # the state is read from the time
    for bad in ({"state": "cancelled"}, {"state": "bogus"}, {"limit": 0}, {"limit": True}):
        with pytest.raises(tinystore.InvalidArgument):
            q.jobs(**bad)


def test_stats_count_jobs_per_queue_and_state_with_the_age_of_the_oldest_due_job(
        store: tinystore.Store, clock: FakeClock) -> None:
    mail = store.queue("mail", attempts=1, dedupe="1h")
    sms = store.queue("sms")
    store.queue("idle")
    outcomes = {"ok": None, "bad": RuntimeError("no")}

    @mail.work
    def handler(payload: Any, run: tinystore.Run) -> None:
        if outcomes[payload] is not None:
            raise outcomes[payload]

    mail.add("ok", id="ok")
    mail.add("bad", id="bad")
    store.run_until_idle()
    mail.add("ok", id="w1")
    clock.advance("30s")
    mail.add("ok", id="w2")
    mail.add("ok", id="s1", delay="1m")
    sms.add({}, id="x", delay="5m")
    clock.advance("10s")

    stats = store.stats()
    m = stats["mail"]
    assert {k: m[k] for k in ("scheduled", "waiting", "running", "done", "failed")} == {
        "scheduled": 1, "waiting": 2, "running": 0, "done": 1, "failed": 1}
    assert m["oldest_due_age"] == pytest.approx(40.0)
    s = stats["sms"]
    assert (s["scheduled"], s["waiting"], s["oldest_due_age"]) == (1, 0, None)
    assert stats["idle"]["waiting"] == 0 and stats["idle"]["oldest_due_age"] is None
    clock.advance("5m")
    assert store.stats()["sms"]["waiting"] == 1
    assert store.stats()["sms"]["oldest_due_age"] == pytest.approx(10.0)


def test_stats_count_a_running_job(store: tinystore.Store) -> None:
    q = store.queue("mail")
    seen: list[dict] = []
    q.work(lambda payload, run: seen.append(store.stats()["mail"]))
    q.add({}, id="a")
    q.add({}, id="b", delay="1h")
    store.run_until_idle()
    [during] = seen
    assert (during["running"], during["waiting"], during["scheduled"]) == (1, 0, 1)
