"""What an operator reads costs what it returns: ``stats()`` reads the jobs per queue and state the
store keeps, and a filtered page of ``queue.jobs`` reads an index of what it lists where one exists.

The stats tests compare what ``stats()`` says with a count of the job rows
themselves (``kit.counted_by_scan``, the grouped scan ``stats()`` no longer
makes), after every kind of write a job goes through: adds (one, many, in a
transaction committed or rolled back, an id already kept), claims, each
settlement, cancels, retries from failed, schedules, keep and dedupe running
out before and after maintenance. The paging test compares every filter's
pages with a walk of all the queue's jobs. On every backend, with a fake
clock; ``tests/crash/test_counts_crash.py`` checks the counts with processes
killed mid-run.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

import tinystore
from tinystore.testing import FakeClock

WAIT = 30


def agrees(store: tinystore.Store, kit: Any, target: str, clock: FakeClock) -> dict[str, dict[str, Any]]:
    """Assert that stats() says what a count of every job row says; return stats()."""
    stats = store.stats()
    scanned = kit.counted_by_scan(target, clock.now())
    for name, counted in scanned.items():
        got = stats[name]
        assert {k: got[k] for k in counted if k != "oldest_due"} == \
            {k: v for k, v in counted.items() if k != "oldest_due"}, name
        want_age = None if counted["oldest_due"] is None else clock.now() - counted["oldest_due"]
        assert got["oldest_due_age"] == (pytest.approx(want_age) if want_age is not None else None), name
    for name in set(stats) - set(scanned):
        assert all(stats[name][k] == 0 for k in ("scheduled", "waiting", "running", "done", "failed")), name
    assert not kit.inconsistencies(target)["state counts off the jobs"]
    return stats


def test_SPEC_10_stats_match_a_count_of_every_job_through_adds_runs_settlements_and_maintenance(
        store: tinystore.Store, kit: Any, target: str, clock: FakeClock) -> None:
    q = store.queue("mail", keep="1h", dedupe="10m", attempts=2, backoff=("1s", "1s"))
    g = store.queue("per_user", group_concurrency=1, keep="1h")
    outcomes = {"ok": None, "boom": "raise", "again": "retry", "later": "snooze", "stop": "fail"}

    def handler(payload: Any, run: Any) -> Any:
        what = outcomes.get(payload.get("do"))
        if what == "raise":
            raise RuntimeError("no answer")
        if what == "retry":
            return run.retry("10s")
        if what == "snooze":
            return run.snooze("1m")
        if what == "fail":
            return run.fail("not this one")
        return payload.get("n")

    q.work(handler)
    g.work(handler)
    agrees(store, kit, target, clock)

    q.add({"do": "ok", "n": 1}, id="one")
    q.add({"do": "ok"}, id="one")  # kept: adds nothing
    q.add_many([{"do": name} for name in outcomes] + [tinystore.Job({"do": "ok"}, delay="1h")])
    g.add_many([tinystore.Job({"do": "ok"}, group=f"u{n % 3}", delay=f"{n % 2}m") for n in range(9)])
    stats = agrees(store, kit, target, clock)
    assert (stats["mail"]["waiting"], stats["mail"]["scheduled"]) == (6, 1)
    assert (stats["per_user"]["waiting"], stats["per_user"]["scheduled"]) == (5, 4)

    with store.transaction() as tx:
        q.add({"do": "ok"}, id="committed", tx=tx)
    with pytest.raises(ZeroDivisionError):
        with store.transaction() as tx:
            q.add({"do": "ok"}, id="rolled-back", tx=tx)
            1 / 0
    agrees(store, kit, target, clock)

    store.run_until_idle()
    stats = agrees(store, kit, target, clock)
    assert stats["mail"]["done"] == 3 and stats["mail"]["failed"] == 1  # one, ok and committed; stop

    clock.advance("2s")  # boom's backoff and a group's next job are due
    store.run_until_idle()
    agrees(store, kit, target, clock)

    assert q.retry(q.jobs(state="failed")[0].id)  # from the page: failed -> waiting
    agrees(store, kit, target, clock)
    assert q.cancel(q.jobs(state="scheduled")[0].id)
    agrees(store, kit, target, clock)

    for step in ("30s", "1m", "10m", "1h"):  # retries and snoozes come due; dedupe, then keep, run out
        clock.advance(step)
        store.run_until_idle()
        agrees(store, kit, target, clock)  # expired, not yet removed: no longer counted
        store.maintain()
        agrees(store, kit, target, clock)


def test_SPEC_10_stats_count_running_jobs_and_a_cancel_of_one_while_it_runs(
        store: tinystore.Store, kit: Any, target: str, clock: FakeClock) -> None:
    q = store.queue("slow", concurrency=1)  # a runs, b waits: nothing moves between stats() and the scan
    started, release = threading.Event(), threading.Event()

    def handler(payload: Any, run: Any) -> None:
        started.set()
        release.wait(WAIT)

    q.work(handler)
    q.add({}, id="a")
    q.add({}, id="b")
    worker = threading.Thread(target=store.run_until_idle)
    worker.start()
    try:
        assert started.wait(WAIT)
        stats = agrees(store, kit, target, clock)
        assert (stats["slow"]["running"], stats["slow"]["waiting"]) == (1, 1)
        assert q.cancel("a") and q.cancel("b")
        agrees(store, kit, target, clock)
    finally:
        release.set()
        worker.join(WAIT)
    agrees(store, kit, target, clock)
    assert store.stats()["slow"]["running"] == 0


def test_SPEC_10_stats_count_schedules_between_and_after_their_runs(
        store: tinystore.Store, kit: Any, target: str, clock: FakeClock) -> None:
    store.schedule("nightly", cron="0 3 * * *", zone="UTC", payload={"n": 1})
    store.schedule("often", every="15m")
    store.queue("often").work(lambda payload, run: None)
    store.queue("nightly").work(lambda payload, run: None)
    stats = agrees(store, kit, target, clock)
    assert stats["nightly"]["repeating"] == 1 and stats["nightly"]["scheduled"] == 1
    store.schedule("nightly", cron="30 4 * * *", zone="UTC", payload={"n": 2})  # declared again: one job
    for _ in range(3):
        clock.advance("1d")
        store.run_until_idle()
        stats = agrees(store, kit, target, clock)
        assert (stats["nightly"]["repeating"], stats["often"]["repeating"]) == (1, 1)
    store.queue("often").cancel("often")
    stats = agrees(store, kit, target, clock)
    assert stats["often"]["repeating"] == 0

    store.queue("report").add({}, id="report", delay="1h")  # a job that runs once, named as a schedule
    store.schedule("report", every="1d")  # the declaration makes it repeat: counted as repeating
    assert agrees(store, kit, target, clock)["report"]["repeating"] == 1


def test_SPEC_10_a_store_opened_by_this_version_counts_the_jobs_it_already_held(
        kit: Any, target: str, clock: FakeClock) -> None:
    with tinystore.open(target, clock=clock) as store:
        old = store.queue("old", dedupe="1h", keep="1h", attempts=1, group_concurrency=1)
        old.work(lambda payload, run: 1 / payload["d"])
        old.add_many([tinystore.Job({"d": n % 4}, group=f"g{n % 2}" if n % 3 else None, delay=f"{n % 3}m")
                      for n in range(30)])
        store.run_until_idle()  # done, failed (division by zero), grouped and scheduled ones waiting
        store.schedule("nightly", cron="0 3 * * *", zone="UTC")
    kit.forget_queue_counts(target)  # as a store written before the counts were kept: the migration counts
    with tinystore.open(target, clock=clock) as store:
        stats = agrees(store, kit, target, clock)
        assert stats["old"]["done"] and stats["old"]["failed"] and stats["old"]["scheduled"]
        assert stats["nightly"]["repeating"] == 1


def test_SPEC_10_pages_of_each_filter_list_the_jobs_that_match_in_id_order_as_a_walk_of_every_job_would(
        store: tinystore.Store, kit: Any, target: str, clock: FakeClock) -> None:
    # Failed pages read an index of failed jobs, running ones the leases, a group's jobs an index of
    # grouped jobs: each must list what a walk of all the queue's jobs, filtered, lists.
    q = store.queue("mail", attempts=1, keep="1h", dedupe="1h", concurrency=3)
    hold, held = threading.Event(), threading.Semaphore(0)

    def handler(payload: Any, run: Any) -> None:
        if payload.get("fail"):
            raise RuntimeError("no")
        if payload.get("hold"):
            held.release()
            hold.wait(WAIT)

    def group(n: int) -> Any:
        return f"g{n % 3}" if n % 2 else None

    q.work(handler)
    q.add_many([tinystore.Job({"fail": True}, id=f"old-{n:02}", group=group(n)) for n in range(10)])
    store.run_until_idle()
    clock.advance("61m")  # these failed jobs are past keep, not yet removed: listed nowhere
    q.add_many([tinystore.Job({"fail": n % 5 == 0}, id=f"job-{n:02}", group=group(n),
                              delay="1h" if n % 7 == 0 else None) for n in range(80)])
    store.run_until_idle()  # done, failed, and scheduled
    q.add_many([tinystore.Job({"hold": True}, id=f"held-{n}", group=group(n)) for n in range(3)])
    worker = threading.Thread(target=store.run_until_idle)
    worker.start()
    try:
        for _ in range(3):
            assert held.acquire(timeout=WAIT)
        q.add_many([tinystore.Job({}, id=f"wait-{n:02}", group=group(n)) for n in range(12)])  # no room: waiting
        every = kit.listed_by_scan(target, "mail", clock.now())  # (id, state, group) of each kept job
        assert not [id for id, _, _ in every if id.startswith("old-")]
        assert {st for _, st, _ in every} == {"scheduled", "waiting", "running", "done", "failed"}
        for state in (None, "scheduled", "waiting", "running", "done", "failed"):
            for grp in (None, "g0", "g1", "g2"):
                want = [id for id, st, g in every if state in (None, st) and grp in (None, g)]
                got, after = [], None
                while True:
                    page = q.jobs(state=state, group=grp, limit=7, after=after)
                    got += [j.id for j in page]
                    if len(page) < 7:
                        break
                    after = page[-1].id
                assert got == want, (state, grp)
    finally:
        hold.set()
        worker.join(WAIT)


def test_each_attempt_s_start_end_and_error_are_kept_the_last_20_and_a_failed_job_s_end_is_its_last(store, clock):
    from helpers import run_until_idle

    q = store.queue("flaky", attempts=23, backoff=("1s", "1s"))

    @q.work
    def handler(payload, run):
        clock.advance("2s")  # each attempt takes two seconds of the store's clock
        raise ValueError(f"boom {run.attempt}")

    q.add({}, id="j")
    began = []
    for _ in range(23):
        began.append(clock.now())
        run_until_idle(store)
        clock.advance("2s")  # past the backoff
    job, detail = q.detail("j")
    assert (job.state, job.attempt) == ("failed", 23)
    kept = detail.attempts
    assert [a.attempt for a in kept] == list(range(4, 24))  # the last 20
    for a in kept:
        assert (a.began, a.ended) == (began[a.attempt - 1], began[a.attempt - 1] + 2)
        assert a.error.startswith(f"ValueError: boom {a.attempt}\n")


def test_a_job_that_ran_once_keeps_its_attempt_with_no_error_and_a_job_that_leaves_takes_its_attempts_along(
        store, clock, kit, target):
    from helpers import run_until_idle

    kept = store.queue("kept", dedupe="1h")
    kept.work(lambda payload, run: clock.advance("1s"))
    kept.add({}, id="k")
    start = clock.now()
    run_until_idle(store)
    (record,) = kept.detail("k")[1].attempts
    assert (record.attempt, record.began, record.ended, record.error) == (1, start, start + 1, None)
    clock.advance("2h")  # past dedupe: the job leaves, with its attempts
    store.maintain()
    assert kept.get("k") is None
    assert kit._rows(target, "SELECT count(*) FROM tinystore_attempts") == [(0,)]


def test_an_attempt_whose_lease_ran_out_is_kept_with_its_end_and_the_lost_lease_as_its_error(store, clock, kit):
    from helpers import run_until_idle

    q = store.queue("slow", lease="30s", dedupe="1h")
    q.add({}, id="j")
    kit.claim_cycle(store, q, 1, clock.now())  # claimed, and never settled: as a worker that stalled
    clock.advance("1m")
    q.work(lambda payload, run: None)
    run_until_idle(store)
    lost, second = q.detail("j")[1].attempts
    assert (lost.attempt, lost.began, lost.ended) == (1, None, clock.now())
    assert lost.error.startswith("lease ended without a settlement")
    assert (second.attempt, second.error) == (2, None)
