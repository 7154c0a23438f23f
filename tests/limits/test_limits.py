"""LIM-01..03: concurrency and rate bound a queue and each of its groups, across every process.

Two kinds of test. The first kind starts three worker processes
(``limits_child.py``) on one store; every handler run writes a witness
record, in a file of its own, with its job, group, process, claim time,
start and end. After the queue is drained and the workers are stopped, the
test reads the witness and checks each bound:

- at no moment do more handlers run than ``concurrency`` (per group:
  ``group_concurrency``). A handler runs inside its lease, so its overlap is
  at most the overlap of the leases that the limit bounds;
- no sliding window of the rate's period holds more claims than the rate
  allows (claims, not handler starts: the limit is enforced on claims, and a
  handler starts a little later, by an amount no test can bound);
- every job ran, once;
- barriers (runs that wait until n of them run at once) make sure a limit is
  actually reached, and that jobs without a group run more at once than a
  group may; a gate (a file lock the test holds) keeps a hot group's first job
  running while the test checks that every other group drained meanwhile.

No test synchronises on a sleep: they wait for lines the children print,
for jobs to be done (``watch``), for the gate, and a barrier polls the
witness until its runs have started (with a deadline). Handlers sleep only as
their work. The assertions are bounds the implementation guarantees, never
speeds.

The second kind runs in this process on a ``FakeClock``: a set-aside job is
claimed as soon as its group has room (without time moving), a rate-limited
group once its window slides, a change of the limits takes effect at once,
retries and snoozes count as starts, and the cost of a claim does not grow with
the jobs waiting behind full groups.
"""

from __future__ import annotations

import collections
import fcntl
import os
import json
import signal
import subprocess
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional

import pytest

import kits
import tinystore
from helpers import start_child, stderr_of, wait_child, wait_for_line
from tinystore.testing import FakeClock

CHILD = (Path(__file__).parent / "limits_child.py").read_text()
EPS = 1e-6  # claim times are read back as (lease expiry - lease): equal to the claim's time within float rounding

Run = collections.namedtuple("Run", "id grp pid attempt key claimed started ended")


# What the witness shows

def peak(intervals: Iterable[tuple[float, float]]) -> int:
    """The most intervals open at one moment; an interval that ends when another starts does not overlap it."""
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    most = now = 0
    for _, delta in events:  # at equal times -1 sorts first: ends before starts
        now += delta
        most = max(most, now)
    return most


def busiest_window(times: Iterable[float], period: float) -> int:
    """The most times in any half-open window [t, t + period)."""
    times = sorted(times)
    most, j = 0, 0
    for i, t in enumerate(times):
        j = max(j, i)
        while j < len(times) and times[j] < t + period - EPS:
            j += 1
        most = max(most, j - i)
    return most


def by_group(runs: Iterable[Run]) -> dict[Optional[str], list[Run]]:
    groups: dict[Optional[str], list[Run]] = collections.defaultdict(list)
    for r in runs:
        groups[r.grp].append(r)
    return groups


def spans(runs: Iterable[Run]) -> list[tuple[float, float]]:
    return [(r.started, r.ended) for r in runs]


# Three worker processes on one store

class Lab:
    """A store, its worker processes, and the witness of their runs."""

    def __init__(self, target: str, tmp_path: Path, env: dict[str, str]):
        self.target = target
        self.witness_path = str(tmp_path / "witness.jsonl")
        self.tmp_path = tmp_path
        self.env = env
        self.children: list[subprocess.Popen] = []
        self.gates: list[Any] = []
        Path(self.witness_path).touch()
        self.store = tinystore.open(self.target)

    def queue(self, name: str, **options: Any) -> tinystore.Queue:
        # A long lease: no renewal moves a lease's expiry during a test, so it tells the claim time.
        return self.store.queue(name, lease="10m", **options)

    @contextmanager
    def workers(self, queue: str, processes: int = 3, workers: int = 4) -> Iterator[list[subprocess.Popen]]:
        """Start the worker processes and wait until each says it is ready; stop them with SIGTERM after."""
        procs = []
        try:
            for _ in range(processes):
                proc = start_child(CHILD, self.target, self.witness_path, queue, str(workers), env=self.env)
                self.children.append(proc)
                procs.append(proc)
            for proc in procs:
                wait_for_line(proc, "ready", timeout=60)
            yield procs
        finally:
            self.open_gates()
            for proc in procs:
                if proc.poll() is None:
                    os.kill(proc.pid, signal.SIGTERM)
        for proc in procs:  # only when the block succeeded: a clean stop is part of the test
            assert wait_child(proc, timeout=60) == 0, stderr_of(proc)
            assert "Traceback" not in stderr_of(proc), stderr_of(proc)

    def gate(self) -> str:
        """A file whose lock the test holds; a run with {"gate": path} waits until open_gates()."""
        path = str(self.tmp_path / f"gate{len(self.gates)}")
        f = open(path, "wb")
        fcntl.flock(f, fcntl.LOCK_EX)
        self.gates.append(f)
        return path

    def open_gates(self) -> None:
        for f in self.gates:
            if not f.closed:
                fcntl.flock(f, fcntl.LOCK_UN)
                f.close()

    def drain(self, queue: tinystore.Queue, ids: list[str], timeout: float = 60) -> None:
        """Wait until each of these jobs is done (watching them, not polling)."""
        finished = threading.Event()

        def watch_all() -> None:
            for id in ids:
                for _ in queue.watch(id):
                    pass
            finished.set()

        threading.Thread(target=watch_all, daemon=True).start()
        if not finished.wait(timeout):
            raise AssertionError(f"{queue.name} was not drained within {timeout:g}s: {self.store.stats()}; "
                                 f"problems: {self.problems()}")

    def records(self) -> list[dict]:
        """The witness: every record the children wrote (whole lines only), in the order written."""
        return [json.loads(line) for line in Path(self.witness_path).read_text().split("\n")[:-1]]

    def runs(self) -> list[Run]:
        """One per handler run that started, by start time; ``ended`` is None where it never ended."""
        records = self.records()
        ended = {(r["id"], r["attempt"], r["pid"]): r["ended"] for r in records if r.get("phase") == "end"}
        starts = [r for r in records if r.get("phase") == "start"]
        return sorted((Run(r["id"], r["grp"], r["pid"], r["attempt"], r["key"], r["claimed"], r["started"],
                           ended.get((r["id"], r["attempt"], r["pid"]))) for r in starts),
                      key=lambda run: run.started)

    def problems(self) -> list[str]:
        return [r["problem"] for r in self.records() if "problem" in r]

    def every_job_ran_once(self, queue: tinystore.Queue, ids: list[str]) -> list[Run]:
        """The witness holds one finished run of each job and no other; the queue holds nothing more."""
        runs = self.runs()
        assert self.problems() == []
        assert sorted(r.id for r in runs) == sorted(ids)  # each job ran, and no job ran twice
        assert all(r.ended is not None for r in runs)
        assert all(r.claimed is not None and r.claimed <= r.started for r in runs)
        counts = self.store.stats()[queue.name]
        assert (counts["waiting"], counts["running"], counts["scheduled"], counts["failed"]) == (0, 0, 0, 0)
        return runs

    def close(self) -> None:
        self.open_gates()
        for proc in self.children:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        self.store.close()


@pytest.fixture
def lab(target: str, tmp_path: Path, child_env: dict[str, str]) -> Iterator[Lab]:
    lab = Lab(target, tmp_path, child_env)
    yield lab
    lab.close()


def add(queue: tinystore.Queue, jobs: list[tuple[str, Optional[str], dict]]) -> list[str]:
    """Add (id, group, payload) jobs in this order; return their ids."""
    queue.add_many([tinystore.Job(payload, id=id, group=grp) for id, grp, payload in jobs])
    return [id for id, _, _ in jobs]


# LIM-01: concurrency

def test_LIM_01_concurrency_bounds_the_live_leases_of_a_queue_across_three_processes(lab: Lab) -> None:
    q = lab.queue("lim01", concurrency=3)
    # Two slots per process: three at once needs two processes, and the first three jobs wait
    # until three run at once, so the bound is reached while every process tries to claim more.
    jobs = [(f"j{i}", None, {"barrier": ["first", 3]} if i < 3 else {"ms": 20}) for i in range(40)]
    with lab.workers("lim01", processes=3, workers=2):
        ids = add(q, jobs)
        lab.drain(q, ids)
    runs = lab.every_job_ran_once(q, ids)
    assert peak(spans(runs)) == 3
    assert len({r.pid for r in runs}) >= 2


def test_LIM_01_a_queue_with_concurrency_1_runs_its_jobs_one_at_a_time_in_order_across_processes(lab: Lab) -> None:
    q = lab.queue("single", concurrency=1)
    with lab.workers("single", processes=3, workers=2):
        ids = add(q, [(f"j{i:02}", None, {"ms": 5}) for i in range(15)])
        lab.drain(q, ids)
    runs = lab.every_job_ran_once(q, ids)
    assert peak(spans(runs)) == 1
    assert [r.id for r in runs] == ids  # JOB-01: strictly in the order they were added


# LIM-02: group_concurrency

def test_LIM_02_group_concurrency_bounds_each_group_across_processes_and_jobs_without_a_group_run_freely(
        lab: Lab) -> None:
    q = lab.queue("lim02", group_concurrency=2)
    groups = [f"customer:{k}" for k in range(4)]
    jobs: list[tuple[str, Optional[str], dict]] = []
    # Jobs without a group: four must run at once, which no group could (group_concurrency=2).
    jobs += [(f"free:{i}", None, {"barrier": ["free", 4]} if i < 4 else {"ms": 10}) for i in range(8)]
    for i in range(8):  # interleaved, as customers' work arrives; each group's first two wait for each other
        jobs += [(f"{g}:{i}", g, {"barrier": [g, 2]} if i < 2 else {"ms": 10}) for g in groups]
    with lab.workers("lim02", processes=3, workers=5):
        ids = add(q, jobs)
        lab.drain(q, ids)
    runs = lab.every_job_ran_once(q, ids)
    per_group = by_group(runs)
    for g in groups:
        assert peak(spans(per_group[g])) == 2, g
    assert peak(spans(per_group[None])) >= 4  # bound by the queue's limits only (here: none)
    assert len({r.pid for r in runs}) >= 2


def test_LIM_02_a_hot_groups_backlog_does_not_hold_up_other_groups(lab: Lab) -> None:
    q = lab.queue("hot", group_concurrency=1)
    gate = lab.gate()
    hot = [(f"hot:{i:02}", "hot", {"gate": gate} if i == 0 else {"ms": 1}) for i in range(40)]
    others = [(f"g{k}:{i}", f"g{k}", {"ms": 5}) for i in range(3) for k in range(20)]
    with lab.workers("hot", processes=3, workers=4):
        hot_ids = add(q, hot)  # added first: ahead of every other group's jobs
        other_ids = add(q, others)
        lab.drain(q, other_ids)  # every other group drains while the hot group's first job still runs
        assert [j.id for j in q.jobs(state="running", group="hot")] == ["hot:00"]
        assert len(q.jobs(state="waiting", group="hot")) == 39
        lab.open_gates()
        lab.drain(q, hot_ids)
    runs = lab.every_job_ran_once(q, hot_ids + other_ids)
    per_group = by_group(runs)
    for g, group_runs in per_group.items():  # one at a time, in the order they were added (JOB-01)
        assert peak(spans(group_runs)) == 1, g
        assert [r.id for r in group_runs] == [id for id, grp, _ in hot + others if grp == g], g
    first_hot_end = per_group["hot"][0].ended
    assert all(r.ended < first_hot_end for r in runs if r.grp != "hot")


# LIM-03: rate and group_rate

def test_LIM_03_rate_bounds_the_starts_of_a_queue_in_every_sliding_window_across_processes(lab: Lab) -> None:
    q = lab.queue("lim03", rate=(4, "500ms"))
    with lab.workers("lim03", processes=3, workers=4):
        ids = add(q, [(f"j{i:02}", None, {}) for i in range(16)])
        lab.drain(q, ids)
    runs = lab.every_job_ran_once(q, ids)
    assert busiest_window([r.claimed for r in runs], 0.5) <= 4
    # so 16 starts at 4 per 500 ms cannot all happen within 1.5 s of the first
    assert max(r.claimed for r in runs) - min(r.claimed for r in runs) >= 1.5 - EPS


def test_LIM_03_group_rate_bounds_the_starts_of_each_group_across_processes(lab: Lab) -> None:
    q = lab.queue("grate", group_rate=(2, "500ms"))
    groups = [f"api:{k}" for k in range(3)]
    jobs = [(f"{g}:{i}", g, {}) for i in range(6) for g in groups] + [(f"free:{i}", None, {}) for i in range(6)]
    with lab.workers("grate", processes=3, workers=4):
        ids = add(q, jobs)
        lab.drain(q, ids)
    runs = lab.every_job_ran_once(q, ids)
    per_group = by_group(runs)
    for g in groups:
        claims = [r.claimed for r in per_group[g]]
        assert busiest_window(claims, 0.5) <= 2, g
        assert max(claims) - min(claims) >= 1.0 - EPS, g


def test_LIM_03_every_limit_holds_at_once_queue_and_group_concurrency_and_rates(lab: Lab) -> None:
    q = lab.queue("all", concurrency=4, rate=(8, "500ms"), group_concurrency=1, group_rate=(2, "500ms"))
    groups = [f"c{k}" for k in range(4)]
    jobs = [(f"{g}:{i}", g, {"ms": 20}) for g in groups for i in range(5)]  # a group's jobs one after another
    jobs += [(f"free:{i}", None, {"ms": 20}) for i in range(8)]
    with lab.workers("all", processes=3, workers=4):
        ids = add(q, jobs)
        lab.drain(q, ids)
    runs = lab.every_job_ran_once(q, ids)
    assert peak(spans(runs)) <= 4
    assert busiest_window([r.claimed for r in runs], 0.5) <= 8
    for g, group_runs in by_group(runs).items():
        if g is not None:
            assert peak(spans(group_runs)) == 1, g
            assert busiest_window([r.claimed for r in group_runs], 0.5) <= 2, g
            assert [r.id for r in group_runs] == [id for id, grp, _ in jobs if grp == g]


# In this process, on a fake clock: set aside, woken, changed

class Handlers:
    """A handler whose runs the test controls: each run says it started and waits until released."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.started: dict[str, threading.Event] = collections.defaultdict(threading.Event)
        self.release: dict[str, threading.Event] = collections.defaultdict(threading.Event)
        self.log: list[tuple[str, int, float]] = []
        self.hold: set[str] = set()

    def __call__(self, clock: FakeClock) -> Callable[[Any, Any], None]:
        def handle(payload: Any, run: tinystore.Run) -> None:
            with self.lock:
                self.log.append((run.id, run.attempt, clock.now()))
                started, release = self.started[run.id], self.release[run.id]
            started.set()
            if run.id in self.hold:
                assert release.wait(30)
        return handle

    def let_go(self, *ids: str) -> None:
        with self.lock:
            for id in ids or list(self.release):
                self.release[id].set()


def until_idle(store: tinystore.Store, timeout: float = 15) -> None:
    """``store.run_until_idle()``, failing instead of hanging if it never finds the store idle."""
    finished = threading.Event()
    error: list[BaseException] = []

    def run() -> None:
        try:
            store.run_until_idle()
        except BaseException as exc:  # handed to the test below
            error.append(exc)
        finished.set()

    threading.Thread(target=run, daemon=True).start()
    assert finished.wait(timeout), f"run_until_idle did not return within {timeout:g}s: {store.stats()}"
    if error:
        raise error[0]


def done(queue: tinystore.Queue, id: str, timeout: float = 10) -> None:
    """Wait until a job is done (its settlement committed): watching, not polling."""
    finished = threading.Event()

    def watch() -> None:
        for _ in queue.watch(id):
            pass
        finished.set()

    threading.Thread(target=watch, daemon=True).start()
    assert finished.wait(timeout), f"{id} was not done within {timeout}s"


@pytest.fixture
def handlers() -> Iterator[Handlers]:
    h = Handlers()
    yield h
    h.let_go()


def test_LIM_02_a_full_groups_job_is_claimed_as_soon_as_its_group_has_room(
        store: tinystore.Store, clock: FakeClock, handlers: Handlers) -> None:
    q = store.queue("q", group_concurrency=1)
    q.work(handlers(clock))
    handlers.hold |= {"a", "c"}
    q.add({}, id="a", group="g")
    q.add({}, id="b", group="g")
    q.add({}, id="c", group="other")
    store.start(workers=4)
    try:
        assert handlers.started["a"].wait(10)
        assert handlers.started["c"].wait(10)  # not held up by g
        handlers.let_go("c")
        done(q, "c")  # the cycle that settled c claimed for the free slots, and set b aside
        assert q.get("b").state == "waiting" and not handlers.started["b"].is_set()
        handlers.let_go("a")
        assert handlers.started["b"].wait(10)  # as soon as a's lease ends; the clock never moved
    finally:
        handlers.let_go()
        store.stop()


def test_LIM_03_a_rate_limited_group_is_claimed_once_its_window_slides(
        store: tinystore.Store, clock: FakeClock, handlers: Handlers) -> None:
    q = store.queue("q", group_rate=(2, "10s"))
    q.work(handlers(clock))
    t0 = clock.now()
    add(q, [("a1", "a", {}), ("a2", "a", {}), ("a3", "a", {}), ("b1", "b", {})])
    until_idle(store)
    assert sorted(id for id, _, _ in handlers.log) == ["a1", "a2", "b1"]  # b is not held up by a
    assert q.get("a3").state == "waiting"
    clock.advance("9.9s")
    until_idle(store)
    assert q.get("a3").state == "waiting"  # the window holds two starts until 10 s after them
    store.start()
    try:
        clock.advance("0.1s")  # the window slides: the serving worker's timer wakes it, no poll needed
        assert handlers.started["a3"].wait(10)
    finally:
        store.stop()
    assert handlers.log[-1] == ("a3", 1, t0 + 10)


def test_LIM_03_retries_and_snoozed_runs_count_as_starts(store: tinystore.Store, clock: FakeClock) -> None:
    q = store.queue("q", rate=(1, "1m"), backoff=("1s", "1s"))
    runs: list[tuple[int, float]] = []

    @q.work
    def handle(payload: Any, run: tinystore.Run) -> Any:
        runs.append((run.attempt, clock.now()))
        if len(runs) == 1:
            raise RuntimeError("first attempt fails")
        if len(runs) == 2:
            return run.snooze("1s")
        return None

    t0 = clock.now()
    q.add({}, id="j")
    until_idle(store)
    clock.advance("2s")  # past the backoff: due again, but the window holds the first start
    until_idle(store)
    assert runs == [(1, t0)]
    clock.advance("58s")
    until_idle(store)
    clock.advance("2s")  # past the snooze: due again, but the window holds the retry's start
    until_idle(store)
    assert runs == [(1, t0), (2, t0 + 60)]
    clock.advance("58s")
    until_idle(store)
    assert runs == [(1, t0), (2, t0 + 60), (2, t0 + 120)]
    assert q.get("j") is None


def test_LIM_02_jobs_without_a_group_are_bound_by_the_queues_limits_only(
        store: tinystore.Store, clock: FakeClock) -> None:
    q = store.queue("q", group_concurrency=1, group_rate=(1, "1h"), concurrency=5)
    together = threading.Barrier(5, timeout=10)  # five ungrouped runs must be running at once
    ran: list[str] = []

    @q.work
    def handle(payload: Any, run: tinystore.Run) -> None:
        if payload.get("together"):
            together.wait()
        ran.append(run.id)

    add(q, [(f"free:{i}", None, {"together": i < 5}) for i in range(6)] + [("g:1", "g", {}), ("g:2", "g", {})])
    until_idle(store)
    assert sorted(ran) == [f"free:{i}" for i in range(6)] + ["g:1"]
    assert q.get("g:2").state == "waiting"


def test_LIM_02_changing_group_concurrency_takes_effect_at_once_in_every_process(
        store: tinystore.Store, open_store: Callable[..., tinystore.Store], clock: FakeClock,
        handlers: Handlers) -> None:
    q = store.queue("q", group_concurrency=1)
    q.work(handlers(clock))
    handlers.hold |= {"g:1", "g:2", "g:3", "g:4"}
    add(q, [(f"g:{i}", "g", {}) for i in range(1, 6)])
    store.start(workers=8)
    try:
        assert handlers.started["g:1"].wait(10)
        q.add({}, id="x1")
        done(q, "x1")  # a later cycle: g:2 is still set aside
        assert not handlers.started["g:2"].is_set()
        store.queue("q", group_concurrency=2)  # this process
        assert handlers.started["g:2"].wait(10)
        other = open_store(clock=clock)  # another open of the store, as another process: the same options
        other.queue("q", group_concurrency=4)
        assert handlers.started["g:3"].wait(10) and handlers.started["g:4"].wait(10)
        other.queue("q", group_concurrency=1)
        handlers.let_go("g:1", "g:2")
        done(q, "g:1")
        done(q, "g:2")
        q.add({}, id="x2")
        done(q, "x2")  # two leases of g still live: g:5 waits under the new limit
        assert q.get("g:5").state == "waiting" and not handlers.started["g:5"].is_set()
        handlers.let_go("g:3", "g:4")
        assert handlers.started["g:5"].wait(10)
    finally:
        handlers.let_go()
        store.stop()
    assert clock.now() == 1_800_000_000.0  # nothing here needed time to move


def test_LIM_03_raising_or_removing_a_group_rate_frees_the_groups_it_had_set_aside_at_once(
        store: tinystore.Store, clock: FakeClock) -> None:
    q = store.queue("q", group_rate=(1, "1h"))
    ran: list[str] = []
    q.work(lambda payload, run: ran.append(run.id))
    add(q, [("a1", "a", {}), ("a2", "a", {}), ("a3", "a", {})])
    until_idle(store)
    assert ran == ["a1"]
    store.queue("q", group_rate=(2, "1h"))
    until_idle(store)
    assert ran == ["a1", "a2"]  # not an hour later, when the old window would have slid
    store.queue("q", group_rate=None)
    until_idle(store)
    assert ran == ["a1", "a2", "a3"]


def test_LIM_01_jobs_start_in_order_within_what_the_limits_allow(store: tinystore.Store, clock: FakeClock) -> None:
    q = store.queue("q", concurrency=1, group_concurrency=1)
    ran: list[str] = []
    q.work(lambda payload, run: ran.append(run.id))
    now = clock.now()
    # (id, group, seconds ago it was due): start order is the order of due times, then of adding
    jobs = [("a", "g1", 5), ("b", None, 9), ("c", "g2", 5), ("d", "g1", 7), ("e", None, 5), ("f", "g2", 1),
            ("g", "g1", 1)]
    q.add_many([tinystore.Job({}, id=id, group=grp, at=now - ago) for id, grp, ago in jobs])
    until_idle(store)
    assert ran == ["b", "d", "a", "c", "e", "f", "g"]


def test_LIM_01_a_worker_at_a_limit_looks_again_when_room_can_come_not_at_once(
        store: tinystore.Store, clock: FakeClock, kit: kits.Kit) -> None:
    """A claim cycle that found no room must not ask to be run again at once (a busy loop of
    write transactions); it waits for a commit (a lease ends), a lease expiry or a window sliding."""
    now = clock.now()

    def cycle(queue: tinystore.Queue, want: int) -> kits.ClaimCycle:
        return kit.claim_cycle(store, queue, want, now)

    full = store.queue("full", concurrency=1, lease="30s")
    full.add_many([{}, {}, {}])
    first = cycle(full, 4)
    assert len(first.claimed) == 1
    assert first.wake_at == now + 30  # nothing before the lease runs out, unless a commit says so
    assert cycle(full, 4).wake_at == now + 30

    rated = store.queue("rated", rate=(1, "10s"))
    rated.add_many([{}, {}])
    assert len(cycle(rated, 4).claimed) == 1
    assert cycle(rated, 4).wake_at == now + 10

    grouped = store.queue("grouped", group_concurrency=1, group_rate=(2, "20s"), lease="30s")
    grouped.add_many([tinystore.Job({}, group="g") for _ in range(3)])
    assert len(cycle(grouped, 4).claimed) == 1
    assert cycle(grouped, 4).wake_at == now + 30
    grouped.add_many([tinystore.Job({}, group="h") for _ in range(3)])
    store.queue("grouped", group_concurrency=None)
    assert len(cycle(grouped, 4).claimed) == 3  # g's second and h's first two
    assert cycle(grouped, 4).wake_at == now + 20


# The cost of a claim

def claim_cost(kit: kits.Kit, target: str, clock: FakeClock, behind_hot: int, full_groups: int, rate: bool) -> int:
    """The work (``kit.writer_work``: on SQLite, VM steps) of one claim cycle that takes 10 jobs of 10 groups
    with room, while one hot group (full, or out of its rate) holds ``behind_hot`` waiting jobs and
    ``full_groups`` more groups are full."""
    store = tinystore.open(target, clock=clock, durability="off")
    try:
        options = {"group_rate": (1, "1h")} if rate else {"group_concurrency": 1}
        q = store.queue("q", lease="1h", **options)
        now = clock.now()

        def cycle(want: int) -> kits.ClaimCycle:
            return kit.claim_cycle(store, q, want, now)

        q.add_many([tinystore.Job({}, group="hot") for _ in range(behind_hot + 1)])
        q.add_many([tinystore.Job({}, group=f"full:{k}") for k in range(full_groups) for _ in range(2)])
        assert len(cycle(full_groups + 1).claimed) == full_groups + 1  # the hot group's head and one per group
        q.add_many([tinystore.Job({}, group=f"room:{k}") for k in range(10)])
        with kit.writer_work(store) as work:
            claimed = cycle(11).claimed  # one more than there is: the cycle also works out when to look again
        assert sorted(c.group for c in claimed) == sorted(f"room:{k}" for k in range(10))
        return work[0]
    finally:
        store.close()


@pytest.mark.parametrize("rate", [False, True], ids=["group_concurrency", "group_rate"])
def test_LIM_02_a_claim_does_not_read_the_jobs_waiting_behind_full_groups(
        kit: kits.Kit, clock: FakeClock, rate: bool) -> None:
    small = claim_cost(kit, kit.new_target("small"), clock, behind_hot=10, full_groups=10, rate=rate)
    big = claim_cost(kit, kit.new_target("big"), clock, behind_hot=5_000, full_groups=500, rate=rate)
    # B-trees a level deeper may cost a little; reading 5,000 jobs or 500 groups would cost several times more.
    assert big < small * 1.5, (small, big)
