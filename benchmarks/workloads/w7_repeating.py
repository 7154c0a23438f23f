"""W7 repeating jobs: what 100,000 repeating jobs waiting for their next time cost the claims of
their queue, against 100 (SPEC §8: claiming stays indexed and flat).

Each store holds N repeating jobs (``repeat=every("1d")``, first due
tomorrow) in the queue ``digests``. Two cases run in this process with
``run_until_idle`` and a no-op ``def`` handler, best of ``--repeat``:

- one-off: 2,000 due jobs without a rule are added to the same queue and drained;
- due repeats: 1,000 more repeating jobs, due now, run once each and are
  rescheduled (the settlement writes their next time).

The figure is jobs per second; the ratio is N = 100,000 against N = 100.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from common import Context, Row, best_of, ratio

TITLE = "repeating jobs"
QUEUE = "digests"
DAY = 86_400.0


def _store_with(ctx: Context, waiting: int) -> str:
    """A store whose queue holds ``waiting`` repeating jobs due tomorrow; where it is."""
    import tinystore

    location = ctx.path(f"w7-{waiting}")
    store = tinystore.open(location, durability=ctx.durability)
    try:
        queue = store.queue(QUEUE)
        rule, tomorrow = tinystore.every("1d"), time.time() + DAY
        for first in range(0, waiting, 10_000):
            queue.add_many([tinystore.Job({"user": n}, id=f"digest:{n}", at=tomorrow, repeat=rule)
                            for n in range(first, min(waiting, first + 10_000))])
    finally:
        store.close()
    return location


def _drain(ctx: Context, source: str, case: str, jobs: int) -> dict[str, Any]:
    """Add ``jobs`` due jobs (one-off, or repeating) to a copy of ``source`` and run them once each."""
    import tinystore

    def once() -> dict[str, Any]:
        location = ctx.copy(source, f"w7-run-{case}")
        store = tinystore.open(location, durability=ctx.durability)
        try:
            queue = store.queue(QUEUE)
            queue.work(lambda payload, run: None)
            now, rule = time.time(), tinystore.every("1d")
            items = [tinystore.Job({"n": n}, id=f"due:{n}", at=now, repeat=rule if case == "repeats" else None)
                     for n in range(jobs)]
            for first in range(0, jobs, 1_000):
                queue.add_many(items[first:first + 1_000])
            began = time.perf_counter()
            store.run_until_idle()
            seconds = time.perf_counter() - began
            left = store.stats()[QUEUE]["waiting"]
        finally:
            store.close()
            gc.collect()
            ctx.remove(location)
        return {"seconds": seconds, "left": left}
    return best_of(ctx, once)


def run(ctx: Context) -> list[Row]:
    rows = []
    small, big = ctx.sizes["w7_waiting"]
    stores = {n: _store_with(ctx, n) for n in (small, big)}
    try:
        for case, jobs, words in (("one-off", ctx.sizes["w7_one_off"], "due jobs without a rule"),
                                  ("repeats", ctx.sizes["w7_due_repeats"], "due repeating jobs, each rescheduled")):
            rates = {}
            for n in (small, big):
                got = _drain(ctx, stores[n], case, jobs)
                rates[n] = jobs / got["seconds"]
                reference = rates[small] if n == big else None
                met = None if reference is None else rates[n] >= 0.9 * reference
                rows.append(Row("W7", f"{jobs:,} {words}, beside {n:,} repeating jobs not due", rates[n],
                                "jobs/s", ratio(rates[n], reference), f"beside {small:,}" if reference else "",
                                ">= 0.9x" if reference else "", met, {"seconds": got["seconds"], "left": got["left"]}))
    finally:
        for location in stores.values():
            ctx.remove(location)
    return rows
