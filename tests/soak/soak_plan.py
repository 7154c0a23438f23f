"""The soak's queues, and the plan of each job: what its handler does on each attempt.

Shared by the supervisor (``run.py``), the children (``soak_child.py``) and
the checker (``soak_check.py``), so that all three read the same limits.

A job's payload is its plan::

    {"ms": [120, 40, 300],   # one step per entry; each step's fn sleeps that long
     "raise": [1],           # attempts (run.attempt) that raise after the first step
     "retry": [2],           # attempts that return run.retry("200ms") after the first step
     "fail": [1],            # attempts that return run.fail("planned fail") after the first step
     "snooze": true,         # the first run to keep step "snz" returns run.snooze("200ms")
     "slow": [1],            # attempts that sleep SLOW seconds (well past a 1 s timeout) after step s0
     "stubborn": true}       # a def handler that keeps running after run.cancelled turns true

The plan depends only on ``run.attempt`` and on which steps the store
already keeps, so a job does the same whichever process runs it, however
often its runs are killed.
"""

from __future__ import annotations

import math
import random
from typing import Any, Optional

LEASE = 2.0          # every queue's lease: a SIGSTOPped worker's leases run out within the run
GRACE = 5.0          # serve(grace=...): longer than any planned handler (SLOW is the longest)
SLOTS = 8            # serve(workers=SLOTS): handlers of each queue at once in one worker
SLOW = 2.0           # how long a planned past-timeout attempt sleeps, on top of its first step
ANSWER_DELAY = "200ms"  # run.snooze and run.retry

COMMON = {"attempts": 20, "backoff": ("100ms", "1s"), "lease": "2s", "dedupe": "1h"}

# kind: "async" (async def, on the loop) or "def" (a thread). share: of the producer's jobs.
# ms: the range of each step's sleep, in milliseconds. burst: jobs are due together at every
# multiple of burst seconds (+ offset), so that the queue's limit binds.
QUEUES: dict[str, dict[str, Any]] = {
    "aio": {"kind": "async", "share": 0.22, "timeout": 10.0, "steps": 3, "ms": (10, 130)},
    "thr": {"kind": "def", "share": 0.16, "timeout": 10.0, "steps": 2, "ms": (10, 150)},
    "tmo_async": {"kind": "async", "share": 0.07, "timeout": 1.0, "steps": 2, "ms": (100, 350), "slow": 0.08},
    "tmo_def": {"kind": "def", "share": 0.05, "timeout": 1.0, "steps": 2, "ms": (100, 350), "slow": 0.08,
                "concurrency": 2},
    "conc": {"kind": "async", "share": 0.12, "timeout": 10.0, "steps": 2, "ms": (50, 250), "concurrency": 3,
             "burst": 2.0, "offset": 0.0},
    "grp": {"kind": "def", "share": 0.16, "timeout": 10.0, "steps": 2, "ms": (25, 125), "group_concurrency": 1,
            "groups": 12, "burst": 3.0, "offset": 0.5},
    "rate": {"kind": "async", "share": 0.22, "timeout": 10.0, "steps": 2, "ms": (5, 50), "rate": (20, 1.0),
             "burst": 3.0, "offset": 1.5},
}


def options(name: str) -> dict[str, Any]:
    """The options every process gives ``store.queue(name, ...)``."""
    spec = QUEUES[name]
    opts = dict(COMMON, timeout=spec["timeout"])
    for key in ("concurrency", "group_concurrency"):
        if key in spec:
            opts[key] = spec[key]
    if "rate" in spec:
        count, period = spec["rate"]
        opts["rate"] = (count, period)
    return opts


def pick_queue(rng: random.Random) -> str:
    names = list(QUEUES)
    return rng.choices(names, weights=[QUEUES[n]["share"] for n in names])[0]


def make_job(rng: random.Random, name: str, now: float) -> tuple[dict[str, Any], Optional[str], Optional[float]]:
    """A job for queue ``name``: its plan (the payload), its group, and when it is due (None: now)."""
    spec = QUEUES[name]
    lo, hi = spec["ms"]
    plan: dict[str, Any] = {"ms": [rng.randint(lo, hi) for _ in range(spec["steps"])]}
    r = rng.random()
    if r < 0.10:
        plan["raise"] = [1] if rng.random() < 0.7 else [1, 2]
    elif r < 0.15:
        plan["retry"] = [rng.choice([1, 2])]
    elif r < 0.17:
        plan["fail"] = [1]
    if rng.random() < 0.05:
        plan["snooze"] = True
    if spec.get("slow") and rng.random() < spec["slow"]:
        plan["slow"] = [1] if rng.random() < 0.7 else [1, 2]
        if spec["kind"] == "def" and rng.random() < 0.5:
            plan["stubborn"] = True
    group = f"g{rng.randrange(spec['groups']):02d}" if "groups" in spec else None
    at = None
    if "burst" in spec:
        period, offset = spec["burst"], spec["offset"]
        at = (math.floor((now - offset) / period) + 1) * period + offset
    return plan, group, at
