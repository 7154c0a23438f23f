"""W1 add: adds one call at a time from one thread, from 8 and 32 threads at once, and add_many by 100.

Each case adds the same number of jobs to a new store file, in this process,
and counts the writer's commits (group commit: concurrent adds share one).
"""

from __future__ import annotations

import threading
import time

import tinystore

from common import QUEUE, CommitCounter, Context, Row, payload, ratio

TITLE = "add"


def _single(queue: tinystore.Queue, count: int) -> None:
    for n in range(count):
        queue.add(payload(n))


def _threads(queue: tinystore.Queue, count: int, threads: int) -> None:
    start = threading.Barrier(threads)

    def adder(first: int) -> None:
        start.wait()
        for n in range(first, count, threads):
            queue.add(payload(n))

    workers = [threading.Thread(target=adder, args=(i,)) for i in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()


def _batches(queue: tinystore.Queue, count: int, batch: int) -> None:
    for first in range(0, count, batch):
        queue.add_many([payload(n) for n in range(first, min(count, first + batch))])


def _measure(ctx: Context, name: str, body: "callable") -> tuple[float, int | None]:
    """Jobs/s of ``body(queue)`` on a new store, and the writer commits it made (best of ``ctx.repeat``)."""
    return max(_measure_once(ctx, name, body) for _ in range(ctx.repeat))


def _measure_once(ctx: Context, name: str, body: "callable") -> tuple[float, int | None]:
    counter = CommitCounter.install()
    location = ctx.path(name)
    store = tinystore.open(location, durability=ctx.durability)
    try:
        queue = store.queue(QUEUE)
        queue.add({"warm": True})  # the writer thread and statements are ready before the clock starts
        commits = counter.read()
        began = time.perf_counter()
        count = body(queue)
        seconds = time.perf_counter() - began
        commits = None if commits is None else counter.read() - commits
    finally:
        store.close()
        ctx.remove(location)
    return count / seconds, commits


def run(ctx: Context) -> list[Row]:
    count = ctx.sizes["w1_adds"]
    base = ctx.baseline
    rows = []

    def per_job(commits: int | None) -> dict:
        return {"jobs": count, "commits": commits, "commits_per_job": None if commits is None else commits / count}

    single, commits = _measure(ctx, "w1-single", lambda q: (_single(q, count), count)[1])
    rows.append(Row("W1", "add, 1 thread", single, "jobs/s", ratio(single, base["insert_single"]),
                    "raw insert, 1 row/txn", ">= 0.8x raw insert 1 row/txn",
                    ratio(single, base["insert_single"]) >= 0.8, per_job(commits)))
    for threads in ctx.sizes["w1_threads"]:
        rate, commits = _measure(ctx, f"w1-threads{threads}", lambda q: (_threads(q, count, threads), count)[1])
        target, met = "", None
        if threads == 32:
            target, met = ">= 10x 1 thread", rate >= 10 * single
        rows.append(Row("W1", f"add, {threads} threads", rate, "jobs/s", ratio(rate, base["insert_single"]),
                        "raw insert, 1 row/txn", target, met,
                        {**per_job(commits), "vs_one_thread": ratio(rate, single)}))
    batch = ctx.sizes["w1_batch"]
    rate, commits = _measure(ctx, "w1-many", lambda q: (_batches(q, count, batch), count)[1])
    goal = ctx.goal("w1_many_per_s")
    rows.append(Row("W1", f"add_many by {batch}", rate, "jobs/s", ratio(rate, base["insert_batched"]),
                    "raw insert, 100 rows/txn", "" if goal is None else f">= {goal:,.0f} jobs/s",
                    None if goal is None else rate >= goal, per_job(commits)))
    return rows
