"""An ``async def`` handler that blocks its worker's event loop, with a second worker process waiting.

The blocking call an ``async def`` must not make (``time.sleep``, CPU-bound
work, synchronous I/O) stops every other coroutine of its worker's loop; the
leases of that worker's jobs are renewed from a thread of its own, so they
stay with the live process, and no other process runs them meanwhile. The
witness file (outside the store) counts the runs.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time

import tinystore
from helpers import wait_child, wait_for_line

WAIT = 30.0


def wait_for_starts(lab, expected: set[tuple[str, int]], timeout: float = WAIT) -> None:
    """Until the witness holds a "start" for each ``(id, attempt)``."""
    deadline = time.monotonic() + timeout
    while not expected <= {(r.id, r.attempt) for r in lab.runs("start")}:
        assert time.monotonic() < deadline, f"not started after {timeout}s: {expected}; witness: {lab.runs()}"
        time.sleep(0.05)


def test_an_async_handler_that_blocks_its_event_loop_keeps_the_leases_of_its_worker_and_each_job_runs_once(
        lab, open_store):
    lab.prepare("q", dedupe="1d", lease="2s")
    first = lab.worker("q:async", serve=True)
    wait_for_line(first, "serving")
    store = open_store()
    q = store.queue("q")
    # One claim takes both: one awaits 7 s, the other blocks the loop for 6 s, each far past the 2 s lease.
    q.add_many([tinystore.Job({"work": 7}, id="awaits"), tinystore.Job({"block_loop": 6}, id="blocks")])
    wait_for_starts(lab, {("awaits", 1), ("blocks", 1)})
    second = lab.worker("q:async", serve=True)  # takes any lease the first lets run out
    wait_for_line(second, "serving")

    last = lab.watch_until_ended(q, ["awaits", "blocks"], timeout=WAIT)
    assert {id: (s.state, s.attempt) for id, s in last.items()} == {"awaits": ("done", 1), "blocks": ("done", 1)}
    for worker in (first, second):
        worker.send_signal(signal.SIGTERM)
    assert [wait_child(first), wait_child(second)] == [0, 0]
    assert sorted((r.phase, r.id, r.attempt, r.pid) for r in lab.runs()) == [
        ("end", "awaits", 1, first.pid), ("end", "blocks", 1, first.pid),
        ("start", "awaits", 1, first.pid), ("start", "blocks", 1, first.pid)]
    lab.assert_sound(finished=[("q", "awaits"), ("q", "blocks")])
    lab.assert_consistent()


def test_an_async_handler_that_blocks_its_loop_past_its_timeout_loses_its_lease_and_its_job_runs_again_elsewhere(
        lab, open_store):
    # The loop cannot cancel it at its 1 s timeout: renewals stop a lease past that, so the lease runs out.
    lab.prepare("q", [("stuck", {"block_loop": 60, "block_loop_on": [1]})], dedupe="1d", lease="2s", timeout="1s")
    first = lab.worker("q:async", serve=True)
    wait_for_starts(lab, {("stuck", 1)})
    second = lab.worker("q:async", serve=True)
    q = open_store().queue("q")
    job = lab.watch_until_ended(q, ["stuck"], timeout=WAIT)["stuck"]
    assert (job.state, job.attempt) == ("done", 2)
    assert [(r.phase, r.attempt, r.pid) for r in lab.runs()] == [
        ("start", 1, first.pid), ("start", 2, second.pid), ("end", 2, second.pid)]
    first.kill()  # still blocked: what it would settle changes nothing, and it need not wait that long
    second.send_signal(signal.SIGTERM)
    assert wait_child(second) == 0
    first.wait(WAIT)
    lab.assert_consistent()


def test_an_async_handler_that_blocks_the_loop_for_over_a_second_is_named_in_one_warning_saying_what_to_use_instead(
        store, caplog):
    q = store.queue("slow")

    @q.work
    async def handler(payload, run):
        time.sleep(2.5)  # the mistake under test: a blocking call on the worker's loop

    q.add({}, id="s1")
    caplog.set_level(logging.WARNING, logger="tinystore")
    store.run_until_idle()
    said = [r for r in caplog.records if "blocked the worker's event loop" in r.getMessage()]
    assert len(said) == 1, [r.getMessage() for r in caplog.records]
    message = said[0].getMessage()
    assert "slow/s1 attempt 1" in message, message
    assert "def handler" in message and "asyncio.to_thread" in message, message
    assert (said[0].tinystore_queue, said[0].tinystore_job, said[0].tinystore_attempt) == ("slow", "s1", 1)


def test_an_async_handler_that_awaits_for_seconds_is_not_said_to_block_the_loop(store, caplog):
    q = store.queue("patient")

    @q.work
    async def handler(payload, run):
        await asyncio.sleep(1.5)

    q.add({}, id="p1")
    caplog.set_level(logging.WARNING, logger="tinystore")
    store.run_until_idle()
    assert not [r for r in caplog.records if "blocked" in r.getMessage()], caplog.records
