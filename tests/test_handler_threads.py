"""``def`` handlers run in the worker's own threads: side by side, each outcome settled on the loop."""

from __future__ import annotations

import threading
import time
from typing import Any

import tinystore
from tinystore._runner import SYNC_SLOTS

WAIT = 20.0


def test_def_handlers_run_side_by_side_one_per_thread_up_to_the_slots(store: tinystore.Store) -> None:
    # Every handler waits for all the others: they can only finish if SYNC_SLOTS of them run at once.
    q = store.queue("side")
    together = threading.Barrier(SYNC_SLOTS, timeout=WAIT)
    threads: set[str] = set()

    @q.work
    def handle(payload: Any, run: tinystore.Run) -> int:
        threads.add(threading.current_thread().name)
        together.wait()
        return payload["n"]

    ids = [q.add({"n": n}).id for n in range(SYNC_SLOTS)]
    store.run_until_idle()
    assert [q.get(i) for i in ids] == [None] * SYNC_SLOTS  # done, and not kept (no dedupe)
    assert len(threads) == SYNC_SLOTS
    assert threading.current_thread().name not in threads


def test_def_handlers_outcomes_are_settled_each_as_its_own(store: tinystore.Store, clock: Any) -> None:
    q = store.queue("mixed", attempts=1, keep="1h")

    @q.work
    def handle(payload: Any, run: tinystore.Run) -> Any:
        if payload == "raise":
            raise ValueError("bad payload")
        if payload == "fail":
            return run.fail("refused")
        return None

    ok, raised, failed = (q.add(p).id for p in ("fine", "raise", "fail"))
    store.run_until_idle()
    assert q.get(ok) is None
    got = q.get(raised)
    assert (got.state, got.attempt) == ("failed", 1)
    assert got.error.startswith("ValueError: bad payload") and "Traceback" in got.error
    assert (q.get(failed).state, q.get(failed).error) == ("failed", "refused")


def wait_for_state(q: tinystore.Queue, id: str, state: str) -> None:
    """Follow the job's changes (JOB-13) until it is in ``state``."""
    for seen in q.watch(id):
        if seen.state == state:
            return
    raise AssertionError(f"{id} ended without being {state}")


def test_JOB_09_a_def_handler_past_its_timeout_keeps_its_slot_until_its_thread_returns(store: tinystore.Store,
                                                                                    clock: Any) -> None:
    # One slot: A blocks its thread past its timeout. Its attempt fails, and run.cancelled tells it
    # to stop, but it keeps its slot and its lease while its thread runs: B waits, never "timed out"
    # behind it, and runs once A's thread returns.
    q = store.queue("slow", timeout="1s", attempts=1, keep="1h")
    ran: list[str] = []
    a_began, a_told, release = threading.Event(), threading.Event(), threading.Event()

    @q.work
    def handle(payload: Any, run: tinystore.Run) -> None:
        ran.append(payload)
        if payload == "A":
            a_began.set()
            while not run.cancelled:
                time.sleep(0.001)
            a_told.set()
            release.wait(WAIT)

    q.add("A", id="A")
    q.add("B", id="B")
    store.start(workers=1)
    try:
        assert a_began.wait(WAIT)
        clock.advance("2s")
        assert a_told.wait(WAIT)  # run.cancelled turned true past the timeout
        clock.advance("2s")
        assert q.get("A").state == "running"  # its lease is kept while its thread runs
        assert q.get("B").state == "waiting"  # the one slot is still A's
        release.set()
        wait_for_state(q, "B", "done")
        assert q.get("A").state == "failed"
        assert q.get("A").error.startswith("timeout")
    finally:
        release.set()
        store.stop()
    assert ran == ["A", "B"]


def check_card(card: str) -> None:
    raise ValueError(f"card {card} was declined")


def test_the_traceback_kept_for_a_failed_attempt_begins_at_the_handler_def_or_async(store: tinystore.Store) -> None:
    pay = store.queue("pay", attempts=1)
    pay_async = store.queue("pay-async", attempts=1)

    @pay.work
    def charge(payload: Any, run: tinystore.Run) -> None:
        check_card(payload["card"])

    @pay_async.work
    async def charge_async(payload: Any, run: tinystore.AsyncRun) -> None:
        check_card(payload["card"])

    pay.add({"card": "4242"}, id="p")
    pay_async.add({"card": "4242"}, id="p")
    store.run_until_idle()
    for queue, handler in ((pay, "charge"), (pay_async, "charge_async")):
        error = queue.get("p").error
        frames = [line.strip() for line in error.splitlines() if line.strip().startswith("File ")]
        assert error.startswith("ValueError: card 4242 was declined\nTraceback (most recent call last):\n"), error
        assert [f.split(", in ")[1] for f in frames] == [handler, "check_card"], error
        assert all(__file__ in f for f in frames), error
