"""W3 latency: one job every 20 ms into an idle worker; from the add call to the handler's start.

The adder reads ``time.time()`` just before ``add`` and puts it in the
payload; the handler reads ``time.time()`` first thing and records the
difference. The worker runs in this process (``store.start()``, a serving
thread) or in another (``benchmarks/child.py latency``, ``serve()``). A first
job warms the worker up and is not counted. Then jobs due a little ahead
(``at=``): how late each starts after its time.
"""

from __future__ import annotations

import queue as queues
import signal
import threading
import time
from typing import Any, Callable

import tinystore

from common import QUEUE, Context, Row, finish, percentile, read_line, start_child

TITLE = "latency"


def _paced(add: Callable[[int, float, Any], None], wait: Callable[[int], float], ctx: Context) -> tuple[list, list]:
    """Add the paced jobs, then the due ones; the latencies and the lateness, in seconds."""
    sizes = ctx.sizes
    add(0, time.time(), None)
    wait(0)  # warm-up
    interval, latencies = sizes["w3_interval"], []
    nxt = time.monotonic()
    for n in range(1, sizes["w3_jobs"] + 1):
        add(n, time.time(), None)
        nxt += interval
        time.sleep(max(0.0, nxt - time.monotonic()))
    for n in range(1, sizes["w3_jobs"] + 1):
        latencies.append(wait(n))
    late = []
    for k in range(sizes["w3_due"]):
        n = 1_000_000 + k
        due = time.time() + sizes["w3_due_ahead"]
        add(n, due, due)
        late.append(wait(n))
        time.sleep(interval)
    return latencies, late


def same_process(ctx: Context) -> tuple[list, list]:
    store = tinystore.open(ctx.path("w3-same"), durability=ctx.durability)
    queue = store.queue(QUEUE)
    seen: dict[int, float] = {}
    cv = threading.Condition()

    @queue.work
    async def handle(payload: Any, run: Any) -> None:
        started = time.time()
        with cv:
            seen[payload["n"]] = started - payload["t"]
            cv.notify_all()

    def add(n: int, t: float, at: Any) -> None:
        queue.add({"n": n, "t": t}, at=at)

    def wait(n: int) -> float:
        with cv:
            if not cv.wait_for(lambda: n in seen, timeout=30):
                raise RuntimeError(f"job {n} never started")
            return seen[n]

    store.start()
    try:
        return _paced(add, wait, ctx)
    finally:
        store.close()


def other_process(ctx: Context) -> tuple[list, list]:
    path = ctx.path("w3-other")
    store = tinystore.open(path, durability=ctx.durability)
    queue = store.queue(QUEUE)
    child = start_child("latency", path, "--durability", ctx.durability)
    lines: "queues.Queue[str]" = queues.Queue()
    seen: dict[int, float] = {}
    try:
        read_line(child, "ready", timeout=60)
        reader = threading.Thread(target=lambda: [lines.put(ln) for ln in child.stdout], daemon=True)
        reader.start()

        def add(n: int, t: float, at: Any) -> None:
            queue.add({"n": n, "t": t}, at=at)

        def wait(n: int) -> float:
            deadline = time.monotonic() + 30
            while n not in seen:
                line = lines.get(timeout=max(0.001, deadline - time.monotonic()))
                if line.startswith("lat "):
                    _, k, seconds = line.split()
                    seen[int(k)] = float(seconds)
            return seen[n]

        return _paced(add, wait, ctx)
    finally:
        child.send_signal(signal.SIGTERM)
        finish(child)
        store.close()


def _rows(where: str, latencies: list, late: list, ctx: Context) -> list[Row]:
    ms = [s * 1000 for s in latencies]
    # Jobs come one every 20 ms, so the add's commit, and the claim's, each come after an idle
    # pause: "one commit" is the raw commit made at the same pace (baseline.py, commit_paced_ms).
    commit = ctx.baseline["commit_paced_ms"]
    if where == "same process":
        targets = {50: (commit + 1, f"<= one paced commit + 1 ms ({commit + 1:.2f})")}
        goals = {99: ctx.goal("w3_same_p99_ms")}
    else:
        targets, goals = {}, {50: ctx.goal("w3_other_p50_ms"), 99: ctx.goal("w3_other_p99_ms")}
    targets.update({p: (goal, f"<= {goal:g} ms") for p, goal in goals.items() if goal is not None})
    rows = []
    for p in (50, 90, 99):
        value = percentile(ms, p)
        limit, words = targets.get(p, (None, ""))
        rows.append(Row("W3", f"add->start p{p}, {where}", value, "ms", value / commit, "one paced raw commit",
                        words, None if limit is None else value <= limit,
                        {"jobs": len(ms), "max_ms": max(ms), "mean_ms": sum(ms) / len(ms),
                         "vs_back_to_back_commit": value / ctx.baseline["commit_ms"]}))
    late_ms = [s * 1000 for s in late]
    rows.append(Row("W3", f"due job, late by (median), {where}", percentile(late_ms, 50), "ms", None, "", "", None,
                    {"jobs": len(late_ms), "max_ms": max(late_ms), "all_ms": late_ms}))
    return rows


def run(ctx: Context) -> list[Row]:
    return _rows("same process", *same_process(ctx), ctx) + _rows("other process", *other_process(ctx), ctx)
