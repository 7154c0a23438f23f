"""Contract tests of priorities (JOB-01 as it orders priorities; PRI-*), on every backend.

A job's priority, an int from -100 to 100 (0 unless given), orders the due
jobs of its queue: the highest starts first, then by time, then in the order
added. Time is a FakeClock the tests move; a witness list, appended by each
handler as its first act, records the order of starts.
"""

from __future__ import annotations

import pytest

import tinystore
from helpers import run_until_idle

T = 1_800_000_000.0  # where the `clock` fixture's FakeClock starts


def witnessed(q: tinystore.Queue) -> list:
    order: list = []

    def handler(payload, run):
        order.append(payload)

    q.work(handler)
    return order


def test_JOB_01_PRI_01_due_jobs_start_highest_priority_first_then_by_time_then_in_the_order_added(store, clock):
    q = store.queue("reports", concurrency=1)
    q.add("low-old", at=T - 60, priority=-5)
    q.add("plain-later", at=T - 10)
    q.add("high-b", at=T - 5, priority=10)
    q.add("plain-earlier", at=T - 20)
    q.add("top", priority=100)
    q.add("high-a", at=T - 30, priority=10)
    q.add("high-c", at=T - 5, priority=10)  # the same time as high-b: added after it
    q.add("bottom", at=T - 3600, priority=-100)
    order = witnessed(q)
    run_until_idle(store)
    assert order == ["top", "high-a", "high-b", "high-c", "plain-earlier", "plain-later", "low-old", "bottom"]


def test_PRI_02_a_scheduled_job_s_priority_counts_once_it_is_due_and_not_before(store, clock):
    q = store.queue("reports", concurrency=1)
    q.add("urgent-later", delay="1m", priority=50)
    q.add("plain-now")
    order = witnessed(q)
    run_until_idle(store)
    assert order == ["plain-now"], "a job scheduled for later holds up nothing, whatever its priority"
    q.add("plain-again")
    q.add("low", priority=-1)
    clock.advance("1m")
    run_until_idle(store)
    assert order == ["plain-now", "urgent-later", "plain-again", "low"]


def test_PRI_03_a_retried_or_snoozed_job_keeps_its_priority(store, clock):
    q = store.queue("reports", concurrency=1, backoff=("1s", "1s"))
    q.add("flaky", id="flaky", priority=7)
    q.add("snoozy", id="snoozy", priority=5)
    order: list = []

    def handler(payload, run):
        order.append(payload)
        if run.attempt == 1 and payload == "flaky":
            raise ConnectionError("not yet")
        if payload == "snoozy" and len([p for p in order if p == "snoozy"]) == 1:
            return run.snooze("10s")

    q.work(handler)
    run_until_idle(store)
    assert order == ["flaky", "snoozy"]
    assert (q.get("flaky").priority, q.get("snoozy").priority) == (7, 5)
    for n in range(3):
        q.add(f"plain-{n}")
    clock.advance("10s")  # both are due again, behind three plain jobs in time, ahead of them in priority
    run_until_idle(store)
    assert order == ["flaky", "snoozy", "flaky", "snoozy", "plain-0", "plain-1", "plain-2"]


def test_PRI_04_within_a_group_due_jobs_start_by_priority_and_the_limits_still_bound_the_starts(store, clock):
    q = store.queue("orders", group_concurrency=1, concurrency=1)
    for n, priority in enumerate([0, 3, -2, 3, 9]):
        q.add(f"c7:{n}", group="chat:7", priority=priority)
    q.add("c8:0", group="chat:8", at=T - 1)
    running: list[int] = []
    active = [0]
    order: list = []

    def handler(payload, run):
        active[0] += 1
        running.append(active[0])
        order.append(payload)
        active[0] -= 1

    q.work(handler)
    run_until_idle(store)
    chat7 = [p for p in order if p.startswith("c7")]
    assert chat7 == ["c7:4", "c7:1", "c7:3", "c7:0", "c7:2"]
    assert sorted(order) == sorted(chat7 + ["c8:0"]) and max(running) == 1


def test_PRI_08_across_groups_and_jobs_without_one_the_highest_priority_due_job_starts_first(store, clock):
    # Each group's first job is older than the higher-priority jobs of other groups: by time alone the
    # groups would start in the order of their heads.
    q = store.queue("chats", concurrency=1, group_concurrency=1)
    q.add("a:old", group="a", at=T - 300)
    q.add("b:old", group="b", at=T - 200, priority=-3)
    q.add("a:urgent", group="a", at=T - 10, priority=20)
    q.add("c:high", group="c", at=T - 5, priority=7)
    q.add("plain", at=T - 100, priority=7)
    q.add("b:high", group="b", at=T - 1, priority=50)
    order = witnessed(q)
    run_until_idle(store)
    assert order == ["b:high", "a:urgent", "plain", "c:high", "a:old", "b:old"]


def test_PRI_09_a_group_s_higher_priority_job_scheduled_for_later_neither_starts_early_nor_holds_back_its_due_ones(
        store, clock):
    q = store.queue("chats", group_concurrency=1)
    q.add("later", group="g", at=T + 60, priority=90)
    q.add("due-low", group="g", at=T - 20, priority=-1)
    q.add("due-high", group="g", at=T - 10, priority=5)
    q.add("other", group="h", at=T - 5, priority=1)
    order = witnessed(q)
    run_until_idle(store)
    # "other" runs beside group g's jobs, in a thread of its own: only g's order is the claims' order.
    assert sorted(order) == ["due-high", "due-low", "other"]
    assert order.index("due-high") < order.index("due-low")
    clock.advance(61)
    run_until_idle(store)
    assert order[3:] == ["later"]


def test_PRI_05_ahead_counts_every_due_job_of_a_higher_priority_and_the_earlier_ones_of_its_own(store, clock):
    q = store.queue("line", concurrency=1)
    q.add("a", id="a", at=T - 10)
    q.add("b", id="b", priority=5)
    q.add("c", id="c", at=T - 20, priority=-1)
    q.add("d", id="d", priority=5)
    q.add("g", id="g", group="g1", priority=6)
    q.add("later", id="later", delay="1h", priority=100)  # not due: ahead of nobody
    assert {i: q.get(i).ahead for i in "abcdg"} == {"g": 0, "b": 1, "d": 2, "a": 3, "c": 4}
    assert {j.id: j.ahead for j in q.jobs() if j.state == "waiting"} == {"g": 0, "b": 1, "d": 2, "a": 3, "c": 4}


def test_PRI_06_get_jobs_and_add_many_carry_the_priority_and_it_is_0_unless_given(store, clock):
    q = store.queue("reports")
    states = q.add_many([tinystore.Job("x", id="x", priority=-5), tinystore.Job("y", id="y"), "z"])
    assert [s.priority for s in states] == [-5, 0, 0]
    assert q.add("w", id="w", priority=100).priority == 100
    assert q.get("x").priority == -5 and q.get("w").priority == 100
    assert sorted((j.id, j.priority) for j in q.jobs() if j.id in "xyw") == [("w", 100), ("x", -5), ("y", 0)]
    assert q.add("again", id="x", priority=9).priority == -5, "an id that names a job adds nothing (JOB-10)"


@pytest.mark.parametrize("bad", [101, -101, True, False, 1.0, "5", None])
def test_PRI_07_a_priority_outside_minus_100_to_100_or_not_an_int_is_refused_naming_queue_and_job_nothing_written(
        store, clock, bad):
    q = store.queue("reports")
    with pytest.raises(tinystore.InvalidArgument) as refused:
        q.add("p", id="bad-one", priority=bad)
    assert "reports" in str(refused.value) and "bad-one" in str(refused.value) and "priority" in str(refused.value)
    with pytest.raises(tinystore.InvalidArgument) as refused:
        q.add_many([tinystore.Job("fine", id="fine"), tinystore.Job("p", id="bad-two", priority=bad)])
    assert "bad-two" in str(refused.value)
    assert q.get("bad-one") is None and q.get("fine") is None and q.get("bad-two") is None
