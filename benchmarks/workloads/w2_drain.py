"""W2 drain: no-op jobs already added, then worker processes run them until none is left.

Each size is added once (``add_many`` by 1,000) to a template file; every
case drains a copy of it (``--repeat N``: N copies, the fastest drain
reported). A worker is ``benchmarks/child.py drain``: it opens the store,
says ready, and on "go" runs ``run_until_idle()``. The time runs from the
first worker's "go" to the moment the last job's handler has run, counted
across processes in a shared tally file (so a ``run_until_idle()`` that does
not return is reported, not waited for). Commits are the writer
transactions the workers made (see ``CommitCounter``).
"""

from __future__ import annotations

import time
from typing import Any, Optional

from common import QUEUE, Context, Row, Tally, best_of, fill, finish, ratio, read_json, read_line, say, start_child

TITLE = "drain"
DUE = "SELECT count(*) FROM {jobs} WHERE queue = ? AND state = 'queued' AND at <= ?"
LEFT = "SELECT count(*) FROM {jobs} WHERE queue = ? AND state != 'done' AND at <= ?"

CASES = [  # (case name, handler, processes)
    ("async, 1 process", "async", 1),
    ("sync, 1 process", "sync", 1),
    ("async, 2 processes", "async", 2),
]


def template(ctx: Context, jobs: int, **fill_args: Any) -> str:
    """A closed store holding ``jobs`` due no-op jobs (built once per run and size)."""
    key = f"w2-template-{jobs}"
    if key not in ctx.templates:
        path = ctx.path(key)
        fill(path, ctx.durability, jobs, **fill_args)
        ctx.templates[key] = path
    return ctx.templates[key]


def drain(ctx: Context, path: str, handler: str = "async", processes: int = 1, steps: int = 3) -> dict[str, Any]:
    """Run ``processes`` workers over the store at ``path`` until it is empty; what they measured."""
    durability = ctx.durability
    jobs = ctx.count(path, DUE, (QUEUE, time.time()))
    tally = ctx.target.tally(path)
    Tally.create(tally)  # before the children start: none of them truncates it under another's map
    children = [start_child("drain", path, "--durability", durability, "--handler", handler, "--steps", str(steps),
                            "--tally", tally, "--slot", str(slot), "--expect", str(jobs))
                for slot in range(processes)]
    try:
        for child in children:
            read_line(child, "ready", timeout=120)
        for child in children:
            say(child, "go")
        results = [read_json(child) for child in children]
    finally:
        for child in children:
            finish(child)
    commits = [r["commits"] for r in results]
    return {
        "seconds": min(r["ended"] for r in results) - min(r["began"] for r in results),
        "handled": sum(r["handled"] for r in results),
        "until_idle_returned": all(r["until_idle_returned"] for r in results),
        "commits": None if None in commits else sum(commits),
        "peak_rss_mib": max(r["peak_rss_mib"] or 0 for r in results) or None,
        "rss_before_mib": max(r["rss_before_mib"] or 0 for r in results) or None,
        "left": ctx.count(path, LEFT, (QUEUE, time.time())),
        "per_process": results,
    }


def drain_copy(ctx: Context, source: str, name: str, handler: str = "async", processes: int = 1,
               steps: int = 3) -> dict[str, Any]:
    """``drain`` a fresh copy of ``source``, best of ``ctx.repeat`` runs; each copy is deleted after."""
    def once() -> dict[str, Any]:
        path = ctx.copy(source, name)
        try:
            return drain(ctx, path, handler, processes, steps)
        finally:
            ctx.remove(path)
    return best_of(ctx, once)


def row(workload: str, case: str, jobs: int, measured: dict[str, Any], ctx: Context, target: str = "",
        met: Optional[bool] = None, reference: Optional[float] = None, vs: str = "") -> Row:
    rate = jobs / measured["seconds"] if measured["seconds"] > 0 else None
    commits = measured["commits"]
    extra = {"jobs": jobs, "seconds": measured["seconds"], "commits": commits,
             "commits_per_job": None if commits is None else commits / jobs,
             "peak_rss_mib": measured["peak_rss_mib"], "rss_before_mib": measured["rss_before_mib"],
             "left": measured["left"], "until_idle_returned": measured["until_idle_returned"],
             "runs_seconds": measured.get("runs_seconds")}
    if measured["left"]:
        target, met = f"{target}; {measured['left']} jobs left undone".lstrip("; "), False
    if not measured["until_idle_returned"]:
        extra["note"] = "run_until_idle() had not returned 3 s after the last job ran"
    if reference is None:
        reference, vs = ctx.baseline["life_batched"], "raw life, 100 rows/txn"
    return Row(workload, case, rate, "jobs/s", ratio(rate, reference), vs, target, met, extra)


def run(ctx: Context) -> list[Row]:
    rows = []
    for jobs in ctx.sizes["w2_jobs"]:
        source = template(ctx, jobs)
        one: Optional[float] = None
        for case, handler, processes in CASES:
            measured = drain_copy(ctx, source, f"w2-{jobs}-{handler}-{processes}", handler, processes)
            target, met = "", None
            rate = jobs / measured["seconds"]
            if handler == "async" and processes == 1:
                goal, one = ctx.goal("w2_async_per_s"), rate
                target, met = f">= {goal:,.0f} jobs/s", rate >= goal
            elif handler == "sync" and ctx.goal("w2_sync_per_s") is not None:
                goal = ctx.goal("w2_sync_per_s")
                target, met = f">= {goal:,.0f} jobs/s", rate >= goal
            elif processes == 2 and one is not None:
                target, met = ">= 1 process", rate >= one
            rows.append(row("W2", f"{jobs:,} jobs, {case}", jobs, measured, ctx, target, met))
    return rows
