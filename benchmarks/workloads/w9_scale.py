"""W9 scale-out: 1, 2, 4 and 8 worker processes on one queue of I/O-bound jobs; the steady rate against the ideal.

Each job's handler awaits ``asyncio.sleep(50 ms)`` (a call to another
service) and each process runs 20 at once (``serve(workers=20)``), so N
processes could run N x 20 / 50 ms jobs a second if claiming and settling
cost nothing: 400/s for one, 3,200/s for eight. The queue is filled
beforehand with more jobs than the measurement takes (``add_many``); the
workers (``benchmarks/child.py scale``) start on "go" and count each job in
a shared tally file. The rate is the tally's growth over a window that
starts after a warm-up (the first claims, a full set of handlers running),
so neither the start nor the end of the queue is measured. The jobs left
over are dropped with the store. Beside the rate: the workers' CPU time per
job in the window, and how busy the machine's cores were (``/proc/stat``:
every process, the server's included), which says whether the processes
were waiting for each other or for a CPU.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any, Optional

from common import Context, Row, Tally, fill, finish, ratio, read_line, say, start_child

TITLE = "scale-out"


def measure(ctx: Context, processes: int) -> dict[str, Any]:
    sizes = ctx.sizes
    slots, sleep = sizes["w9_slots"], sizes["w9_handler_s"]
    ideal = processes * slots / sleep
    warmup, window = sizes["w9_warmup_s"], sizes["w9_window_s"]
    jobs = int(ideal * (warmup + window) * 1.5) + 1_000  # never runs out, even at the ideal rate
    location = ctx.path(f"w9-{processes}")
    try:
        fill(location, ctx.durability, jobs)
        tally_path = ctx.target.tally(location)
        Tally.create(tally_path)
        tally = Tally(tally_path)
        children = [start_child("scale", location, "--durability", ctx.durability, "--workers", str(slots),
                                "--sleep", repr(sleep), "--tally", tally_path, "--slot", str(slot))
                    for slot in range(processes)]
        try:
            for child in children:
                read_line(child, "ready", timeout=120)
            for child in children:
                say(child, "go")
            time.sleep(warmup)  # the measurement's window, not a synchronisation: the tally says what ran
            first, began = tally.total(), time.perf_counter()
            cpu_before, machine_before = [_cpu_seconds(c.pid) for c in children], _machine()
            time.sleep(window)
            last, ended = tally.total(), time.perf_counter()
            cpu_after, machine_after = [_cpu_seconds(c.pid) for c in children], _machine()
            shares = [tally.of(slot) for slot in range(processes)]
        finally:
            for child in children:
                child.send_signal(signal.SIGTERM)
            for child in children:
                finish(child)
    finally:
        ctx.remove(location)
    workers_cpu = sum(after - before for before, after in zip(cpu_before, cpu_after))
    busy, total = (after - before for before, after in zip(machine_before, machine_after))
    return {"rate": (last - first) / (ended - began), "ideal": ideal, "jobs": jobs, "ran_in_window": last - first,
            "ran_by_process": shares, "seconds": ended - began, "ran_out": last >= jobs,
            "workers_cpu_s": workers_cpu, "workers_cpu_ms_per_job": 1000 * workers_cpu / max(1, last - first),
            "machine_busy": busy / total if total else None}


def _cpu_seconds(pid: int) -> float:
    """A process's CPU time so far, user and system (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _machine() -> tuple[int, int]:
    """The machine's CPU time so far, busy and in all, in ticks (Linux /proc/stat): its load in the window."""
    with open("/proc/stat") as f:
        ticks = [int(t) for t in f.readline().split()[1:]]
    idle = ticks[3] + ticks[4]  # idle, iowait
    return sum(ticks) - idle, sum(ticks)


def run(ctx: Context) -> list[Row]:
    rows = []
    rates: dict[int, float] = {}
    for processes in ctx.sizes["w9_processes"]:
        runs = [measure(ctx, processes) for _ in range(ctx.repeat)]
        best = max(runs, key=lambda r: r["rate"])
        rates[processes] = rate = best["rate"]
        target, met = "", None
        if ctx.postgres and processes == 4:
            target, met = ">= 0.8x ideal", rate >= 0.8 * best["ideal"]
        elif ctx.postgres and processes == 8 and 4 in rates:
            target, met = "> 4 processes", rate > rates[4]
        if best["ran_out"]:
            target, met = f"{target}; the queue ran out of jobs".lstrip("; "), False
        slots, sleep = ctx.sizes["w9_slots"], ctx.sizes["w9_handler_s"]
        rows.append(Row("W9", f"{processes} process{'es' if processes > 1 else ''} x {slots} at once, "
                        f"{sleep * 1000:g} ms jobs", rate, "jobs/s", ratio(rate, best["ideal"]),
                        f"ideal {best['ideal']:,.0f}/s", target, met,
                        {**best, "runs_rate": [r["rate"] for r in runs],
                         "vs_one_process": ratio(rate, rates.get(1))}))
    return rows
