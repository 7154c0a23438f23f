"""What every workload shares: sizes, result rows, store files, child processes, counters.

A workload module has ``run(ctx) -> list[Row]``. ``ctx`` (a ``Context``) holds
the sizes, the durability, the folder for store files, and the raw-SQLite
baseline measured earlier in the same run, so that each row can say its ratio.
"""

from __future__ import annotations

import gc
import importlib
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
    "w7_waiting": [100, 100_000], "w7_one_off": 2_000, "w7_due_repeats": 1_000,
    "w8_jobs": 1_000_000,
    "w9_processes": [1, 2, 4, 8], "w9_slots": 20, "w9_handler_s": 0.050, "w9_warmup_s": 2.0, "w9_window_s": 5.0,
    "w10_adds": 200, "w10_jobs": 50, "w10_interval": 0.100, "w10_leases": 5, "w10_lease_s": 2.0,
    "w11_backlog": 100_000, "w11_jobs": 10_000, "w11_priorities": 10,
    "w12_jobs": 1_000_000, "w12_jobs_postgres": 100_000, "w12_alone_adds": 200,
    "w13_jobs": 1_000, "w13_tasks": 50,
}
# Through a relay (``run.py --relay``) every statement waits for the network: the counts that would
# take minutes at 2 ms a round trip are smaller (the rates and latencies are per job all the same).
RELAYED = {"baseline_single": 300, "baseline_paced": 50, "w1_adds": 1_000, "w2_jobs": [10_000]}
SMALL = {  # every workload runs, each in about a second: proves the suite works, measures nothing
    "baseline_single": 50, "baseline_batched": 500, "baseline_paced": 3,
    "w1_adds": 100, "w1_threads": [4, 8], "w1_batch": 50,
    "w2_jobs": [200],
    "w3_jobs": 5, "w3_interval": 0.020, "w3_due": 2, "w3_due_ahead": 0.050,
    "w4_backlog": 1_000, "w4_groups": 50, "w4_hot": 0.9, "w4_hot_seconds": 0.3,
    "w5_leases": [200], "w5_repeats": 1,
    "w6_jobs": 100, "w6_steps": 3,
    "w7_waiting": [100, 1_000], "w7_one_off": 100, "w7_due_repeats": 50,
    "w8_jobs": 1_000,
    "w9_processes": [1, 2], "w9_slots": 20, "w9_handler_s": 0.050, "w9_warmup_s": 0.3, "w9_window_s": 0.5,
    "w10_adds": 10, "w10_jobs": 3, "w10_interval": 0.050, "w10_leases": 2, "w10_lease_s": 2.0,
    "w11_backlog": 500, "w11_jobs": 100, "w11_priorities": 10,
    "w12_jobs": 300, "w12_jobs_postgres": 300, "w12_alone_adds": 10,
    "w13_jobs": 100, "w13_tasks": 50,
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
    target: Optional["Target"] = None  # where the stores live: SQLite files in workdir unless given

    def __post_init__(self) -> None:
        if self.target is None:
            self.target = Target(self.workdir)

    @property
    def synchronous(self) -> str:
        return {"full": "FULL", "normal": "NORMAL", "off": "OFF"}[self.durability]

    @property
    def postgres(self) -> bool:
        return self.target.name == "postgres"

    def path(self, name: str) -> str:
        """A new store's location: a file path in the run's folder, or a new database's URL."""
        return self.target.new(name)

    def copy(self, src: str, name: str) -> str:
        return self.target.copy(src, name)

    def remove(self, location: str) -> None:
        self.target.remove(location)

    def count(self, location: str, sql: str, params: tuple = ()) -> int:
        return self.target.count(location, sql, params)

    def goal(self, key: str) -> Optional[float]:
        """A target of this backend on this machine (``Target.targets``); None where it has none."""
        return self.target.targets.get(key)

    def not_measured(self, workload: str, case: str, why: str) -> "Row":
        return Row(workload, f"{case}: not measured on {self.target.label}: {why}", None, "")


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
         batch: int = 1_000, queue_options: Optional[dict[str, Any]] = None, start: int = 0,
         priority_of: Any = None) -> float:
    """Add ``count`` jobs through ``queue.add_many`` (the real schema, no shortcut); return the seconds it took."""
    import tinystore

    store = tinystore.open(path, durability=durability)
    try:
        queue = store.queue(QUEUE, **(queue_options or {}))
        began = time.perf_counter()
        for first in range(start, start + count, batch):
            last = min(start + count, first + batch)
            queue.add_many([tinystore.Job(payload(n), at=at, group=group_of(n) if group_of else None,
                                          priority=priority_of(n) if priority_of else 0)
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


# Where the stores live: a SQLite file, or a database of a PostgreSQL server

class Target:
    """The one place where the backends differ, for the workloads: where a store lives, how it is made,
    copied, counted and removed. A location is what ``tinystore.open`` and ``child.py`` take.

    SQL given to ``count`` names tables as ``{jobs}``, ``{leases}``... and parameters as ``?``.
    """

    name = "sqlite"
    label = "SQLite"
    # Targets that are numbers for this machine and this backend (None: no target on it). The ones
    # relative to the raw baseline or to another figure of the same run are the workloads' own.
    targets: dict[str, Optional[float]] = {
        "w1_many_per_s": 100_000, "w2_async_per_s": 20_000, "w2_sync_per_s": 10_000,
        "w3_same_p99_ms": 5, "w3_other_p50_ms": 5, "w3_other_p99_ms": 20, "w5_ms_per_1000": 5,
    }

    def __init__(self, workdir: str):
        self.workdir = workdir
        self._made = 0

    def _name(self, name: str) -> str:
        self._made += 1
        return f"{self._made:03d}-{name}"

    def new(self, name: str) -> str:
        """A location for a new store (nothing there yet: ``tinystore.open`` makes it)."""
        return os.path.join(self.workdir, self._name(name) + ".db")

    def copy(self, src: str, name: str) -> str:
        """A copy of the closed store at ``src``, on disk before it is returned."""
        return copy_store(src, self.new(name))

    def copy_as_left(self, src: str, name: str) -> str:
        """A copy of a store as a process killed while holding it left it (W5: nothing checkpointed)."""
        dst = self.new(name)
        for suffix in ("", "-wal"):
            if os.path.exists(src + suffix):
                shutil.copyfile(src + suffix, dst + suffix)
        return dst

    def count(self, location: str, sql: str, params: tuple = ()) -> int:
        return count_rows(location, sql.format(**{t: f"tinystore_{t}" for t in TABLES}), params)

    def remove(self, location: str) -> None:
        remove_store(location)

    def tally(self, location: str) -> str:
        """The shared file that counts jobs run across the processes draining ``location``."""
        return location + "-tally"

    raw_label = "raw SQLite"

    def raw_scattered(self, rows: int, every: int, durability: str) -> tuple[float, float]:
        """W4's raw row: jobs/s of updating and deleting 1 row in ``every``, and of every row (200/txn)."""
        import baseline
        path = self.new("w4-raw-scattered")
        synchronous = durability.upper()
        spread = baseline.scattered(path, synchronous, rows, every)
        packed = baseline.scattered(path, synchronous, rows, 1)
        remove_store(path)
        return spread, packed

    def close(self) -> None:
        """Remove whatever the run left (the folder is removed by run.py)."""


TABLES = ("jobs", "leases", "groups", "steps", "processes")


class PostgresTarget(Target):
    """Each store is a database of its own (``ts_bench_<hex>_<n>``) on the server of ``admin_url``,
    tables in schema ``tinystore``; a copy is ``CREATE DATABASE ... TEMPLATE`` (a file copy of a database
    nobody is connected to) followed by a CHECKPOINT, so that the copy's pages are on disk before the
    clock starts, as a SQLite copy is synced. Every database made is dropped ``WITH (FORCE)`` at close."""

    name = "postgres"
    label = "PostgreSQL"
    targets = {
        "w1_many_per_s": None, "w2_async_per_s": 10_000, "w2_sync_per_s": None,
        "w3_same_p99_ms": 10, "w3_other_p50_ms": 3, "w3_other_p99_ms": 10, "w5_ms_per_1000": None,
    }

    def __init__(self, workdir: str, admin_url: str, relay: Optional["RelayProcess"] = None):
        super().__init__(workdir)
        import psycopg
        from psycopg.conninfo import conninfo_to_dict

        self._psycopg = psycopg
        self.admin_url = admin_url
        self._params = conninfo_to_dict(admin_url)
        self.prefix = f"ts_bench_{os.urandom(4).hex()}"
        self.databases: list[str] = []
        self._admin = psycopg.connect(admin_url, autocommit=True)
        self.relay = relay  # where given, every store's URL reaches the server through it

    def server_address(self) -> tuple[str, int]:
        return self._params.get("host") or "127.0.0.1", int(self._params.get("port") or 5432)

    def url(self, dbname: str, via: Optional[int] = None) -> str:
        """The URL of a database of this server (the admin URL's user, host, port and password); with ``via``,
        through the relay listening on that port of 127.0.0.1."""
        from urllib.parse import quote, urlencode
        params = dict(self._params)
        user = params.pop("user", "") or ""
        password = params.pop("password", None)
        host = params.pop("host", None) or "127.0.0.1"
        port = params.pop("port", None) or "5432"
        if via is not None:
            host, port = "127.0.0.1", str(via)
            params["sslmode"] = "disable"  # the relay counts the protocol's messages: they must be plain
        params.pop("dbname", None)
        auth = f"{quote(user, safe='')}{':' + quote(password, safe='') if password else ''}@" if user else ""
        query = f"?{urlencode(params)}" if params else ""  # sslmode and the like, as the admin URL gives them
        return f"postgresql://{auth}{host}:{port}/{dbname}{query}"

    def dbname(self, location: str) -> str:
        return location.rsplit("/", 1)[1].split("?")[0]

    def _create(self, name: str, template: Optional[str] = None) -> str:
        dbname = f"{self.prefix}_{self._made + 1:03d}"
        self._made += 1
        self.databases.append(dbname)
        sql = f'CREATE DATABASE "{dbname}"'
        if template is not None:
            sql += f' TEMPLATE "{template}"'
        for attempt in range(20):  # a template's last sessions may take a moment to end
            try:
                self._admin.execute(sql)
                break
            except self._psycopg.errors.ObjectInUse:
                if attempt == 19:
                    raise
                time.sleep(0.25)
        return self.url(dbname, via=None if self.relay is None else self.relay.port)

    def direct(self, location: str) -> str:
        """The URL of a store's database reached directly (for the benchmark's own counts)."""
        return self.url(self.dbname(location))

    def through(self, location: str, relay: "RelayProcess") -> str:
        """The URL of a store's database through ``relay``."""
        return self.url(self.dbname(location), via=relay.port)

    def new(self, name: str) -> str:
        return self._create(name)

    def copy(self, src: str, name: str) -> str:
        dst = self._create(name, template=self.dbname(src))
        self._admin.execute("CHECKPOINT")
        return dst

    def copy_as_left(self, src: str, name: str) -> str:
        return self.copy(src, name)

    def count(self, location: str, sql: str, params: tuple = ()) -> int:
        sql = sql.format(**{t: f"tinystore.{t}" for t in TABLES}).replace("?", "%s")
        with self._psycopg.connect(self.direct(location), autocommit=True) as conn:
            return conn.execute(sql, params).fetchone()[0]

    def remove(self, location: str) -> None:
        dbname = self.dbname(location)
        self._admin.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
        if dbname in self.databases:
            self.databases.remove(dbname)
        if os.path.exists(self.tally(location)):
            os.remove(self.tally(location))

    def tally(self, location: str) -> str:
        return os.path.join(self.workdir, self.dbname(location) + "-tally")

    raw_label = "raw psycopg"

    def raw_scattered(self, rows: int, every: int, durability: str) -> tuple[float, float]:
        import baseline_postgres
        url = self.new("w4-raw-scattered")
        try:
            setting = baseline_postgres.synchronous_commit(durability)
            return (baseline_postgres.scattered(url, setting, rows, every),
                    baseline_postgres.scattered(url, setting, rows, 1))
        finally:
            self.remove(url)

    def server(self) -> dict[str, Any]:
        """The server's version and the settings a commit's cost depends on."""
        found = {}
        for setting in ("server_version", "synchronous_commit", "fsync", "wal_sync_method", "full_page_writes",
                        "shared_buffers"):
            found[setting] = self._admin.execute(f"SHOW {setting}").fetchone()[0]
        return found

    def close(self) -> None:
        for dbname in list(self.databases):
            try:
                self._admin.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
            except self._psycopg.Error as exc:
                print(f"could not drop database {dbname}: {exc}", file=sys.stderr)
        self.databases.clear()
        self._admin.close()


def reachable(admin_url: str) -> Optional[str]:
    """None when the PostgreSQL server of ``admin_url`` answers; else why not."""
    try:
        import psycopg
    except ImportError as exc:
        return f"psycopg is not installed ({exc})"
    try:
        with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else exc}"
    return None


# A network between the benchmark and the server

class RelayProcess:
    """``benchmarks/relay.py`` in a process of its own (so that its threads share no GIL with what is
    measured), relaying to ``to`` with ``delay_ms`` each way; ``mark()`` returns what it counted since the
    last mark (``relay.by_kind`` reads it)."""

    def __init__(self, to: tuple[str, int], delay_ms: float, record: bool = False):
        self.delay_ms = delay_ms
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "relay.py"), "--to", f"{to[0]}:{to[1]}",
                                      "--delay-ms", repr(delay_ms), *(["--record"] if record else [])],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.port = int(read_line(self.proc, "port ", timeout=30))

    def mark(self) -> list[dict[str, Any]]:
        say(self.proc, "mark")
        return json.loads(read_line(self.proc, "counts ", timeout=60))

    def close(self) -> None:
        finish(self.proc, timeout=30)


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
    transaction of the group-commit writer), and the PostgreSQL backend's
    (one call = one batch's transaction, BEGIN ... COMMIT; a batch the server
    asked to run again counts once). Commits made through
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
        for module in ("tinystore.backends.sqlite._writer", "tinystore.backends.postgres._writer"):
            try:
                writer = importlib.import_module(module).Writer
                original = writer._run
            except (ImportError, AttributeError):
                continue

            def counted(self: Any, batch: Any, _original: Any = original) -> Any:
                counter.count += 1
                return _original(self, batch)

            writer._run = counted
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

    def of(self, slot: int) -> int:
        return self._counts[slot]


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
