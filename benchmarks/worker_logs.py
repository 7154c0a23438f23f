"""What the worker command's default logging costs: ``tinystore worker`` as shipped against ``--log-level warning``.

    python benchmarks/worker_logs.py [--jobs 10000] [--rounds 5] [--backend sqlite|postgres]
                                     [--postgres ADMIN_URL]

Each round fills a fresh store with ``--jobs`` due no-op jobs (``add_many`` by
1,000), then runs ``python -m tinystore.cli worker bench_app:store`` on it, its
stderr going to a file (as under a process manager that keeps the log):
once at the default level (info), once with ``--log-level warning``, in turn,
so that both see the same machine. The application's async handler counts its
runs; the last one writes the seconds from the first run's start to its own
end, and stops the worker with SIGTERM. A round's figures are jobs / seconds
and the CPU seconds the worker process used (its own accounting, from
``wait4``: what a machine others load changes least). The table gives each
level's rounds and median, the log's lines per job, and the ratios shipped /
warning of each round's pair, with their median: on a machine whose speed
drifts, the pairs compare like with like.

``--backend postgres``: each store is a schema of its own in a database made
on the server of ``--postgres`` (the admin connection's URL), dropped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Optional

import tinystore

QUEUE = "bench"
ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
DATABASE = "tinystore_bench_worker_logs"
LEVELS = {"shipped": [], "warning": ["--log-level", "warning"]}

APP = '''
import os
import signal
import time

import tinystore

store = tinystore.open(os.environ["BENCH_TARGET"], **({"schema": os.environ["BENCH_SCHEMA"]}
                                                       if os.environ.get("BENCH_SCHEMA") else {}))
queue = store.queue("bench")
JOBS = int(os.environ["BENCH_JOBS"])
runs, first = 0, None


@queue.work
async def noop(payload, run):
    global runs, first
    if first is None:
        first = time.perf_counter()
    runs += 1
    if runs == JOBS:
        with open(os.environ["BENCH_RESULT"], "w") as f:
            f.write(repr(time.perf_counter() - first))
        os.kill(os.getpid(), signal.SIGTERM)  # a graceful stop: it settles what ran, and exits 0
'''


class Stores:
    """Fresh stores, each filled with due no-op jobs: files in a folder, or schemas of one PostgreSQL database."""

    def __init__(self, backend: str, folder: str, admin_url: str):
        self.backend = backend
        self.folder = folder
        self.admin_url = admin_url
        self.made = 0
        if backend == "postgres":
            import psycopg
            with psycopg.connect(admin_url, autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
                conn.execute(f"CREATE DATABASE {DATABASE}")
            self.url = admin_url.rsplit("/", 1)[0] + "/" + DATABASE

    def fill(self, jobs: int) -> tuple[str, Optional[str]]:
        """A new store holding ``jobs`` due jobs: (its target, its schema or None)."""
        self.made += 1
        if self.backend == "postgres":
            target, schema = self.url, f"bench_{self.made}"
        else:
            target, schema = os.path.join(self.folder, f"store-{self.made}.db"), None
        with tinystore.open(target, **({"schema": schema} if schema else {})) as store:
            queue = store.queue(QUEUE)
            for start in range(0, jobs, 1000):
                queue.add_many([{"n": n} for n in range(start, min(jobs, start + 1000))])
        return target, schema

    def close(self) -> None:
        if self.backend == "postgres":
            import psycopg
            with psycopg.connect(self.admin_url, autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")


def drain(folder: str, target: str, schema: Optional[str], jobs: int,
          level_args: list[str]) -> tuple[float, float, int]:
    """Run the worker command until it drained ``jobs``: (jobs per second, the CPU seconds its process used,
    lines it logged)."""
    result = os.path.join(folder, "result.txt")
    if os.path.exists(result):
        os.remove(result)
    log_path = os.path.join(folder, "worker.log")
    env = dict(os.environ, BENCH_TARGET=target, BENCH_SCHEMA=schema or "", BENCH_JOBS=str(jobs),
               BENCH_RESULT=result)  # the worker imports the tinystore this script imported (PYTHONPATH)
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "tinystore.cli", "worker", "bench_app:store", *level_args],
                                cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=log)
        _, status, usage = os.wait4(proc.pid, 0)  # its own CPU time: what a loaded machine changes least
        proc.returncode = code = os.waitstatus_to_exitcode(status)
    with open(log_path) as log:
        lines = sum(1 for _ in log)
    if code != 0 or not os.path.exists(result):
        raise SystemExit(f"the worker exited {code} without draining the store; its log is {log_path}")
    with open(result) as f:
        return jobs / float(f.read()), usage.ru_utime + usage.ru_stime, lines


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--postgres", default=ADMIN_URL)
    args = parser.parse_args(argv)
    print(f"tinystore from {os.path.dirname(tinystore.__file__)}")
    folder = tempfile.mkdtemp(prefix="tinystore-worker-logs-")
    with open(os.path.join(folder, "bench_app.py"), "w") as f:
        f.write(APP)
    stores = Stores(args.backend, folder, args.postgres)
    rates: dict[str, list[float]] = {level: [] for level in LEVELS}
    cpu: dict[str, list[float]] = {level: [] for level in LEVELS}
    lines: dict[str, list[int]] = {level: [] for level in LEVELS}
    try:
        for _ in range(args.rounds):
            for level, level_args in LEVELS.items():
                target, schema = stores.fill(args.jobs)
                rate, seconds, logged = drain(folder, target, schema, args.jobs, level_args)
                rates[level].append(rate)
                cpu[level].append(seconds)
                lines[level].append(logged)
                if args.backend == "sqlite":
                    for suffix in ("", "-wal", "-shm"):
                        if os.path.exists(target + suffix):
                            os.remove(target + suffix)
    finally:
        stores.close()
        shutil.rmtree(folder, ignore_errors=True)
    medians = {level: statistics.median(r) for level, r in rates.items()}
    print(f"{args.jobs:,} no-op jobs drained by `tinystore worker`, {args.backend}, {args.rounds} rounds alternated")
    for level in LEVELS:
        print(f"  {level:8} median {medians[level]:9,.0f} jobs/s  rounds {', '.join(f'{r:,.0f}' for r in rates[level])}"
              f"  log lines per job {max(lines[level]) / args.jobs:.4f}")
    pairs = [a / b for a, b in zip(rates["shipped"], rates["warning"])]
    print(f"  jobs/s shipped / warning, round by round: {', '.join(f'{p:.2f}' for p in pairs)}; "
          f"median {statistics.median(pairs):.3f}")
    cpu_pairs = [a / b for a, b in zip(cpu["shipped"], cpu["warning"])]
    print(f"  worker CPU seconds shipped / warning, round by round: {', '.join(f'{p:.2f}' for p in cpu_pairs)}; "
          f"median {statistics.median(cpu_pairs):.3f} (medians {statistics.median(cpu['shipped']):.2f}s "
          f"/ {statistics.median(cpu['warning']):.2f}s)")
    print(json.dumps({"backend": args.backend, "jobs": args.jobs, "rates": rates, "cpu_seconds": cpu,
                      "log_lines": lines, "ratios": pairs, "ratio": statistics.median(pairs),
                      "cpu_ratio": statistics.median(cpu_pairs), "load_average": os.getloadavg(),
                      "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}))


if __name__ == "__main__":
    main()
