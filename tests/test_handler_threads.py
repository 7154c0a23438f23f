"""``def`` handlers run in the worker's own threads: side by side, each outcome settled on the loop."""

from __future__ import annotations

import threading
from typing import Any

import tinystore
from tinystore._worker import SYNC_SLOTS

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


def test_a_def_call_that_timed_out_while_waiting_for_a_thread_never_begins(store: tinystore.Store,
                                                                            clock: Any) -> None:
    # One thread: A blocks it past its timeout; B, claimed next, times out while waiting behind A, and
    # fails. When A's thread is free again it must pass B over (its attempt has ended) and take C.
    q = store.queue("slow", timeout="1s", attempts=1, keep="1h")
    ran: list[str] = []
    a_began, release = threading.Event(), threading.Event()

    @q.work
    def handle(payload: Any, run: tinystore.Run) -> None:
        ran.append(payload)
        if payload == "A":
            a_began.set()
            release.wait(WAIT)

    q.add("A", id="A")
    q.add("B", id="B")
    store.start(workers=1)
    try:
        assert a_began.wait(WAIT)
        clock.advance("2s")  # A times out: its thread stays blocked, its slot is free
        wait_for_state(q, "B", "running")  # claimed, waiting for the one thread
        clock.advance("2s")
        wait_for_state(q, "B", "failed")
        assert q.get("B").error.startswith("timeout")
        q.add("C", id="C")
        wait_for_state(q, "C", "running")  # claimed, behind B's call
        release.set()
        wait_for_state(q, "C", "done")
    finally:
        release.set()
        store.stop()
    assert ran == ["A", "C"]
