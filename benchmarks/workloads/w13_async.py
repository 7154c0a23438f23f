"""W13 adding from async code: 50 tasks of one event loop add 1,000 jobs at once, with ``add_async`` and
with the blocking ``add`` called from the loop.

A ticker task of the same loop wakes every millisecond and keeps the longest
gap between two wake-ups: the loop's longest stall, which every other task
of the loop (an ASGI server's requests) would wait too. The rows give the
adds per second and that stall for each call, and their ratios in the same
run: ``add_async`` hands its commit to the writer thread and awaits it
(ASY-01), so the loop runs meanwhile; ``add`` holds the loop for each
commit's fsync or round trip.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable

import tinystore

from common import QUEUE, Context, Row, ratio

TITLE = "add_async and add from an event loop"


async def _adding(queue: tinystore.Queue, jobs: int, tasks: int, add: Callable[..., Any]) -> tuple[float, float]:
    """``jobs`` adds by ``tasks`` tasks at once: the seconds they took, and the loop's longest stall."""
    longest = 0.0

    async def tick() -> None:
        nonlocal longest
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            longest = max(longest, now - last)
            last = now

    async def task(n: int) -> None:
        for i in range(n, jobs, tasks):
            await add(queue, {"n": i})

    ticker = asyncio.ensure_future(tick())
    await asyncio.sleep(0.01)
    began = time.perf_counter()
    await asyncio.gather(*(task(n) for n in range(tasks)))
    seconds = time.perf_counter() - began
    await asyncio.sleep(0.005)
    ticker.cancel()
    return seconds, longest


async def _add_async(queue: tinystore.Queue, payload: Any) -> None:
    await queue.add_async(payload)


async def _add(queue: tinystore.Queue, payload: Any) -> None:
    queue.add(payload)  # blocks the loop for its commit


def run(ctx: Context) -> list[Row]:
    jobs, tasks = ctx.sizes["w13_jobs"], ctx.sizes["w13_tasks"]
    figures = {}
    for name, add in (("add_async", _add_async), ("add", _add)):
        path = ctx.path(f"w13_{name}")
        store = tinystore.open(path, durability=ctx.durability)
        try:
            seconds, stall = asyncio.run(_adding(store.queue(QUEUE), jobs, tasks, add))
            assert store.stats()[QUEUE]["waiting"] == jobs
        finally:
            store.close()
            ctx.remove(path)
        figures[name] = (jobs / seconds, stall * 1000)
    (async_rate, async_stall), (sync_rate, sync_stall) = figures["add_async"], figures["add"]
    title = f"{tasks} tasks adding {jobs:,} jobs at once"
    return [
        Row("W13", f"add_async, {title}", async_rate, "adds/s", ratio(async_rate, sync_rate), "add from the loop"),
        Row("W13", f"add from the loop, {title}", sync_rate, "adds/s"),
        Row("W13", "add_async: the loop's longest stall", async_stall, "ms", ratio(async_stall, sync_stall),
            "add from the loop", target="a twentieth of add's at most", met=async_stall <= sync_stall / 20),
        Row("W13", "add from the loop: the loop's longest stall", sync_stall, "ms"),
    ]
