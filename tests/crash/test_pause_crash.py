"""Pausing a queue that worker processes serve under steady adds, one of them killed while it is paused.

Three worker processes serve one queue while the test adds a job every few
milliseconds. The test pauses the queue, SIGKILLs the worker that holds the
most long jobs, lets the others' long jobs finish, and resumes. The witness
is a table of the store's database that each handler writes as its first act:
the job, its attempt, the process and the time it started (the test and the
workers read one machine's clock). At the end: nothing started later than a
second after the pause was kept until the resume; the killed worker's jobs
came back and waited for the resume; every job added ran to its end, none
lost, no attempt run twice.
"""

from __future__ import annotations

import collections
import signal
import threading
import time
from pathlib import Path
from typing import Any, Callable

import tinystore
from helpers import kill_child, start_child, stderr_of, wait_child, wait_for_line

WAIT = 120  # bounds a broken test, never a passing one's speed (PostgreSQL beside other tests on 2 cores)
HOLDS = 6  # long jobs: their first attempt runs until the test lets it end

WORKER = """
import os
import sys
import time

import tinystore

target, insert, release = sys.argv[1:4]
store = tinystore.open(target)
q = store.queue("q")


@q.work
def handle(payload, run):
    store.execute(insert, (run.id, run.attempt, os.getpid(), time.time()))
    if payload.get("hold") and run.attempt == 1:
        while not os.path.exists(release):
            time.sleep(0.01)
    else:
        time.sleep(0.005)


print("serving", flush=True)
store.serve(workers=4)
print("stopped", flush=True)
"""

Start = collections.namedtuple("Start", "id attempt pid at")


def wait_until(condition: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        threading.Event().wait(0.02)
    raise AssertionError(f"{what}: not after {timeout}s")


class Adder:
    """Adds job n-0, n-1, ... every few milliseconds in a thread, until ``stop``."""

    def __init__(self, q: tinystore.Queue):
        self.q = q
        self.ids: list[str] = []
        self.stopping = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while not self.stopping.wait(0.005):
                id = f"n-{len(self.ids)}"
                self.q.add({}, id=id)
                self.ids.append(id)
        except BaseException as exc:  # handed to stop()
            self.error = exc

    def stop(self) -> list[str]:
        self.stopping.set()
        self.thread.join(WAIT)
        if self.error is not None:
            raise self.error
        return self.ids


def test_a_pause_stops_every_worker_process_within_a_second_and_a_worker_killed_while_paused_loses_nothing(
        kit, target, open_store, child_env, tmp_path: Path):
    store = open_store()
    q = store.queue("q", dedupe="1d")
    kit.create_table(store, "pause_witness", "id TEXT, attempt INTEGER, pid INTEGER, at DOUBLE PRECISION")
    insert = kit.sql("INSERT INTO pause_witness (id, attempt, pid, at) VALUES (?, ?, ?, ?)")
    release = tmp_path / "release"

    def starts() -> list[Start]:
        return [Start(*row) for row in kit.app_rows(target, "SELECT id, attempt, pid, at FROM pause_witness")]

    workers = [start_child(WORKER, target, insert, str(release), env=child_env) for _ in range(3)]
    try:
        for w in workers:
            wait_for_line(w, "serving")
        holds = [f"hold-{i}" for i in range(HOLDS)]
        q.add_many([tinystore.Job({"hold": True}, id=id) for id in holds])
        wait_until(lambda: len(starts()) == HOLDS, "every long job started")
        adder = Adder(q)
        wait_until(lambda: len(starts()) >= HOLDS + 30, "the workers start the added jobs")

        q.pause()
        kept = time.time()
        added_at_pause = len(adder.ids)
        by_pid = collections.Counter(s.pid for s in starts() if s.id in holds)
        victim = next(w for w in workers if w.pid == by_pid.most_common(1)[0][0])
        killed = sorted(s.id for s in starts() if s.id in holds and s.pid == victim.pid)
        assert kill_child(victim) == -signal.SIGKILL
        # The others end the dead worker's leases (DUR-03): its jobs wait again, and go on waiting.
        wait_until(lambda: all(q.get(id).state == "waiting" for id in killed), "the killed worker's jobs wait again")
        release.touch()  # the long jobs of the live workers end, and settle while the queue is paused
        survivors = [id for id in holds if id not in killed]
        wait_until(lambda: all(q.get(id).state == "done" for id in survivors), "the live workers' long jobs settled")
        wait_until(lambda: time.time() > kept + 2.0, "two seconds of the pause passed")  # time itself is the point
        assert [q.get(id).state for id in killed] == ["waiting"] * len(killed)
        assert len(adder.ids) > added_at_pause, "adds were accepted while paused"
        assert q.paused is True

        resumed = time.time()
        q.resume()
        wait_until(lambda: len(adder.ids) > added_at_pause + 100, "adds after the resume")
        ids = holds + adder.stop()
        wait_until(lambda: store.stats()["q"]["done"] == len(ids), f"all {len(ids)} jobs done")

        seen = starts()
        late = [s for s in seen if kept + 1.0 < s.at < resumed]
        assert not late, f"{len(late)} jobs started later than 1 s after the pause was kept: {late[:5]}"
        twice = [key for key, n in collections.Counter((s.id, s.attempt) for s in seen).items() if n > 1]
        assert not twice, f"attempts that ran twice: {twice[:5]}"
        assert {s.id for s in seen} == set(ids), "every job added started, none lost"
        for id in killed:  # its first attempt died with the worker; the second ran after the resume
            runs = sorted((s.attempt, s.at) for s in seen if s.id == id)
            assert [a for a, _ in runs] == [1, 2] and runs[1][1] > resumed, (id, runs)
        states = {(j.id, j.state) for j in q.jobs(limit=10_000)}
        assert states == {(id, "done") for id in ids}

        for w in workers:
            if w is not victim:
                w.send_signal(signal.SIGTERM)
        for w in workers:
            if w is not victim:
                assert wait_child(w) == 0, stderr_of(w)
        problems = kit.inconsistencies(target)
        for name in ("integrity", "leases off their job", "running without a lease", "state counts off the jobs"):
            assert problems[name] == [], (name, problems[name])
        assert kit.leases(target) == []
    finally:
        for w in workers:
            if w.poll() is None:
                kill_child(w)
