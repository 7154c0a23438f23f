"""What the crash tests share: child processes on the test's store, and the witness of runs.

The children run ``crash_child.py`` (see its docstring), on the test's target.
Each handler run appends to a witness file, outside the store, so the tests
count runs with something no crash of the store can change: no job lost, no
attempt run twice. What the store itself holds, the tests read through the
public API or the backend's kit (``kits.py``), beside tinystore.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional

import pytest

import kits
import tinystore
from helpers import start_child, stderr_of

CHILD = (Path(__file__).parent / "crash_child.py").read_text()
LOST = "lease ended without a settlement"

Run = collections.namedtuple("Run", "phase queue id attempt pid")


class Lab:
    """Starts children on one store and reads what they left: the witness, and (through the kit) the store."""

    def __init__(self, kit: kits.Kit, target: str, witness_path: str, env: dict[str, str]):
        self.kit = kit
        self.target = target
        self.witness_path = witness_path
        self.env = env
        self.children: list[subprocess.Popen] = []

    def start(self, *args: str) -> subprocess.Popen:
        proc = start_child(CHILD, *args, env=self.env, stdin=subprocess.PIPE)
        self.children.append(proc)
        return proc

    def adder(self, queue: str, count: int = 0, then_block: bool = False) -> subprocess.Popen:
        """A child adding job-0, job-1, ... to ``queue``; it prints "added <id>" after each add returned."""
        return self.start("add", self.target, queue, "--count", str(count), *(["--then-block"] * then_block))

    def worker(self, *queues: str, until_idle: bool = False, serve: bool = False,
               target: Optional[str] = None) -> subprocess.Popen:
        """A child serving ``queues`` ("name:sync" or "name:async"), with run_until_idle() or serve().

        It opens the store by ``target`` where given (another name of the same store), else by the test's.
        """
        assert until_idle != serve
        args = [a for q in queues for a in ("--queue", q)]
        return self.start("work", target or self.target, self.witness_path, *args,
                          "--until-idle" if until_idle else "--serve")

    def prepare(self, queue: str, jobs: Iterable[Any] = (), **options: Any) -> None:
        """Keep ``queue``'s options in the store and add jobs (``(id, payload)`` or ``tinystore.Job``),
        from a store closed right after."""
        with tinystore.open(self.target) as store:
            q = store.queue(queue, **options)
            q.add_many([job if isinstance(job, tinystore.Job) else tinystore.Job(job[1], id=job[0]) for job in jobs])

    # What the children left

    def runs(self, phase: Optional[str] = None) -> list[Run]:
        """The witness: every handler run's "start" and "end", in the order they were written."""
        try:
            text = Path(self.witness_path).read_text()
        except FileNotFoundError:
            return []
        runs = []
        for line in text.splitlines():
            p, q, id, attempt, pid = line.split()
            runs.append(Run(p, q, id, int(attempt), int(pid)))
        return [r for r in runs if phase is None or r.phase == phase]

    def stall(self, proc: subprocess.Popen) -> None:
        """SIGSTOP the child at a moment it holds no write lock of the store.

        A process stopped inside a write transaction would keep every other
        process from writing (on SQLite that is the file's lock, not a lease),
        so a stop that lands inside one is undone and tried again.
        """
        for _ in range(100):
            proc.send_signal(signal.SIGSTOP)
            _, status = os.waitpid(proc.pid, os.WUNTRACED)  # returns once the child is stopped
            assert os.WIFSTOPPED(status), f"the child ended instead of stopping: {status}"
            if self.kit.write_lock_free(self.target, timeout=0):  # the child is stopped: waiting would not free it
                return
            proc.send_signal(signal.SIGCONT)  # stopped while writing: let it end that transaction
            assert self.kit.write_lock_free(self.target, timeout=30), "the child kept the store's write lock"
        raise AssertionError("the child held the store's write lock at every stop")

    def owner_of(self, pid: int) -> int:
        """The registration of the process ``pid`` in the store."""
        ids = [p.id for p in self.kit.registered_processes(self.target) if p.pid == pid]
        assert len(ids) == 1, f"process {pid} is registered {len(ids)} times"
        return ids[0]

    def leases_of(self, owner: int) -> list[kits.Lease]:
        """The live leases the registration ``owner`` holds."""
        return [lease for lease in self.kit.leases(self.target) if lease.owner == owner]

    def until_leases_ended(self, owner: int, since: float, within: float) -> float:
        """Wait until the registration ``owner`` holds no lease and is gone (DUR-03: its process died, and a
        process that opened or serves the store found it dead); returns the seconds since ``since`` (a
        ``time.monotonic()``), and fails once more than ``within`` passed first."""
        while self.leases_of(owner) or any(p.id == owner for p in self.kit.registered_processes(self.target)):
            waited = time.monotonic() - since
            assert waited < within, f"process #{owner} still held {len(self.leases_of(owner))} leases {waited:.1f}s on"
            time.sleep(0.05)
        return time.monotonic() - since

    def assert_sound(self, finished: Iterable[tuple[str, str]] = ()) -> None:
        """No attempt ran twice, every end follows its start, and each ``(queue, id)`` in ``finished`` ran to its end."""
        runs = self.runs()
        seen = collections.Counter((r.phase, r.queue, r.id, r.attempt) for r in runs)
        twice = [key for key, n in seen.items() if n > 1]
        assert not twice, f"attempts that ran twice: {twice}"
        started = {(r.queue, r.id, r.attempt) for r in runs if r.phase == "start"}
        orphan = [r for r in runs if r.phase == "end" and (r.queue, r.id, r.attempt) not in started]
        assert not orphan, f"runs that ended without starting: {orphan}"
        ended = {(r.queue, r.id) for r in runs if r.phase == "end"}
        lost = sorted(set(finished) - ended)
        assert not lost, f"{len(lost)} jobs never ran to their end, e.g. {lost[:5]}"

    def assert_consistent(self) -> None:
        """The store is sound (the backend's own check), its leases agree with its jobs and processes, the
        jobs per queue and state it keeps for stats() with its jobs, and each batch's counts with its jobs
        (an ended batch has its then job, a batch whose then job left is gone)."""
        problems = self.kit.inconsistencies(self.target)
        assert problems["integrity"] == []
        assert problems["leases off their job"] == []
        assert problems["running without a lease"] == []
        assert problems["leases of unregistered processes"] == []
        assert problems["state counts off the jobs"] == []
        assert problems["batch counts off its jobs"] == []
        assert problems["ended batches without their then job"] == []
        assert problems["batches kept after their then job"] == []

    @staticmethod
    def watch_until_ended(queue: tinystore.Queue, ids: Iterable[str], timeout: float) -> dict[str, tinystore.JobState]:
        """Follow each job with ``queue.watch`` (which sees other processes' changes) until it ended.

        Returns the last state of each; fails when ``timeout`` seconds pass first,
        naming the job it still waited for.
        """
        last: dict[str, tinystore.JobState] = {}
        waiting: list[Optional[str]] = [None]
        errors: list[BaseException] = []

        def follow() -> None:
            try:
                for id in ids:
                    waiting[0] = id
                    for state in queue.watch(id):
                        last[id] = state
                waiting[0] = None
            except BaseException as exc:  # handed to the test below
                errors.append(exc)

        thread = threading.Thread(target=follow, daemon=True)
        started = time.monotonic()
        thread.start()
        thread.join(timeout)
        if errors:
            raise errors[0]
        if thread.is_alive():
            id = waiting[0]
            raise AssertionError(f"{id} had not ended after {time.monotonic() - started:.1f}s: {last.get(id)!r}")
        return last

    def close(self) -> None:
        for proc in self.children:
            if proc.poll() is None:
                proc.kill()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                continue
            stderr_of(proc)  # waits for the readers to reach the end of the pipes
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    try:
                        stream.close()
                    except BrokenPipeError:  # what the test wrote to its stdin was never read
                        pass


@pytest.fixture
def lab(kit: kits.Kit, target: str, tmp_path: Path, child_env: dict[str, str]) -> Iterator[Lab]:
    lab = Lab(kit, target, str(tmp_path / "witness.log"), child_env)
    yield lab
    lab.close()
