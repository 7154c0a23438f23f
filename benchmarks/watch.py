"""Watch benchmark: a thousand watchers on one store.

    python benchmarks/watch.py [--small] [--watchers N] [--rounds R] [--idle SECONDS]
                               [--durability full|normal|off] [--threads]

Each watcher follows a job of its own; the jobs wait in one queue, so every
watcher is shown its place (``ahead``). Measured:

- the CPU the process spends per second while nothing changes (user +
  system, ``getrusage``, over a window): with the store open and nobody
  watching, with one watcher, and with all of them;
- how long after a change the watchers see it, and the CPU this process
  spends per change (which a loaded machine distorts less than delays). The
  change is one commit that every watcher sees: a job added before all of
  theirs (``at=`` an hour ago), which moves each one's ``ahead`` by one,
  then cancelled, which moves it back. The delay runs from just before the
  call that commits the change to the moment a watcher's loop gets the new
  state, for each watcher. The change is made by this process, then by
  another one (this file run with ``--child``; both read
  ``time.monotonic()``, one clock for every process on Linux).

Watchers are ``async for ... in queue.watch_async(id)`` loops on one event
loop (``--threads``: ``for ... in queue.watch(id)``, one thread each).
Prints a table and writes ``benchmarks/results/watch.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Callable, Optional

import tinystore

HERE = os.path.dirname(os.path.abspath(__file__))

QUEUE = "watched"
NUDGE = "nudge"  # the job whose adding and cancelling every watcher sees
FULL = {"watchers": 1000, "rounds": 20, "idle": 10.0}
SMALL = {"watchers": 200, "rounds": 4, "idle": 2.0}
ROUND_TIMEOUT = 120.0


def percentile(values: list[float], p: float) -> Optional[float]:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def cpu_seconds() -> float:
    """User + system CPU of this process so far (getrusage: microseconds, where os.times counts ticks)."""
    try:
        import resource
    except ImportError:  # not on Windows
        t = os.times()
        return t.user + t.system
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class Watchers:
    """N watchers, each following job ``j<i>``; records when each one sees what a round expects.

    Watcher i's job has i jobs before it, so it expects ``ahead`` i, or i + 1
    while the nudge job is in the queue.
    """

    def __init__(self, queue: tinystore.Queue, threads: bool):
        self.queue = queue
        self.threads = threads
        self.count = 0
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)
        self._expect = 0  # what ahead - i is this round: 0 or 1
        self._seen_at: dict[int, float] = {}  # watcher -> when it saw this round's change
        self._first: set[int] = set()
        self._starting = 0
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        if not threads:
            ready = threading.Event()
            threading.Thread(target=self._run_loop, args=(ready,), daemon=True).start()
            ready.wait()

    def _run_loop(self, ready: threading.Event) -> None:
        self._loop = asyncio.new_event_loop()
        self._loop.call_soon(ready.set)
        self._loop.run_forever()

    def _saw(self, i: int, state: tinystore.JobState) -> None:
        now = time.monotonic()
        with self._cv:
            self._first.add(i)
            if state.ahead - i == self._expect and i not in self._seen_at:
                self._seen_at[i] = now
            if len(self._seen_at) >= self.count or len(self._first) == self._starting:
                self._cv.notify_all()  # only the last one wakes the main thread: it measures, not competes

    async def _follow_async(self, i: int) -> None:
        async for state in self.queue.watch_async(f"j{i}"):
            self._saw(i, state)

    def _follow_thread(self, i: int) -> None:
        for state in self.queue.watch(f"j{i}"):
            self._saw(i, state)

    def start(self, upto: int) -> float:
        """Start watchers ``count..upto-1``; the seconds until each has yielded its first state."""
        t0 = time.monotonic()
        self._starting = upto
        for i in range(self.count, upto):
            if self.threads:
                threading.Thread(target=self._follow_thread, args=(i,), daemon=True).start()
            else:
                asyncio.run_coroutine_threadsafe(self._follow_async(i), self._loop)
        self.count = upto
        with self._cv:
            if not self._cv.wait_for(lambda: len(self._first) >= upto, ROUND_TIMEOUT):
                raise RuntimeError(f"only {len(self._first)} of {upto} watchers started")
        return time.monotonic() - t0

    def expect(self, nudged: bool) -> None:
        with self._cv:
            self._expect = int(nudged)
            self._seen_at = {}

    def wait_round(self, t0: float) -> tuple[list[float], int]:
        """The delays of the watchers that saw this round's change, and how many did not in time."""
        with self._cv:
            self._cv.wait_for(lambda: len(self._seen_at) >= self.count, ROUND_TIMEOUT)
            delays = [t - t0 for t in self._seen_at.values()]
        return delays, self.count - len(delays)


def nudge(queue: tinystore.Queue, on: bool) -> None:
    """The change every watcher sees: a job before all of theirs, added or cancelled."""
    if on:
        queue.add({"nudge": True}, id=NUDGE, at=time.time() - 3600)
    else:
        queue.cancel(NUDGE)


def idle_cpu(seconds: float) -> float:
    """CPU seconds this process spends per second while nothing changes."""
    c0, t0 = cpu_seconds(), time.monotonic()
    time.sleep(seconds)
    return (cpu_seconds() - c0) / (time.monotonic() - t0)


def rounds(watchers: Watchers, count: int, change: Callable[[bool], float]) -> dict[str, Any]:
    """``count`` changes (made even), adding and cancelling the nudge in turn; delays in milliseconds."""
    count += count % 2  # end with the nudge cancelled, as it began
    every: list[float] = []
    last: list[float] = []
    missed = 0
    cpu0 = cpu_seconds()
    for r in range(count):
        on = r % 2 == 0
        watchers.expect(on)
        t0 = change(on)
        delays, late = watchers.wait_round(t0)
        missed += late
        every.extend(delays)
        if delays:
            last.append(max(delays))
    cpu_ms = (cpu_seconds() - cpu0) * 1000 / count
    ms = [d * 1000 for d in every]
    last_ms = [d * 1000 for d in last]
    return {"deliveries": len(ms), "missed": missed, "cpu_ms_per_change": cpu_ms,
            "p50_ms": percentile(ms, 50), "p99_ms": percentile(ms, 99), "max_ms": max(ms) if ms else None,
            "last_watcher_p50_ms": percentile(last_ms, 50)}


def here(queue: tinystore.Queue) -> Callable[[bool], float]:
    def change(on: bool) -> float:
        t0 = time.monotonic()
        nudge(queue, on)
        return t0
    return change


class Child:
    """Another process that makes the changes when told, and says when it began each one."""

    def __init__(self, path: str, durability: str):
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", path,
                                      "--durability", durability],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self._read("ready")

    def _read(self, prefix: str) -> str:
        line = self.proc.stdout.readline()
        if not line.startswith(prefix):
            raise RuntimeError(f"the child said {line!r}, not {prefix!r}")
        return line

    def change(self, on: bool) -> float:
        self.proc.stdin.write("on\n" if on else "off\n")
        return float(self._read("t0 ").split()[1])

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(60)


def child(path: str, durability: str) -> int:
    store = tinystore.open(path, durability=durability)
    queue = store.queue(QUEUE)
    print("ready", flush=True)
    for line in sys.stdin:
        t0 = time.monotonic()
        nudge(queue, line.strip() == "on")
        print(f"t0 {t0!r}", flush=True)
    store.close()
    return 0


def environment(durability: str, threads: bool) -> dict[str, Any]:
    return {"cores": os.cpu_count(), "python": platform.python_version(), "sqlite": sqlite3.sqlite_version,
            "durability": durability, "tinystore": tinystore.__version__, "platform": platform.platform(),
            "watchers": "threads" if threads else "async", "load_average_at_start": list(os.getloadavg())}


def measure(n: int, count: int, idle: float, durability: str, threads: bool, folder: str) -> dict[str, Any]:
    path = os.path.join(folder, "watch.db")
    store = tinystore.open(path, durability=durability)
    try:
        queue = store.queue(QUEUE)
        queue.add_many([tinystore.Job({"i": i}, id=f"j{i}") for i in range(n)])
        watchers = Watchers(queue, threads)
        baseline = idle_cpu(idle)  # the store open, nobody watching
        start_one = watchers.start(1)
        time.sleep(1.0)  # let the refreshes that registering caused run out
        one = idle_cpu(idle)
        start_all = watchers.start(n)
        time.sleep(1.0)  # let the refreshes that registering caused run out
        many = idle_cpu(idle)
        local = rounds(watchers, count, here(queue))
        other = Child(path, durability)
        try:
            remote = rounds(watchers, count, other.change)
        finally:
            other.close()
        return {"watchers": n, "rounds": count, "idle_window_s": idle,
                "idle_cpu_per_s": {"no_watcher": baseline, "one_watcher": one, f"{n}_watchers": many},
                "start_s": {"one_watcher": start_one, f"{n}_watchers": start_all},
                "delay_this_process": local, "delay_other_process": remote}
    finally:
        store.close()


def table(env: dict[str, Any], r: dict[str, Any]) -> str:
    n = r["watchers"]

    def ms(v: Optional[float]) -> str:
        return "-" if v is None else f"{v:,.1f} ms"

    lines = [
        f"watch benchmark: {n:,} {env['watchers']} watchers on one store, {r['rounds']} changes each way",
        f"cores {env['cores']}, Python {env['python']}, SQLite {env['sqlite']}, durability {env['durability']}, "
        f"load average at start {env['load_average_at_start'][0]:.2f}",
        "",
        f"{'measure':<50} {'value':>14}",
        f"{'-' * 50} {'-' * 14}",
    ]
    for label, key in (("idle CPU, store open, no watcher", "no_watcher"), ("idle CPU, 1 watcher", "one_watcher"),
                       (f"idle CPU, {n:,} watchers", f"{n}_watchers")):
        lines.append(f"{label:<50} {r['idle_cpu_per_s'][key]:>10.4f} s/s")
    lines.append(f"{'start 1 watcher (first state)':<50} {r['start_s']['one_watcher'] * 1000:>11.1f} ms")
    lines.append(f"{f'start {n:,} watchers (every first state)':<50} {r['start_s'][f'{n}_watchers']:>12.2f} s")
    for who, key in (("this process", "delay_this_process"), ("another process", "delay_other_process")):
        d = r[key]
        lines.append(f"{f'change by {who} -> seen, p50':<50} {ms(d['p50_ms']):>14}")
        lines.append(f"{f'change by {who} -> seen, p99':<50} {ms(d['p99_ms']):>14}")
        lines.append(f"{f'change by {who} -> seen by the last, p50':<50} {ms(d['last_watcher_p50_ms']):>14}")
        lines.append(f"{'  CPU of this process per change':<50} {ms(d['cpu_ms_per_change']):>14}")
        if d["missed"]:
            lines.append(f"{f'  missed within {ROUND_TIMEOUT:g}s':<50} {d['missed']:>14,}")
    return "\n".join(lines)


def parse(argv: Optional[list[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="benchmarks/watch.py", description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="fewer watchers and rounds: a quick check")
    parser.add_argument("--watchers", type=int, help="how many watchers (default 1000; --small 200)")
    parser.add_argument("--rounds", type=int, help="changes measured each way (default 20; --small 4)")
    parser.add_argument("--idle", type=float, help="seconds of each idle CPU window (default 10; --small 2)")
    parser.add_argument("--durability", default="full", choices=["full", "normal", "off"])
    parser.add_argument("--threads", action="store_true", help="one thread per watcher instead of async")
    parser.add_argument("--results", default=os.path.join(HERE, "results"), help="folder for watch.json")
    parser.add_argument("--child", metavar="STORE", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Optional[list[str]] = None) -> int:
    args = parse(argv)
    if args.child:
        return child(args.child, args.durability)
    sizes = dict(SMALL if args.small else FULL)
    for name in ("watchers", "rounds", "idle"):
        if getattr(args, name) is not None:
            sizes[name] = getattr(args, name)
    env = environment(args.durability, args.threads)
    with tempfile.TemporaryDirectory(prefix="tinystore-watch-") as folder:
        result = measure(sizes["watchers"], sizes["rounds"], sizes["idle"], args.durability, args.threads, folder)
    print(table(env, result))
    os.makedirs(args.results, exist_ok=True)
    out = os.path.join(args.results, "watch.json")
    with open(out, "w") as f:
        json.dump({"environment": env, "sizes": sizes, "result": result}, f, indent=2)
    print(f"\nwrote {os.path.relpath(out)}")
    missed = result["delay_this_process"]["missed"] + result["delay_other_process"]["missed"]
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
