"""W5 recovery: a process dies (SIGKILL) holding leases; how long the next open takes to end them.

A worker (``child.py hold``) claims every job of a copy of W2's template
with ``serve(workers=N)`` and handlers that never end; once all N run, it is
killed with SIGKILL. The file and WAL it left are copied a few times
(``w5_repeats``); on each copy ``tinystore.open`` is timed here (it ends the
dead process's leases, DUR-03), then a second open of the same copy, with
nothing to end: the fixed cost of an open. The figure is the difference of
the medians, per 1,000 leases. On every copy the leases must all be gone and
the jobs queued again, their attempt counted. Beside it: how long plain
sqlite3 takes for its first read of such a copy (SQLite's own recovery of
the WAL index, which the first open pays too).

On PostgreSQL the killed worker's database is copied with ``CREATE DATABASE
... TEMPLATE`` (its registration and leases are rows; its liveness lock, a
session's advisory lock, went with its connections), and the open of each
copy finds it dead in ``pg_locks`` and ends its leases; the raw read beside
it is a plain psycopg connection counting the leases.
"""

from __future__ import annotations

import statistics
import time

import tinystore

from common import QUEUE, Context, Row, finish, read_line, start_child
from workloads.w2_drain import template

TITLE = "recovery"
REQUEUED = "SELECT count(*) FROM {jobs} WHERE queue = ? AND state = 'queued' AND attempt = 1"
LEASES = "SELECT count(*) FROM {leases}"


def _timed_open(path: str, durability: str) -> float:
    began = time.perf_counter()
    store = tinystore.open(path, durability=durability)
    seconds = time.perf_counter() - began
    store.close()
    return seconds


def _crash_holding(ctx: Context, leases: int) -> tuple[str, float]:
    """A store file left by a process killed while it held ``leases`` leases; the seconds it took to claim them."""
    path = ctx.copy(template(ctx, leases), f"w5-{leases}")
    child = start_child("hold", path, "--durability", ctx.durability, "--leases", str(leases))
    try:
        read_line(child, "ready", timeout=120)
        began = time.perf_counter()
        read_line(child, "held", timeout=600)
        claimed = time.perf_counter() - began
        child.kill()  # SIGKILL: its leases stay in the file
        child.wait()
    finally:
        finish(child)
    return path, claimed


def run(ctx: Context) -> list[Row]:
    rows = []
    for leases in ctx.sizes["w5_leases"]:
        crashed, claimed = _crash_holding(ctx, leases)
        raw_copy = ctx.target.copy_as_left(crashed, f"w5-{leases}-raw")
        began = time.perf_counter()
        held = ctx.count(raw_copy, LEASES)  # SQLite's own WAL recovery
        raw = time.perf_counter() - began
        ctx.remove(raw_copy)
        firsts, seconds, ok = [], [], held == leases
        for i in range(ctx.sizes["w5_repeats"]):
            path = ctx.target.copy_as_left(crashed, f"w5-{leases}-{i}")
            firsts.append(_timed_open(path, ctx.durability))
            ok = ok and ctx.count(path, LEASES) == 0
            ok = ok and ctx.count(path, REQUEUED, (QUEUE,)) == leases
            seconds.append(_timed_open(path, ctx.durability))
            ctx.remove(path)
        ctx.remove(crashed)
        first, second = statistics.median(firsts), statistics.median(seconds)
        per_1000 = (first - second) * 1000 / leases * 1000
        goal = ctx.goal("w5_ms_per_1000")
        if goal is None:
            target, met = "every lease ended, every job queued again", ok
        else:
            target, met = f"<= {goal:g} ms per 1,000 leases", per_1000 <= goal and ok
        rows.append(Row("W5", f"open after a crash with {leases:,} leases, per 1,000", per_1000, "ms",
                        None, "", target, met,
                        {"leases_held": held, "open_ms_median": first * 1000, "clean_open_ms_median": second * 1000,
                         "open_ms": [t * 1000 for t in firsts], "clean_open_ms": [t * 1000 for t in seconds],
                         f"raw_{ctx.target.name}_first_read_ms": raw * 1000, "all_ended_and_requeued": ok,
                         "claim_seconds_in_child": claimed}))
    return rows
