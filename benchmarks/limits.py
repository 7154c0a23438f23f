"""Claim throughput under limits: no limits, a queue limit, 10,000 groups and one hot group.

    python benchmarks/limits.py [--small] [--durability full|normal|off] [--out PATH]

Each case fills a fresh store file with a backlog through the public API
(``add_many``, 10,000 jobs a transaction) and drains it twice over:

- claim cycles: the transaction a worker runs, called in a loop on the
  store's backend: settle what the previous cycle claimed (done), claim up
  to WANT more. This is the claim path alone, with nothing else running; the
  table gives jobs/s, milliseconds per cycle, and SQLite VM steps per claimed
  job (a count of work that does not depend on the machine's load: it must
  not grow with the jobs waiting behind full groups);
- worker: ``store.start(workers=WANT)`` with an ``async`` handler that does
  nothing, end to end (claims, handler tasks, settlements, notices), for the
  other half of the backlog or at most SECONDS.

The cases:

- ``none``: no limits, jobs without a group;
- ``concurrency``: the same jobs, ``concurrency=CONCURRENCY`` (so each cycle
  claims at most that many: a queue that may use that many of the workers);
- ``groups+hot``: ``group_concurrency=1``; 10,000 groups, and one hot group
  holding most jobs, added first so that its jobs are ahead of everyone's.
  The hot group runs one job at a time; the figure is the rate of the other
  groups' jobs, which must not wait behind it (hot jobs run meanwhile are
  reported beside it). Its ratio to ``none`` is the cost of set-aside groups.

Prints a table and writes JSON (default ``benchmarks/results/limits.json``).
``main(argv)`` is what ``benchmarks/run.py --only LIMITS`` calls.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sqlite3
import sys
import tempfile
import threading
import time
from typing import Any, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "src"))  # run from a checkout without installing

import tinystore  # noqa: E402
from tinystore._settle import Done  # noqa: E402
from tinystore.backends._base import Settlement  # noqa: E402

WANT = 100          # jobs a cycle asks for: the free slots of a worker
CONCURRENCY = 20    # the queue limit of the "concurrency" case
BATCH = 10_000      # jobs per add_many
HOT = "hot"

SIZES = {
    "full": {"plain": 200_000, "groups": 10_000, "per_group": 10, "hot": 900_000, "seconds": 20.0},
    "small": {"plain": 20_000, "groups": 10_000, "per_group": 1, "hot": 40_000, "seconds": 5.0},
}


# Filling

def fill(store: tinystore.Store, queue: tinystore.Queue, jobs: list[tuple[dict, Optional[str]]]) -> float:
    """Add (payload, group) jobs in batches; the seconds it took."""
    started = time.perf_counter()
    for i in range(0, len(jobs), BATCH):
        queue.add_many([tinystore.Job(payload, group=grp) for payload, grp in jobs[i:i + BATCH]])
    return time.perf_counter() - started


def payload(n: int) -> dict[str, Any]:
    return {"n": n, "kind": "reply", "message_id": 41_000 + n}


# Claim cycles

def claim_cycles(store: tinystore.Store, queue: tinystore.Queue, until: Any) -> dict[str, Any]:
    """Settle-and-claim cycles, as a worker runs them, until ``until(claimed jobs)`` says stop."""
    backend, owner = store._backend, store._ctx.owner
    conn = backend._writer_conn()
    steps = [0]

    def tick() -> int:
        steps[0] += 1
        return 0

    held: list[Any] = []
    claimed: list[Any] = []
    cycles = 0
    conn.set_progress_handler(tick, 1000)
    started = time.perf_counter()
    try:
        while not until(claimed):
            settlements = [Settlement(c.seq, c.attempt, c.grp, Done(None)) for c in held]
            cycle = backend.cycle(queue.name, owner, settlements, WANT, time.time()).result()
            cycles += 1
            held = cycle.claimed
            if not held:
                break
            claimed.extend(held)
        elapsed = time.perf_counter() - started
    finally:
        conn.set_progress_handler(None, 1000)
    if held:  # settle the last claims, outside the measure
        settlements = [Settlement(c.seq, c.attempt, c.grp, Done(None)) for c in held]
        backend.cycle(queue.name, owner, settlements, 0, time.time()).result()
    return {"claimed": claimed, "cycles": cycles, "seconds": elapsed, "vm_steps": steps[0] * 1000}


# Worker

def worker(store: tinystore.Store, queue: tinystore.Queue, count: Any, target: int, seconds: float) -> dict[str, Any]:
    """Serve with an async handler that does nothing until ``target`` counted jobs ran, or ``seconds`` passed."""
    lock = threading.Lock()
    ran = {"counted": 0, "other": 0}
    enough = threading.Event()

    @queue.work
    async def handle(payload: Any, run: tinystore.AsyncRun) -> None:
        with lock:
            key = "counted" if count(run) else "other"
            ran[key] += 1
            if ran["counted"] >= target:
                enough.set()

    started = time.perf_counter()
    store.start(workers=WANT)
    enough.wait(seconds)
    elapsed = time.perf_counter() - started
    with lock:
        counted, other = ran["counted"], ran["other"]
    store.stop()
    return {"counted": counted, "other": other, "seconds": elapsed}


# Cases

def row(case: str, measure: str, jobs: int, seconds: float, **extra: Any) -> dict[str, Any]:
    return {"case": case, "measure": measure, "jobs": jobs, "seconds": round(seconds, 3),
            "jobs_per_s": round(jobs / seconds, 1) if seconds > 0 else None, **extra}


def plain_case(name: str, folder: str, durability: str, sizes: dict, options: dict) -> list[dict[str, Any]]:
    path = os.path.join(folder, f"{name}.db")
    store = tinystore.open(path, durability=durability)
    try:
        queue = store.queue("bench", **options)
        total = sizes["plain"]
        fill_s = fill(store, queue, [(payload(n), None) for n in range(total)])
        half = total // 2
        c = claim_cycles(store, queue, lambda claimed: len(claimed) >= half)
        jobs = len(c["claimed"])
        rows = [row(name, "claim cycles", jobs, c["seconds"], cycles=c["cycles"],
                    ms_per_cycle=round(1000 * c["seconds"] / max(1, c["cycles"]), 3),
                    vm_steps_per_job=round(c["vm_steps"] / max(1, jobs)), fill_seconds=round(fill_s, 2),
                    backlog=total)]
        w = worker(store, queue, lambda run: True, total - jobs, sizes["seconds"])
        rows.append(row(name, "worker", w["counted"], w["seconds"], backlog=total - jobs))
        return rows
    finally:
        store.close()


def hot_case(folder: str, durability: str, sizes: dict) -> list[dict[str, Any]]:
    name = "groups+hot"
    path = os.path.join(folder, "groups-hot.db")
    store = tinystore.open(path, durability=durability)
    try:
        queue = store.queue("bench", group_concurrency=1)
        groups, per_group, hot = sizes["groups"], sizes["per_group"], sizes["hot"]
        jobs = [(payload(n), HOT) for n in range(hot)]  # first: ahead of every other group's jobs
        jobs += [(payload(hot + n), f"g{n % groups}") for n in range(groups * per_group)]
        fill_s = fill(store, queue, jobs)
        others = groups * per_group
        half = others // 2
        c = claim_cycles(store, queue, lambda claimed: sum(1 for x in claimed if x.grp != HOT) >= half)
        other_jobs = sum(1 for x in c["claimed"] if x.grp != HOT)
        hot_jobs = len(c["claimed"]) - other_jobs
        rows = [row(name, "claim cycles", other_jobs, c["seconds"], hot_jobs_meanwhile=hot_jobs, cycles=c["cycles"],
                    ms_per_cycle=round(1000 * c["seconds"] / max(1, c["cycles"]), 3),
                    vm_steps_per_job=round(c["vm_steps"] / max(1, len(c["claimed"]))),
                    fill_seconds=round(fill_s, 2), backlog=len(jobs), groups=groups + 1,
                    waiting_behind_hot=hot - 1)]
        w = worker(store, queue, lambda run: run.group != HOT, others - other_jobs, sizes["seconds"])
        rows.append(row(name, "worker", w["counted"], w["seconds"], hot_jobs_meanwhile=w["other"],
                        backlog=len(jobs) - len(c["claimed"])))
        return rows
    finally:
        store.close()


# Report

def environment(durability: str) -> dict[str, Any]:
    return {"cores": os.cpu_count(), "python": platform.python_version(), "sqlite": sqlite3.sqlite_version,
            "durability": durability, "tinystore": tinystore.__version__, "platform": platform.platform(),
            "load_average_at_start": list(os.getloadavg()), "want_per_cycle": WANT,
            "concurrency": CONCURRENCY}


def table(env: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    lines = [f"tinystore limits benchmark: {env['cores']} cores, Python {env['python']}, SQLite {env['sqlite']}, "
             f"durability={env['durability']}, {WANT} jobs asked per cycle, load {env['load_average_at_start'][0]:.1f}",
             f"{'case':<12} {'measure':<13} {'jobs':>8} {'jobs/s':>10} {'vs none':>8} {'ms/cycle':>9} "
             f"{'VM steps/job':>13}  notes"]
    reference = {r["measure"]: r["jobs_per_s"] for r in rows if r["case"] == "none"}
    for r in rows:
        ref = reference.get(r["measure"])
        vs = f"{r['jobs_per_s'] / ref:.2f}" if ref and r["jobs_per_s"] else "-"
        notes = []
        if "hot_jobs_meanwhile" in r:
            notes.append(f"{r['hot_jobs_meanwhile']} hot jobs meanwhile")
        if "waiting_behind_hot" in r:
            notes.append(f"{r['waiting_behind_hot']:,} waiting behind the hot group, {r['groups']:,} groups")
        if "fill_seconds" in r:
            notes.append(f"backlog {r['backlog']:,} added in {r['fill_seconds']:.1f}s")
        lines.append(f"{r['case']:<12} {r['measure']:<13} {r['jobs']:>8} {r['jobs_per_s'] or 0:>10,.0f} {vs:>8} "
                     f"{r.get('ms_per_cycle', '-'):>9} {r.get('vm_steps_per_job', '-'):>13}  {'; '.join(notes)}")
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--small", action="store_true", help="a backlog that fills in seconds (10,000 groups still)")
    parser.add_argument("--durability", choices=["full", "normal", "off"], default="full")
    parser.add_argument("--out", default=os.path.join(HERE, "results", "limits.json"))
    parser.add_argument("--folder", default=None, help="where the store files go (a temporary folder if not given)")
    args = parser.parse_args(argv)
    sizes = SIZES["small" if args.small else "full"]
    env = environment(args.durability)
    folder = args.folder or tempfile.mkdtemp(prefix="tinystore-limits-")
    os.makedirs(folder, exist_ok=True)
    rows: list[dict[str, Any]] = []
    try:
        rows += plain_case("none", folder, args.durability, sizes, {})
        rows += plain_case("concurrency", folder, args.durability, sizes, {"concurrency": CONCURRENCY})
        rows += hot_case(folder, args.durability, sizes)
    finally:
        if args.folder is None:
            shutil.rmtree(folder, ignore_errors=True)
    print(table(env, rows))
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"environment": env, "sizes": sizes, "rows": rows}, f, indent=2)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
