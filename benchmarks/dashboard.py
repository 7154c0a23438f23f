"""How fast the dashboard answers on a big store: each request the page makes, timed (nothing is asserted).

    .venv/bin/python benchmarks/dashboard.py --jobs 300000 [--keep big.db] [--postgres URL]

It fills a store with jobs done (kept by dedupe), failed, waiting and
scheduled in groups, run by a real worker, serves the dashboard with the
real command, and times each request the page makes, printing the median
and the slowest of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from typing import Any

import tinystore

TOKEN = "measure"
BATCH = 10_000


def fill(target: str, jobs: int) -> tuple[list[str], str]:
    """``jobs`` jobs in queue "big": 2/3 done, 1/15 failed, the rest waiting and scheduled; their ids."""
    store = tinystore.open(target, durability="off")
    big = store.queue("big", attempts=1, dedupe="1d", group_concurrency=50, rate="10000000/m")

    @big.work
    async def handle(payload: Any, run: Any) -> None:
        if payload["n"] % 10 == 0:
            raise ValueError(f"job {payload['n']} fails")

    ran = jobs * 11 // 15  # done and failed
    started = time.monotonic()
    for first in range(0, ran, BATCH):
        big.add_many([tinystore.Job({"n": n}, group=f"g{n % 1000}") for n in range(first, min(ran, first + BATCH))])
        store.run_until_idle()
    for first in range(ran, jobs, BATCH):
        items = [tinystore.Job({"n": n}, group=f"g{n % 1000}", delay="1h" if n % 4 == 0 else None)
                 for n in range(first, min(jobs, first + BATCH))]
        big.add_many(items)
    print(f"filled {jobs:,} jobs in {time.monotonic() - started:.0f}s: {store.stats()['big']}", flush=True)
    ids = [j.id for j in big.jobs(limit=10_000)]
    failed = big.jobs(state="failed", limit=1)[0].id
    store.close()
    return ids, failed


def timed(url: str, repeat: int) -> tuple[float, float, int]:
    """The median and the slowest time of a GET of ``url``, in ms, each on a connection of its own."""
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        with urllib.request.urlopen(url, timeout=120) as answer:
            body = answer.read()
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times), max(times), len(body)


def measure(url: str, ids: list[str], failed: str, repeat: int) -> None:
    middle = ids[len(ids) // 2]
    cases = [
        ("the page (GET /)", "/", {}),
        ("queues: counts, hour, limits", "/api/overview", {}),
        ("jobs: first page of 50", "/api/jobs", {"queue": "big"}),
        ("jobs: a page deep in the queue", "/api/jobs", {"queue": "big", "after": middle}),
        ("jobs: failed only", "/api/jobs", {"queue": "big", "state": "failed"}),
        ("jobs: waiting, one group", "/api/jobs", {"queue": "big", "state": "waiting", "group": "g7"}),
        ("jobs: id prefix", "/api/jobs", {"queue": "big", "prefix": middle[:14]}),
        ("one job (failed)", "/api/job", {"queue": "big", "id": failed}),
    ]
    print(f"{'request':36} {'median ms':>10} {'max ms':>8} {'bytes':>8}")
    for name, path, params in cases:
        median, worst, size = timed(url.rstrip("/") + path + "?" + urllib.parse.urlencode(params), repeat)
        print(f"{name:36} {median:10.1f} {worst:8.1f} {size:8,}")
    began = time.perf_counter()
    with urllib.request.urlopen(url + "api/events?view=queues", timeout=120) as stream:
        next(line for line in stream if line.startswith(b"data: "))
    print(f"{'event stream: first update':36} {(time.perf_counter() - began) * 1000:10.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=300_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep", help="a store file to fill (or reuse, where it exists) instead of a temporary one")
    parser.add_argument("--postgres", help="a postgresql:// URL of an empty database to fill instead of a file")
    args = parser.parse_args()
    folder = tempfile.mkdtemp()
    target = args.postgres or args.keep or os.path.join(folder, "big.db")
    if args.keep and os.path.exists(args.keep):
        with tinystore.open(target) as store:
            big = store.queue("big")
            ids, failed = [j.id for j in big.jobs(limit=10_000)], big.jobs(state="failed", limit=1)[0].id
    else:
        ids, failed = fill(target, args.jobs)
    command = [sys.executable, "-m", "tinystore.cli", "dashboard", target, "--port", "0", "--token", TOKEN]
    dashboard = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        url = dashboard.stdout.readline().split(" at ")[-1].strip()
        measure(url, ids, failed, args.repeat)
    finally:
        dashboard.terminate()
        dashboard.wait()


if __name__ == "__main__":
    main()
