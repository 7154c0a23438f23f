"""What every workload shares: sizes, result rows, store files, child processes, counters.

A workload module has ``run(ctx) -> list[Row]``. ``ctx`` (a ``Context``) holds
the sizes, the durability, the folder for store files, and the raw-SQLite
baseline measured earlier in the same run, so that each row can say its ratio.
"""

from __future__ import annotations

import gc
import json
import mmap
import os
import selectors
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = os.path.join(HERE, "child.py")
QUEUE = "bench"
WEEK = 7 * 86400.0


def payload(n: int) -> dict[str, Any]:
    """A job-like payload: the same JSON the raw-SQLite baseline stores."""
    return {"n": n, "kind": "reply", "message_id": 41_000 + n, "text": "a job-like payload of some forty bytes"}


# Sizes

FULL = {
    "baseline_single": 2_000, "baseline_batched": 20_000, "baseline_paced": 100,
    "w1_adds": 10_000, "w1_threads": [8, 32], "w1_batch": 100,
    "w2_jobs": [10_000, 100_000],
    "w3_jobs": 200, "w3_interval": 0.020, "w3_due": 10, "w3_due_ahead": 0.100,
    "w4_backlog": 1_000_000, "w4_groups": 10_000, "w4_hot": 0.9, "w4_hot_seconds": 2.0,
    "w5_leases": [1_000, 100_000], "w5_repeats": 5,
    "w6_jobs": 10_000, "w6_steps": 3,
}
SMALL = {  # every workload runs, each in a second or two: proves the suite works, measures little
    "baseline_single": 100, "baseline_batched": 1_000, "baseline_paced": 5,
    "w1_adds": 200, "w1_threads": [8, 32], "w1_batch": 100,
    "w2_jobs": [500],
    "w3_jobs": 10, "w3_interval": 0.020, "w3_due": 2, "w3_due_ahead": 0.050,
    "w4_backlog": 10_000, "w4_groups": 200, "w4_hot": 0.9, "w4_hot_seconds": 0.5,
    "w5_leases": [1_000], "w5_repeats": 2,
    "w6_jobs": 300, "w6_steps": 3,
}


# Results

@dataclass
class Row:
    """One figure: what was measured, its value, its ratio to a reference, and its target."""

    workload: str
    case: str
    value: Optional[float]
    unit: str
    ratio: Optional[float] = None     # value / reference
    vs: str = ""                       # what the ratio is against
    target: str = ""                   # the target, in words
    met: Optional[bool] = None         # None: no target, or not measurable
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Context:
    sizes: dict[str, Any]
    durability: str
    workdir: str
    baseline: dict[str, Any] = field(default_factory=dict)
    results: dict[str, list[Row]] = field(default_factory=dict)  # each workload's rows, once it ran
    templates: dict[str, Any] = field(default_factory=dict)  # closed store files that cases copy
    repeat: int = 1  # each throughput case runs this many times; the best run is reported
    _files: int = 0

    @property
    def synchronous(self) -> str:
        return {"full": "FULL", "normal": "NORMAL", "off": "OFF"}[self.durability]

    def path(self, name: str) -> str:
        """A new store file path in the run's folder."""
        self._files += 1
        return os.path.join(self.workdir, f"{self._files:03d}-{name}.db")


def best_of(ctx: Context, measure: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run ``measure()`` ``ctx.repeat`` times; the run with the fewest seconds, every run's seconds beside it.

    The best run is the one least disturbed by whatever else the machine did.
    """
    runs = [measure() for _ in range(ctx.repeat)]
    best = min(runs, key=lambda r: r["seconds"])
    return {**best, "runs_seconds": [r["seconds"] for r in runs]}


def ratio(value: Optional[float], reference: Optional[float]) -> Optional[float]:
    if value is None or not reference:
        return None
    return value / reference


def percentile(values: list[float], p: float) -> float:
    """The p-th percentile (0-100), nearest rank."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(round(p / 100 * len(ordered) + 0.4999))))
    return ordered[rank - 1]


# Store files

def copy_store(src: str, dst: str) -> str:
    """Copy a closed store to a new path: checkpoint its WAL into the file, then copy the file (and any WAL left)."""
    conn = sqlite3.connect(src, isolation_level=None)
    try:
        busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    finally:
        conn.close()
    if busy:
        raise RuntimeError(f"{src} is still in use: its WAL could not be checkpointed")
    copies = [(src, dst)]
    if os.path.exists(src + "-wal") and os.path.getsize(src + "-wal"):
        copies.append((src + "-wal", dst + "-wal"))
    for a, b in copies:
        shutil.copyfile(a, b)
        # On disk before the workload starts: else the workload's first fsync of the file (a
        # checkpoint's) would flush the whole copy, and a big file's drain would pay for its setup.
        fd = os.open(b, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return dst


def remove_store(path: str) -> None:
    """Delete a store file and what lies beside it (WAL, shared memory, lock file, tally)."""
    for suffix in ("", "-wal", "-shm", "-tinystore.lock", "-tally"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)


def fill(path: str, durability: str, count: int, *, at: Optional[float] = None, group_of: Any = None,
         batch: int = 1_000, queue_options: Optional[dict[str, Any]] = None, start: int = 0) -> float:
    """Add ``count`` jobs through ``queue.add_many`` (the real schema, no shortcut); return the seconds it took."""
    import tinystore

    store = tinystore.open(path, durability=durability)
    try:
        queue = store.queue(QUEUE, **(queue_options or {}))
        began = time.perf_counter()
        for first in range(start, start + count, batch):
            last = min(start + count, first + batch)
            queue.add_many([tinystore.Job(payload(n), at=at, group=group_of(n) if group_of else None)
                            for n in range(first, last)])
        return time.perf_counter() - began
    finally:
        store.close()
        del store
        gc.collect()  # a closed store may keep its writer connection until collected


def count_rows(path: str, sql: str, params: tuple = ()) -> int:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute(sql, params).fetchone()[0]
    finally:
        conn.close()


# Child processes

def start_child(*args: str) -> subprocess.Popen:
    """Start ``benchmarks/child.py`` with ``args``; it speaks in lines on stdout.

    Its stderr is this process's, unless BENCH_QUIET_CHILD is set (then it is dropped).
    """
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    stderr = open(os.devnull, "w") if os.environ.get("BENCH_QUIET_CHILD") else None
    return subprocess.Popen([sys.executable, CHILD, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=stderr, text=True, env=env)


def read_line(proc: subprocess.Popen, prefix: str, timeout: float = 600) -> str:
    """The child's next stdout line that starts with ``prefix``, without it."""
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(timeout=left):
                raise RuntimeError(f"the child never said {prefix!r} within {timeout:g}s")
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError(f"the child ended (exit {proc.wait()}) before saying {prefix!r}")
            if line.startswith(prefix):
                return line[len(prefix):].strip()
    finally:
        sel.close()


def read_json(proc: subprocess.Popen, prefix: str = "result ", timeout: float = 600) -> dict[str, Any]:
    return json.loads(read_line(proc, prefix, timeout))


def say(proc: subprocess.Popen, line: str) -> None:
    proc.stdin.write(line + "\n")
    proc.stdin.flush()


def finish(proc: subprocess.Popen, timeout: float = 60) -> None:
    """Wait for a child to end; kill it (by its own pid) if it does not."""
    try:
        proc.stdin.close()
    except OSError:
        pass
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    proc.stdout.close()


# Inside a process: commits and memory

class CommitCounter:
    """Counts the writer's transactions (each one BEGIN IMMEDIATE ... COMMIT, one fsync at FULL).

    It wraps the SQLite backend's ``Writer._run`` (one call = one write
    transaction of the group-commit writer). Commits made through
    ``store.transaction()`` (``run.transaction`` steps) are not counted. When
    the writer is not found (the core changed), ``available`` is false and
    commit figures are reported as unknown.
    """

    _installed: Optional["CommitCounter"] = None

    def __init__(self) -> None:
        self.count = 0
        self.available = False

    @classmethod
    def install(cls) -> "CommitCounter":
        if cls._installed is not None:
            return cls._installed
        counter = cls._installed = cls()
        try:
            from tinystore.backends.sqlite import _writer
            original = _writer.Writer._run
        except (ImportError, AttributeError):
            return counter

        def counted(self: Any, batch: Any) -> Any:
            counter.count += 1
            return original(self, batch)

        _writer.Writer._run = counted
        counter.available = True
        return counter

    def read(self) -> Optional[int]:
        return self.count if self.available else None


class Tally:
    """Jobs handled, counted across worker processes in a small shared file (one slot per process).

    A handler adds one to its process's slot and reads the sum: the handler
    that brings it to the expected total knows that every job has run. This is
    how a drain knows its end without asking the store (and without relying on
    ``run_until_idle()`` returning).
    """

    SLOTS = 8

    @classmethod
    def create(cls, path: str) -> None:
        """Make the file, every slot at zero: once, by the parent, before any process counts in it."""
        with open(path, "wb") as f:
            f.write(bytes(8 * cls.SLOTS))

    def __init__(self, path: str, slot: int = 0):
        self._file = open(path, "r+b")
        self._map = mmap.mmap(self._file.fileno(), 8 * self.SLOTS)
        self._counts = memoryview(self._map).cast("q")
        self._slot = slot
        self._lock = threading.Lock()

    def add(self) -> int:
        """Count one job here; the total across processes."""
        with self._lock:
            self._counts[self._slot] += 1
            return sum(self._counts)

    def total(self) -> int:
        return sum(self._counts)

    def mine(self) -> int:
        return self._counts[self._slot]


def memory() -> dict[str, Optional[float]]:
    """This process's resident memory now and at its peak, in MiB (Linux /proc)."""
    found: dict[str, Optional[float]] = {"rss_mib": None, "peak_rss_mib": None}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    found["rss_mib"] = int(line.split()[1]) / 1024
                elif line.startswith("VmHWM:"):
                    found["peak_rss_mib"] = int(line.split()[1]) / 1024
    except OSError:
        pass
    return found
