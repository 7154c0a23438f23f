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
