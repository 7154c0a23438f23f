"""W12 acting on many jobs: ``cancel_many`` over N waiting jobs while a thread adds one job at a time.

The store holds N waiting jobs (1,000,000 on SQLite at full size, fewer on
PostgreSQL, whose walk costs more round trips). A thread adds one job at a
time to the same queue, each add timed from the call to its return, first
alone (the reference: what an add waits on an idle store), then while
``cancel_many()`` walks the queue in its chunks, one transaction each. The
rows say how fast the cancel goes (jobs taken away per second) and how long
the adds waited beside it: p50, p99 and the longest, which the chunks bound
(the adds' commits go between them), however many jobs the cancel takes.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import tinystore

from common import QUEUE, Context, Row, fill, percentile, ratio

TITLE = "cancel_many beside adds"


def _adding(queue: tinystore.Queue, stop: threading.Event, waits: list[float], limit: int = 0) -> None:
    """Add one job at a time until ``stop`` (or ``limit`` adds), each add's wait in seconds."""
    n = 0
    while not stop.is_set() and (not limit or n < limit):
        began = time.perf_counter()
        queue.add({"added": n})
        waits.append(time.perf_counter() - began)
        n += 1


def run(ctx: Context) -> list[Row]:
    jobs = ctx.sizes["w12_jobs_postgres" if ctx.postgres else "w12_jobs"]
    path = ctx.path("w12")
    fill(path, ctx.durability, jobs, batch=10_000)
    store = tinystore.open(path, durability=ctx.durability)
    try:
        queue = store.queue(QUEUE)
        alone: list[float] = []
        _adding(queue, threading.Event(), alone, limit=ctx.sizes["w12_alone_adds"])
        waits: list[float] = []
        stop = threading.Event()
        adder = threading.Thread(target=_adding, args=(queue, stop, waits), daemon=True)
        adder.start()
        began = time.perf_counter()
        cancelled = queue.cancel_many()
        seconds = time.perf_counter() - began
        stop.set()
        adder.join()
        left = queue.jobs(state="waiting", limit=1)
    finally:
        store.close()
        ctx.remove(path)
    # Every job there when the walk began (the reference's adds too, and the first of the thread's that
    # committed before it began) is taken; those added meanwhile stay.
    assert jobs + len(alone) <= cancelled < jobs + len(alone) + len(waits) and left, (cancelled, jobs)
    title = f"{jobs:,} waiting jobs, 1 adding thread"
    extra: dict[str, Any] = {"cancelled": cancelled, "seconds": seconds, "adds": len(waits),
                             "alone_p50_ms": percentile(alone, 50) * 1000}
    p50, p99, longest = (percentile(waits, p) * 1000 for p in (50, 99, 100))
    reference = extra["alone_p50_ms"]
    return [
        Row("W12", f"cancel_many, {title}", cancelled / seconds, "jobs/s", extra=extra),
        Row("W12", f"an add's wait beside it, p50 ({len(waits):,} adds)", p50, "ms", ratio(p50, reference),
            "an add alone, p50"),
        Row("W12", "an add's wait beside it, p99", p99, "ms", ratio(p99, reference), "an add alone, p50"),
        Row("W12", "an add's wait beside it, longest", longest, "ms", ratio(longest, reference), "an add alone, p50",
            target="tens of ms", met=longest <= 100),
    ]
