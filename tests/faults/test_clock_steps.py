"""A wall clock that steps back, then is put right: rate windows neither stall nor speed a queue (LIM-03).

NTP or an operator can set a machine's clock back; every time tinystore
keeps is a wall-clock time. A start counted "in the future" of the clock
counts as made now, a group set aside until then is woken, and a worker's
wait ends when its wall-clock time comes or its delay has passed, whichever
is first. ``FakeClock.set`` steps a test's clock back as NTP would.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import tinystore
from tinystore.testing import FakeClock

HOUR = 3600.0
WAIT = 20.0  # seconds a test waits for what should take about one


def test_FakeClock_set_to_an_earlier_time_steps_the_clock_back_and_its_waits_end_after_their_delay():
    clock = FakeClock(1_800_000_000.0)
    fired: list[str] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        clock.call_later(loop, 10, lambda: fired.append("by delay"))
        clock.call_later(loop, HOUR + 5, lambda: fired.append("by time"))
        clock.set(1_800_000_000.0 - HOUR)
        assert clock.now() == 1_800_000_000.0 - HOUR
        clock.advance("10s")  # its delay passed, though the clock reads an hour before it was due
        await asyncio.sleep(0)
        assert fired == ["by delay"]
        clock.set(1_800_000_000.0 + HOUR + 5)  # put forward past the other one's time: it ends at once
        await asyncio.sleep(0)
        assert fired == ["by delay", "by time"]

    asyncio.run(main())
    with pytest.raises(tinystore.InvalidArgument):
        clock.set(float("nan"))


def test_LIM_03_a_rate_limited_queue_keeps_its_rate_when_the_clock_steps_back_an_hour(store, clock):
    q = store.queue("geocode", rate=(2, "1s"))
    ran: list[int] = []
    q.work(lambda payload, run: ran.append(payload))
    q.add_many([0, 1])
    store.run_until_idle()
    assert ran == [0, 1]  # the window of the last second is full
    ran.clear()
    before = clock.now()
    clock.set(before - HOUR)
    assert clock.now() == before - HOUR

    q.add_many(list(range(10, 16)))
    store.run_until_idle()
    assert ran == []  # the two starts of a moment ago still fill the window: not sped up
    for second in range(1, 4):
        clock.advance("1s")
        store.run_until_idle()
        assert len(ran) == 2 * second, f"after {second}s: {ran}"  # not stalled for the hour either
    assert ran == list(range(10, 16))


def test_LIM_03_a_rate_limited_group_is_not_set_aside_for_an_hour_when_the_clock_steps_back(store, clock):
    q = store.queue("sync", group_rate=(1, "1s"))
    ran: list[str] = []
    q.work(lambda payload, run: ran.append(payload))
    q.add("a1", group="a")
    q.add("a2", group="a")  # set aside until the window slides, a second from now
    store.run_until_idle()
    assert ran == ["a1"]
    before = clock.now()
    clock.set(before - HOUR)
    assert clock.now() == before - HOUR
    q.add("a3", group="a")
    store.run_until_idle()
    assert ran == ["a1"]
    clock.advance("1s")
    store.run_until_idle()
    assert ran == ["a1", "a3"]  # a2's time is an hour ahead now: it waits for it, as a job added then would
    clock.advance("1s")
    q.add("a4", group="a")
    store.run_until_idle()
    assert ran == ["a1", "a3", "a4"]


class SteppedClock(tinystore.Clock):
    """The system clock, read through an offset the test steps, as NTP or an operator steps a wall clock."""

    def __init__(self) -> None:
        self.offset = 0.0

    def now(self) -> float:
        return time.time() + self.offset


def wait_for(done, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_LIM_03_a_worker_runs_its_jobs_when_the_clock_steps_back_an_hour_and_again_when_it_is_put_right(store_path):
    clock = SteppedClock()
    store = tinystore.open(store_path, clock=clock)
    try:
        q = store.queue("geocode", rate=(1, "300ms"))
        ran: list[str] = []
        lock = threading.Lock()

        @q.work
        def handle(payload, run):
            with lock:
                ran.append(payload)

        store.start()
        q.add("first")
        wait_for(lambda: ran == ["first"], f"the first job never ran: {ran}")
        q.add("due-when-put-right")  # waits for the window to slide
        clock.offset = -HOUR
        q.add("added-an-hour-back")  # due now by the clock: runs once the window slides, not in an hour
        wait_for(lambda: "added-an-hour-back" in ran, f"stalled after the clock stepped back: {ran}")
        assert ran == ["first", "added-an-hour-back"]
        time.sleep(0.6)  # the window slid: the worker now waits for the other job's time, an hour ahead
        clock.offset = 0.0  # put right: the job due an hour ahead is due again, and the worker's wait ends
        wait_for(lambda: len(ran) == 3, f"stalled after the clock was put right: {ran}")
        assert ran == ["first", "added-an-hour-back", "due-when-put-right"]
    finally:
        store.close()
