"""Schedules and repeating jobs in a store (SPEC §8), on every backend, on a fake clock.

Days pass with ``FakeClock.set``/``advance``; handlers run with
``run_until_idle``, which runs what is due now. A witness list in each test
records every run's ``run.at`` and attempt.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Callable
from zoneinfo import ZoneInfo

import pytest

import kits
import tinystore
from tinystore.testing import FakeClock

UTC = timezone.utc


def utc(*args: int) -> float:
    return datetime(*args, tzinfo=UTC).timestamp()


def local(zone: str, *args: int, fold: int = 0) -> datetime:
    return datetime(*args, tzinfo=ZoneInfo(zone), fold=fold)


def recording(queue: tinystore.Queue, answer: Callable[[Any, Any], Any] = lambda payload, run: None) -> list:
    """Register a handler that records (run.at, attempt, payload) of every run, then answers as told."""
    runs: list = []

    @queue.work
    def handler(payload: Any, run: tinystore.Run) -> Any:
        runs.append((run.at, run.attempt, payload))
        return answer(payload, run)
    return runs


def run_through(store: tinystore.Store, clock: FakeClock, queue: tinystore.Queue, id: str, times: int) -> None:
    """Move the clock to the job's time and run what is due, ``times`` times. (A millisecond past it: a
    datetime keeps microseconds, so the time read back may be a hair before the time kept.)"""
    for _ in range(times):
        clock.set(queue.get(id).at.timestamp() + 0.001)
        store.run_until_idle()


# Declaring


def test_SPEC_8_a_cron_schedule_runs_at_its_local_times_and_get_shows_its_rule_and_next_time(
        store: tinystore.Store, clock: FakeClock) -> None:
    clock.set(utc(2026, 3, 1, 12, 0))
    nightly = store.schedule("nightly-report", cron="10 3 * * *", zone="Europe/Moscow", payload={"full": True})
    runs = recording(nightly)
    job = nightly.get("nightly-report")
    assert (job.state, job.payload, str(job.repeat)) == ("scheduled", {"full": True},
                                                        'cron "10 3 * * *" in Europe/Moscow')
    assert job.repeat == tinystore.cron("10 3 * * *", zone="Europe/Moscow")
    assert job.at == datetime(2026, 3, 2, 0, 10, tzinfo=UTC)  # 03:10 in Moscow, UTC+3
    run_through(store, clock, nightly, "nightly-report", 3)
    assert [at for at, _, _ in runs] == [datetime(2026, 3, d, 0, 10, tzinfo=UTC) for d in (2, 3, 4)]
    after = nightly.get("nightly-report")
    assert (after.state, after.attempt, after.at) == ("scheduled", 0, datetime(2026, 3, 5, 0, 10, tzinfo=UTC))


def test_SPEC_8_an_every_schedule_runs_at_each_multiple_of_its_period_since_the_epoch(
        store: tinystore.Store, clock: FakeClock) -> None:
    clock.set(utc(2026, 5, 1, 9, 7, 30))
    sync = store.schedule("crm-sync", every="15m", payload={"full": False}, timeout="5m")
    assert sync.options.timeout == 300
    runs = recording(sync)
    run_through(store, clock, sync, "crm-sync", 4)
    assert [at.strftime("%H:%M:%S") for at, _, _ in runs] == ["09:15:00", "09:30:00", "09:45:00", "10:00:00"]
    assert str(sync.get("crm-sync").repeat) == "every 15m"


def test_SPEC_8_schedule_arguments_are_checked_and_a_bad_one_writes_nothing(store: tinystore.Store) -> None:
    for kwargs, words in (({}, "cron= or every="), ({"cron": "* * * * *", "every": "1m"}, "cron= or every="),
                          ({"cron": "* * * * *"}, "zone"), ({"cron": "0 0 30 feb *", "zone": "UTC"}, "30 feb"),
                          ({"cron": "61 * * * *", "zone": "UTC"}, "61"),
                          ({"cron": "0 8 * * *", "zone": "Mars/Olympus"}, "Mars/Olympus"),
                          ({"every": "1h", "zone": "UTC"}, "zone="), ({"every": "0s"}, "every")):
        with pytest.raises(tinystore.InvalidArgument) as refused:
            store.schedule("nightly", **kwargs)
        assert words in str(refused.value) and "nightly" in str(refused.value)
    assert "nightly" not in store.queues()


def test_SPEC_8_the_newest_declaration_sets_the_rule_and_the_payload(
        store: tinystore.Store, clock: FakeClock, open_store: Callable[..., tinystore.Store]) -> None:
    clock.set(utc(2026, 6, 1, 10, 0))
    store.schedule("digest", every="1h", payload={"v": 1})
    assert store.queue("digest").get("digest").at == datetime(2026, 6, 1, 11, 0, tzinfo=UTC)
    other = open_store(clock=clock)  # another process's declaration, a deploy later
    other.schedule("digest", every="1h", payload={"v": 2})
    job = store.queue("digest").get("digest")
    assert (job.payload, job.at, job.added) == ({"v": 2}, datetime(2026, 6, 1, 11, 0, tzinfo=UTC), False)
    other.schedule("digest", cron="30 10 * * *", zone="UTC", payload={"v": 3})
    job = store.queue("digest").get("digest")  # a new rule: the job waits for the new rule's first time
    assert (job.payload, job.at, str(job.repeat)) == ({"v": 3}, datetime(2026, 6, 1, 10, 30, tzinfo=UTC),
                                                     'cron "30 10 * * *" in UTC')
    assert len(store.queue("digest").jobs()) == 1


# Running


def test_SPEC_8_a_store_closed_all_night_runs_each_repeating_job_once_when_it_opens(
        store: tinystore.Store, clock: FakeClock) -> None:
    clock.set(utc(2026, 1, 10, 0, 0))
    minutely = store.schedule("minutely", cron="* * * * *", zone="UTC")
    runs = recording(minutely)
    clock.advance("10h")  # six hundred missed times
    store.run_until_idle()
    assert len(runs) == 1 and runs[0][0] == datetime(2026, 1, 10, 0, 1, tzinfo=UTC)
    assert minutely.get("minutely").at == datetime(2026, 1, 10, 10, 1, tzinfo=UTC)  # the first after now
    store.run_until_idle()
    assert len(runs) == 1


def test_SPEC_8_a_run_longer_than_the_period_never_overlaps_itself_and_skips_the_times_it_spanned(
        store: tinystore.Store, clock: FakeClock) -> None:
    clock.set(utc(2026, 1, 10, 0, 0))
    sync = store.schedule("sync", every="15m", timeout=None)
    states: list[str] = []

    def long_run(payload: Any, run: Any) -> None:
        states.append(sync.get("sync").state)  # one job: running while it runs, so never claimed twice
        clock.advance("40m")  # the run takes 40 minutes: 00:15 to 00:55

    runs = recording(sync, long_run)
    clock.set(utc(2026, 1, 10, 0, 15))
    store.run_until_idle()
    assert states == ["running"] and len(runs) == 1
    assert sync.get("sync").at == datetime(2026, 1, 10, 1, 0, tzinfo=UTC)


def test_SPEC_8_a_retry_before_the_next_time_is_made_and_one_that_would_pass_it_is_not(
        store: tinystore.Store, clock: FakeClock) -> None:
    clock.set(utc(2026, 2, 1, 0, 30))
    hourly = store.queue("hourly", attempts=5, backoff=("30m", "2h"))

    def flaky(payload: Any, run: Any) -> None:
        raise RuntimeError(f"upstream down at attempt {run.attempt}")

    runs = recording(hourly, flaky)
    hourly.add({}, id="h", repeat=tinystore.every("1h"))
    clock.set(utc(2026, 2, 1, 1, 0))
    store.run_until_idle()
    first = hourly.get("h")  # backoff 30 min ±10 %: before 02:00, so it is made
    assert (first.state, first.attempt) == ("scheduled", 1)
    assert utc(2026, 2, 1, 1, 27) <= first.at.timestamp() <= utc(2026, 2, 1, 1, 33)
    clock.set(first.at.timestamp() + 0.001)
    store.run_until_idle()
    second = hourly.get("h")  # backoff 1 h would pass 02:00: it waits for 02:00, its attempts from zero
    assert (second.state, second.attempt, second.at) == ("scheduled", 0, datetime(2026, 2, 1, 2, 0, tzinfo=UTC))
    assert "upstream down at attempt 2" in second.error
    assert [a for _, a, _ in runs] == [1, 2]


def test_SPEC_8_failing_for_good_keeps_the_schedule_and_its_error_until_a_run_succeeds(
        store: tinystore.Store, clock: FakeClock) -> None:
    clock.set(utc(2026, 2, 1, 0, 30))
    daily = store.schedule("daily", cron="0 6 * * *", zone="Europe/Berlin", attempts=1, dedupe="1d")
    outcomes = iter([RuntimeError("disk quota"), {"rows": 12}])

    def answer(payload: Any, run: Any) -> Any:
        out = next(outcomes)
        if isinstance(out, Exception):
            raise out
        return out

    recording(daily, answer)
    run_through(store, clock, daily, "daily", 1)
    failed = daily.get("daily")
    assert (failed.state, failed.attempt, failed.at) == ("scheduled", 0, datetime(2026, 2, 2, 5, 0, tzinfo=UTC))
    assert "disk quota" in failed.error and failed.result is None
    assert store.stats()["daily"]["failed"] == 0  # it never fails for good while it repeats
    run_through(store, clock, daily, "daily", 1)
    fine = daily.get("daily")
    assert (fine.state, fine.error, fine.result) == ("scheduled", None, {"rows": 12})
    assert fine.at == datetime(2026, 2, 3, 5, 0, tzinfo=UTC)


def test_SPEC_8_run_answers_of_a_repeating_job(store: tinystore.Store, clock: FakeClock) -> None:
    clock.set(utc(2026, 2, 1, 0, 0))
    q = store.queue("answers", attempts=3)
    asked = iter(["snooze", "snooze-far", "fail"])

    def answer(payload: Any, run: Any) -> Any:
        what = next(asked)
        return {"snooze": lambda: run.snooze("10m"), "snooze-far": lambda: run.snooze("2h"),
                "fail": lambda: run.fail("not today")}[what]()

    recording(q, answer)
    q.add({}, id="r", repeat=tinystore.every("1h"))
    run_through(store, clock, q, "r", 1)
    snoozed = q.get("r").at.replace(microsecond=0)
    assert snoozed == datetime(2026, 2, 1, 1, 10, tzinfo=UTC)  # a snooze before the next time is made
    run_through(store, clock, q, "r", 1)
    assert q.get("r").at == datetime(2026, 2, 1, 2, 0, tzinfo=UTC)  # one past it waits for the next time
    run_through(store, clock, q, "r", 1)
    after = q.get("r")
    assert (after.state, after.error, after.at) == ("scheduled", "not today", datetime(2026, 2, 1, 3, 0, tzinfo=UTC))


@pytest.mark.parametrize("zone, spring, autumn", [
    # Berlin: 02:00 -> 03:00 on 29 March, 03:00 -> 02:00 on 25 October 2026.
    ("Europe/Berlin", (2026, 3, 29), (2026, 10, 25)),
    # New York: 02:00 -> 03:00 on 8 March, 02:00 -> 01:00 on 1 November 2026.
    ("America/New_York", (2026, 3, 8), (2026, 11, 1)),
])
def test_SPEC_8_daylight_saving_days_in_a_store_run_a_skipped_time_after_the_gap_and_a_repeated_one_once(
        store: tinystore.Store, clock: FakeClock, zone: str, spring: tuple, autumn: tuple) -> None:
    repeated_hour = 2 if zone == "Europe/Berlin" else 1
    q = store.queue("dst")
    runs = recording(q)
    clock.set(local(zone, *spring, 0, 0).timestamp())
    q.add({}, id="gap", repeat=tinystore.cron("30 2 * * *", zone=zone))
    run_through(store, clock, q, "gap", 2)
    assert [at.astimezone(ZoneInfo(zone)).strftime("%d %H:%M") for at, _, _ in runs] == [
        f"{spring[2]:02d} 03:00", f"{spring[2] + 1:02d} 02:30"]
    runs.clear()
    q.cancel("gap")
    clock.set(local(zone, *autumn, 0, 0).timestamp())
    q.add({}, id="twice", repeat=tinystore.cron(f"30 {repeated_hour} * * *", zone=zone))
    q.add({}, id="hourly", repeat=tinystore.cron("45 * * * *", zone=zone))
    for _ in range(8):  # walk the night hour by hour, in real hours
        clock.advance("1h")
        store.run_until_idle()
    # Compared as instants: an ambiguous local time is never == a time of another zone (PEP 495).
    seen = sorted(at.timestamp() for at, _, _ in runs)
    first, second = (local(zone, *autumn, repeated_hour, 30, fold=f).timestamp() for f in (0, 1))
    assert seen.count(first) == 1 and second not in seen  # its first occurrence only
    # :45 of each real hour, both of the repeated hour's included: nine real hours from 00:00 local
    hourly = [t for t in seen if datetime.fromtimestamp(t, UTC).minute == 45]
    assert local(zone, *autumn, repeated_hour, 45).timestamp() in hourly
    assert local(zone, *autumn, repeated_hour, 45, fold=1).timestamp() in hourly
    assert len(hourly) == 8 and len(seen) == 9


# Many repeating jobs


def test_SPEC_8_a_thousand_users_repeats_are_a_job_each_cancelled_on_its_own(
        store: tinystore.Store, clock: FakeClock, kit: kits.Kit, target: str) -> None:
    clock.set(local("Europe/Berlin", 2026, 4, 6, 7, 0).timestamp())  # a Monday
    digests = store.queue("digests")
    runs = recording(digests)
    rule = tinystore.cron("0 8 * * mon", zone="Europe/Berlin")
    for start in range(0, 1000, 250):
        digests.add_many([tinystore.Job({"user": u}, id=f"digest:{u}", repeat=rule) for u in range(start, start + 250)])
    again = digests.add({"user": 7}, id="digest:7", repeat=rule)
    assert not again.added
    clock.set(local("Europe/Berlin", 2026, 4, 6, 8, 0).timestamp())
    store.run_until_idle()
    assert sorted(p["user"] for _, _, p in runs) == list(range(1000))
    assert digests.cancel("digest:7")
    assert digests.get("digest:7") is None
    runs.clear()
    clock.set(local("Europe/Berlin", 2026, 4, 13, 8, 0).timestamp())
    store.run_until_idle()
    assert sorted(p["user"] for _, _, p in runs) == [u for u in range(1000) if u != 7]
    nexts = {j.at for j in digests.jobs(limit=1000)}
    assert nexts == {local("Europe/Berlin", 2026, 4, 20, 8, 0)}
    assert not any(kit.inconsistencies(target).values())


def test_SPEC_8_a_repeat_without_an_id_or_of_another_kind_is_refused(store: tinystore.Store) -> None:
    q = store.queue("digests")
    with pytest.raises(tinystore.InvalidArgument, match="needs an id"):
        q.add({}, repeat=tinystore.every("1d"))
    with pytest.raises(tinystore.InvalidArgument, match="tinystore.cron"):
        q.add({}, id="d", repeat="every day")  # type: ignore[arg-type]
    assert q.jobs() == []


def test_SPEC_8_a_repeating_job_given_at_first_runs_then_and_its_rule_after(
        store: tinystore.Store, clock: FakeClock) -> None:
    clock.set(utc(2026, 2, 1, 0, 20))
    q = store.queue("r")
    runs = recording(q)
    q.add({}, id="now", repeat=tinystore.every("1h"), delay=0)
    store.run_until_idle()
    assert [at for at, _, _ in runs] == [datetime(2026, 2, 1, 0, 20, tzinfo=UTC)]
    assert q.get("now").at == datetime(2026, 2, 1, 1, 0, tzinfo=UTC)


# The cost of a claim


def claim_work(kit: kits.Kit, target: str, clock: FakeClock, repeating: int) -> int:
    """The writer's work (``kit.writer_work``) of one claim cycle taking 10 due jobs of a queue that also
    holds ``repeating`` repeating jobs waiting for tomorrow."""
    store = tinystore.open(target, clock=clock, durability="off")
    try:
        q = store.queue("digests", lease="1h")
        tomorrow, rule = clock.now() + 86_400, tinystore.every("1d")
        for first in range(0, repeating, 10_000):
            q.add_many([tinystore.Job({}, id=f"digest:{n}", at=tomorrow, repeat=rule)
                        for n in range(first, min(repeating, first + 10_000))])
        q.add_many([{} for _ in range(10)])
        with kit.writer_work(store) as work:
            claimed = kit.claim_cycle(store, q, 11, clock.now()).claimed
        assert len(claimed) == 10
        return work[0]
    finally:
        store.close()


def test_SPEC_8_a_claim_beside_20000_repeating_jobs_costs_what_it_costs_beside_100(
        kit: kits.Kit, clock: FakeClock) -> None:
    small = claim_work(kit, kit.new_target("small"), clock, 100)
    big = claim_work(kit, kit.new_target("big"), clock, 20_000)
    # A B-tree a level deeper may cost a little; reading the repeating jobs would cost 200 times more.
    assert big < small * 1.5, (small, big)
