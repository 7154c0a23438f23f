"""W8 operator reads: what ``store.stats()`` costs on a store holding many jobs, against a count of
every job (what a page or a metrics scrape would pay if the store kept no counts).

The store holds N jobs in one queue, nine in ten due now and one in ten due
next week (added with ``add_many``; N = 1,000,000 in the full run). Measured
in this process, median of 20 calls after one to warm the cache:

- ``stats()``: jobs per state from the counts the store keeps, the scheduled
  ones counted over the due index, the oldest due job from its first entry;
- the baseline: one grouped count of every job row by queue and state, on a
  connection of its own to the same store, in the same run;
- ``queue.jobs(state="failed", limit=50)`` where no job failed, read by the
  index of failed jobs, against the same page read by walking the queue's
  ids (``state || ''`` keeps the walk off that index), as every filtered page
  was read before that index.

The ratios are the baselines' times over tinystore's: how many times faster.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

from common import QUEUE, WEEK, Context, Row, fill, ratio

TITLE = "operator reads"
CALLS = 20
SCAN = "SELECT count(*) FROM (SELECT queue, state, count(*) FROM {jobs} GROUP BY queue, state) AS counted"
WALK = ("SELECT count(*) FROM (SELECT id FROM {jobs} WHERE queue = ? AND id > '' AND state || '' = 'failed'"
        " ORDER BY id LIMIT 50) AS page")


def _median_ms(call: Callable[[], Any]) -> float:
    call()  # the first call warms the cache; it is not counted
    times = []
    for _ in range(CALLS):
        began = time.perf_counter()
        call()
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times)


def run(ctx: Context) -> list[Row]:
    import tinystore

    jobs = ctx.sizes["w8_jobs"]
    location = ctx.path("w8")
    try:
        due = jobs - jobs // 10
        fill(location, ctx.durability, due, batch=10_000)
        fill(location, ctx.durability, jobs - due, batch=10_000, at=time.time() + WEEK, start=due)
        store = tinystore.open(location, durability=ctx.durability)
        try:
            stats = store.stats()[QUEUE]
            kept = _median_ms(store.stats)
            queue = store.queue(QUEUE)
            failed_page = _median_ms(lambda: queue.jobs(state="failed", limit=50))
        finally:
            store.close()
        scan = _median_ms(lambda: ctx.count(location, SCAN))
        walk = _median_ms(lambda: ctx.count(location, WALK, (QUEUE,)))
    finally:
        ctx.remove(location)
    extra = {"waiting": stats["waiting"], "scheduled": stats["scheduled"], "calls": CALLS}
    return [
        Row("W8", f"stats(), {jobs:,} jobs (one in ten scheduled)", kept, "ms", ratio(scan, kept),
            "a grouped count of every job", "", None, extra),
        Row("W8", f"  baseline: grouped count of {jobs:,} job rows", scan, "ms", None, "", "", None, {}),
        Row("W8", f"jobs(state='failed'), none among {jobs:,}", failed_page, "ms", ratio(walk, failed_page),
            "a walk of the queue's ids", "", None, {}),
        Row("W8", "  baseline: the same page by a walk of the queue's ids", walk, "ms", None, "", "", None, {}),
    ]
