"""What the traffic tests share: a witness of handler runs, a producer, waiting on conditions, worker children.

A traffic test runs a contract the way users meet it: a producer adds jobs
one after another while workers run them (``store.start()`` in this process,
or worker processes running ``traffic_child.py``), handlers take tens to
hundreds of milliseconds, and a witness that tinystore cannot touch records
every run of every handler: when it began and ended (``time.monotonic`` in
this process, ``time.time`` across processes), with which attempt, and how it
ended. The tests check their invariants on the witness at the end: how many
runs, which overlapped, what was lost.

Nothing here synchronises on a sleep. The producer sleeps between adds: that
is the traffic itself, not a wait for something. Tests wait for conditions
with a deadline (``wait_until``), for lines children print, or for events;
a deadline is reached only when a test fails.
"""

from __future__ import annotations

import asyncio
import collections
import fcntl
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

import tinystore
from helpers import lines_of, start_child, stderr_of, wait_child, wait_for_line

WAIT = 30.0  # seconds: a deadline only a failing test reaches
CHILD = (Path(__file__).parent / "traffic_child.py").read_text()


# The witness, in this process


@dataclass
class Entry:
    """One run of a handler, as the handler itself recorded it."""

    id: str
    attempt: int
    started: float
    ended: Optional[float] = None
    outcome: Optional[str] = None  # "returned", "raised", "cancelled", "retry", "snooze", ...
    told: Optional[float] = None  # seconds after it began that the handler was told to stop
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def ran(self) -> Optional[float]:
        return None if self.ended is None else self.ended - self.started

    def __repr__(self) -> str:
        ran = "still running" if self.ended is None else f"ran {self.ran:.2f}s"
        told = "" if self.told is None else f", told after {self.told:.2f}s"
        return f"<{self.id} attempt {self.attempt}: {ran}, {self.outcome}{told}>"


class Witness:
    """A list of runs guarded by a lock: handlers append to it, the test reads it at the end."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: list[Entry] = []
        self.changed = threading.Condition(self._lock)

    def begin(self, run: Any) -> Entry:
        entry = Entry(run.id, run.attempt, time.monotonic(), notes={"run": run})
        with self._lock:
            self._entries.append(entry)
            self.changed.notify_all()
        return entry

    def end(self, entry: Entry, outcome: str) -> None:
        with self._lock:
            entry.ended, entry.outcome = time.monotonic(), outcome
            self.changed.notify_all()

    def told(self, entry: Entry) -> None:
        with self._lock:
            if entry.told is None:
                entry.told = time.monotonic() - entry.started
            self.changed.notify_all()

    def entries(self) -> list[Entry]:
        with self._lock:
            return list(self._entries)

    def runs_of(self, id: str) -> list[Entry]:
        return sorted((e for e in self.entries() if e.id == id), key=lambda e: e.started)

    def by_id(self) -> dict[str, list[Entry]]:
        runs: dict[str, list[Entry]] = collections.defaultdict(list)
        for e in sorted(self.entries(), key=lambda e: e.started):
            runs[e.id].append(e)
        return runs

    def wait_for(self, what: str, condition: Callable[[list[Entry]], bool], timeout: float = WAIT) -> None:
        """Wait until ``condition(entries)`` holds; AssertionError naming ``what`` when the deadline passes."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while not condition(list(self._entries)):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{what} did not happen within {timeout:g}s; the witness saw "
                                         f"{sorted(self._entries, key=lambda e: e.started)}")
                self.changed.wait(min(left, 0.05))

    def wait_started(self, id: str, attempt: int = 1, timeout: float = WAIT) -> None:
        self.wait_for(f"attempt {attempt} of {id} starting",
                      lambda es: any(e.id == id and e.attempt == attempt for e in es), timeout)


def peak(intervals: Iterable[tuple[float, float]]) -> int:
    """The most intervals open at one moment; an interval that ends as another starts does not overlap it."""
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    most = now = 0
    for _, delta in events:  # at equal times -1 sorts first: ends before starts
        now += delta
        most = max(most, now)
    return most


def overlapping(intervals: list[tuple[str, float, float]], limit: int) -> list[list[str]]:
    """The sets of named intervals open at once where more than ``limit`` are (for failure messages)."""
    events = sorted([(s, 1, name) for name, s, _ in intervals] + [(e, -1, name) for name, _, e in intervals])
    open_now: list[str] = []
    found: list[list[str]] = []
    for _, delta, name in events:
        if delta > 0:
            open_now.append(name)
            if len(open_now) > limit:
                found.append(list(open_now))
        else:
            open_now.remove(name)
    return found


def busiest_window(times: Iterable[float], period: float, eps: float = 1e-6) -> int:
    """The most times in any half-open window [t, t + period)."""
    times = sorted(times)
    most, j = 0, 0
    for i, t in enumerate(times):
        j = max(j, i)
        while j < len(times) and times[j] < t + period - eps:
            j += 1
        most = max(most, j - i)
    return most


def wait_until(what: str, condition: Callable[[], Any], timeout: float = WAIT,
               describe: Callable[[], Any] = lambda: "", every: float = 0.02) -> Any:
    """Poll ``condition()`` until it is true (and return it); AssertionError naming ``what`` at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout:g}s; {describe()}")
        time.sleep(every)


# Traffic


class Producer:
    """Adds jobs one after another in a thread, ``every`` seconds apart, as users' requests arrive.

    ``jobs`` is a list of ``(id, payload)`` or ``(id, payload, add_options)``.
    ``join()`` waits until every job was added and re-raises what an add raised.
    """

    def __init__(self, queue: tinystore.Queue, jobs: list[tuple], every: float,
                 on_added: Callable[[str], None] = lambda id: None):
        self.queue = queue
        self.jobs = jobs
        self.every = every
        self.ids = [job[0] for job in jobs]
        self.added: list[str] = []
        self._on_added = on_added
        self._error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._add_all, name="producer", daemon=True)
        self._thread.start()

    def _add_all(self) -> None:
        try:
            for n, job in enumerate(self.jobs):
                if n:
                    time.sleep(self.every)  # the traffic: one request after another
                id, payload = job[0], job[1]
                options = job[2] if len(job) > 2 else {}
                state = self.queue.add(payload, id=id, **options)
                assert state.added, f"{id} was not added: {state!r}"
                self.added.append(id)
                self._on_added(id)
        except BaseException as exc:  # handed to the test by join()
            self._error = exc

    def join(self, timeout: float = WAIT) -> list[str]:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"the producer had added only {len(self.added)} jobs after {timeout:g}s"
        if self._error is not None:
            raise self._error
        return self.ids


def unsettled(queue: tinystore.Queue, ids: Iterable[str]) -> list[tinystore.JobState]:
    """The jobs among ``ids`` that are still scheduled, waiting or running."""
    out = []
    for id in ids:
        state = queue.get(id)
        if state is not None and state.state not in ("done", "failed"):
            out.append(state)
    return out


def settle(queue: tinystore.Queue, producer: Producer, timeout: float = WAIT) -> list[str]:
    """Wait until the producer added every job and none of them is scheduled, waiting or running."""
    ids = producer.join(timeout)
    wait_until(f"every job of {queue.name} settling", lambda: not unsettled(queue, ids), timeout,
               lambda: f"still unsettled: {unsettled(queue, ids)}")
    return ids


def some(items: Any, n: int = 3) -> Any:
    """The first ``n`` items of a dict or list, for a failure message that stays readable."""
    if isinstance(items, dict):
        return dict(list(items.items())[:n])
    return list(items)[:n]


def first_line(error: Optional[str]) -> str:
    return (error or "").splitlines()[0] if error else ""


def failed_jobs(queue: tinystore.Queue, ids: Iterable[str]) -> dict[str, str]:
    """The jobs among ``ids`` that failed for good, with the first line of their error."""
    out = {}
    for id in ids:
        state = queue.get(id)
        if state is not None and state.state == "failed":
            out[id] = first_line(state.error)
    return out


# Handlers in this process, driven by their payload


def handler_for(kind: str, witness: Witness, release: Optional[threading.Event] = None) -> Callable[..., Any]:
    """A ``def`` (kind "def") or ``async def`` handler that does what its payload says, recording each run.

    - ``{"s": seconds}``: work that long (async: one ``asyncio.sleep``, which a cancel ends; def: in
      10 ms slices, noting the moment ``run.cancelled`` turns true, and working on regardless
      unless ``"stop_when_told": true``);
    - ``{"hold": true}``: work until ``release`` is set (or, with ``stop_when_told``, until told), at most
      ``s`` seconds when given, else ``WAIT``;
    - ``{"snooze": n}``: answer ``run.snooze("100ms")`` the first n times the job runs (snoozes are not counted);
    - ``{"fail": n}``: raise on attempts 1..n;
    - ``{"retry": n}``: answer ``run.retry("100ms")`` on attempts 1..n;
    - otherwise return None: done.

    The run's outcome in the witness is written before the handler answers.
    """

    def answer(payload: dict, run: Any, entry: Entry) -> Any:
        snoozed = sum(1 for e in witness.runs_of(run.id) if e.outcome == "snooze")
        if snoozed < payload.get("snooze", 0):
            witness.end(entry, "snooze")
            return run.snooze("100ms")
        if run.attempt <= payload.get("fail", 0):
            witness.end(entry, "raised")
            raise RuntimeError(f"attempt {run.attempt} of {run.id} fails on purpose")
        if run.attempt <= payload.get("retry", 0):
            witness.end(entry, "retry")
            return run.retry("100ms")
        witness.end(entry, "returned")
        return None

    def longest(payload: dict) -> float:
        return payload.get("s", WAIT if payload.get("hold") else 0.0)

    def done_working(payload: dict, entry: Entry) -> bool:
        if payload.get("hold") and release is not None and release.is_set():
            return True
        if payload.get("stop_when_told") and entry.told is not None:
            return True
        return time.monotonic() - entry.started >= longest(payload)

    if kind == "def":
        def handle(payload: dict, run: tinystore.Run) -> Any:
            entry = witness.begin(run)
            while True:
                if run.cancelled:
                    witness.told(entry)
                if done_working(payload, entry):
                    break
                left = longest(payload) - (time.monotonic() - entry.started)
                time.sleep(max(0.0, min(0.01, left)))
            return answer(payload, run, entry)
        return handle

    async def handle_async(payload: dict, run: tinystore.AsyncRun) -> Any:
        entry = witness.begin(run)
        try:
            if payload.get("hold"):
                while not done_working(payload, entry):
                    await asyncio.sleep(0.01)
            elif payload.get("s"):
                await asyncio.sleep(payload["s"])
        except asyncio.CancelledError:
            witness.told(entry)
            witness.end(entry, "cancelled")
            raise
        return answer(payload, run, entry)
    return handle_async


class Monitor:
    """Polls the states of some jobs every 10 ms in a thread, and notes when each was first seen in each state.

    A witness of what the store said and when, independent of the handlers:
    ``first(id, "failed")`` is the ``time.monotonic()`` of the first read that
    showed the job failed, or None.
    """

    def __init__(self, queue: tinystore.Queue, ids: Iterable[str]):
        self.queue = queue
        self.ids = list(ids)
        self._seen: dict[tuple[str, str], float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="monitor", daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            self._look()
            self._stop.wait(0.01)
        self._look()  # a state reached within the last 10 ms before stop() is seen too

    def _look(self) -> None:
        for id in self.ids:
            state = self.queue.get(id)
            now = time.monotonic()
            self._seen.setdefault((id, "gone" if state is None else state.state), now)

    def first(self, id: str, state: str) -> Optional[float]:
        return self._seen.get((id, state))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(WAIT)


class Follower:
    """Follows one job with ``queue.watch`` in a thread of its own and keeps every state it yields."""

    def __init__(self, queue: tinystore.Queue, id: str):
        self.id = id
        self.seen: list[tinystore.JobState] = []
        self.error: Optional[BaseException] = None
        self.first = threading.Event()  # the watch yielded the job as it is: it is registered
        self.ended = threading.Event()
        self._thread = threading.Thread(target=self._follow, args=(queue,), name=f"watch {id}", daemon=True)
        self._thread.start()

    def _follow(self, queue: tinystore.Queue) -> None:
        try:
            for state in queue.watch(self.id):
                self.seen.append(state)
                self.first.set()
        except BaseException as exc:  # handed to the test
            self.error = exc
        finally:
            self.first.set()
            self.ended.set()

    def summary(self) -> list[tuple]:
        return [(s.state, s.attempt) + ((first_line(s.error),) if s.error else ()) for s in self.seen]

    def wait_registered(self, timeout: float = WAIT) -> None:
        assert self.first.wait(timeout), f"the watch of {self.id} yielded nothing within {timeout:g}s"
        if self.error is not None:
            raise self.error

    def wait_ended(self, timeout: float = WAIT) -> list[tinystore.JobState]:
        if not self.ended.wait(timeout):
            raise AssertionError(f"the watch of {self.id} had not ended after {timeout:g}s; it saw {self.summary()}")
        if self.error is not None:
            raise self.error
        return self.seen


# Worker processes, and their witness: a file of its own that each run appends to


Run = collections.namedtuple("Run", "id grp pid attempt claimed started ended outcome")


class Lab:
    """A store file, worker processes serving one of its queues (``traffic_child.py``), and their witness."""

    def __init__(self, tmp_path: Path, env: dict[str, str]):
        self.store_path = str(tmp_path / "store.db")
        self.witness_path = str(tmp_path / "witness.log")
        self.tmp_path = tmp_path
        self.env = env
        self.children: list[subprocess.Popen] = []
        self._gates: list[Any] = []
        Path(self.witness_path).touch()
        self.store = tinystore.open(self.store_path)

    def start_workers(self, queue: str, kinds: list[str], workers: int) -> list[subprocess.Popen]:
        """Start one worker process per kind ("sync": a ``def`` handler, "async") serving ``queue``, each with
        ``workers`` handlers at once, and wait until each says it serves."""
        procs = [start_child(CHILD, self.store_path, self.witness_path, queue, str(workers), kind, env=self.env)
                 for kind in kinds]
        self.children += procs
        for proc in procs:
            wait_for_line(proc, "serving", timeout=WAIT)
        return procs

    def stop_workers(self, procs: list[subprocess.Popen]) -> None:
        """SIGTERM each worker and check that it stopped cleanly."""
        for proc in procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
        for proc in procs:  # (its stderr may hold the tracebacks of the failures the tests ask for)
            assert wait_child(proc, timeout=WAIT) == 0, stderr_of(proc)
            assert "stopped" in lines_of(proc), f"the worker did not stop cleanly: {stderr_of(proc)}"

    def gate(self) -> str:
        """A file whose lock the test holds; a run with {"gate": path} waits until ``open_gates()``."""
        path = str(self.tmp_path / f"gate{len(self._gates)}")
        f = open(path, "wb")
        fcntl.flock(f, fcntl.LOCK_EX)
        self._gates.append(f)
        return path

    def open_gates(self) -> None:
        for f in self._gates:
            if not f.closed:
                fcntl.flock(f, fcntl.LOCK_UN)
                f.close()

    def runs(self) -> list[Run]:
        """Every run the children's witness holds, in the order they began (ended and outcome None while
        a run has not ended)."""
        begun: dict[str, list[Any]] = {}
        for line in Path(self.witness_path).read_text().splitlines():
            if not line:
                continue
            parts = line.split()
            if parts[0] == "begin":
                _, key, id, grp, pid, attempt, claimed, started = parts
                begun[key] = [id, None if grp == "-" else grp, int(pid), int(attempt),
                              None if claimed == "-" else float(claimed), float(started), None, None]
            elif parts[0] == "end":
                _, key, ended, outcome = parts
                begun[key][6:] = [float(ended), outcome]
        return sorted((Run(*r) for r in begun.values()), key=lambda r: r.started)

    def wait_runs(self, what: str, condition: Callable[[list[Run]], bool], timeout: float = WAIT) -> None:
        """Wait until ``condition(runs)`` holds for the witness; AssertionError naming ``what`` at the deadline."""
        wait_until(what, lambda: condition(self.runs()), timeout, lambda: f"the witness holds {self.runs()}")

    def close(self) -> None:
        self.open_gates()
        for proc in self.children:
            if proc.poll() is None:
                proc.kill()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                continue
            stderr_of(proc)
        self.store.close()
