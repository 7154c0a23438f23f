"""Several worker processes draining one queue of one store, with nothing crashing.

Every job must be done exactly once: each handler run appends a "start" and
an "end" line to the witness file, so a job run twice (by two processes that
both claimed it) or never shows there, whatever the store says about itself.
"""

from __future__ import annotations

import collections
import signal

import pytest

import tinystore

from helpers import kill_child, lines_of, stderr_of, wait_child, wait_for_line

JOBS = 2000
# Bounds a broken test, never a passing one's speed: the drains on PostgreSQL take 30 s on 2 quiet cores,
# three times that beside other tests on a loaded machine.
DRAIN_TIMEOUT = 240
KILLED = -signal.SIGKILL


@pytest.mark.parametrize("processes", [2, 4])
def test_worker_processes_draining_one_queue_run_every_job_exactly_once_and_no_attempt_twice(
        lab, open_store, processes):
    lab.prepare("q", dedupe="1d")
    # Half the processes run the queue with a sync handler (threads), half with an async one.
    kinds = ["sync", "async"] * (processes // 2)
    workers = [lab.worker(f"q:{kind}", serve=True) for kind in kinds]
    for w in workers:
        wait_for_line(w, "serving")

    store = open_store()
    q = store.queue("q")
    ids = [f"job-{i}" for i in range(JOBS)]
    for start in range(0, JOBS, 500):  # in a few commits, as an application would add them
        # Each run works 2 ms: no process can claim again the instant it committed, so all compete.
        q.add_many([tinystore.Job({"n": i, "work": 0.002}, id=ids[i]) for i in range(start, start + 500)])

    last = lab.watch_until_ended(q, ids, timeout=DRAIN_TIMEOUT)
    assert {(s.state, s.attempt) for s in last.values()} == {("done", 1)}

    for w in workers:
        w.send_signal(signal.SIGTERM)  # serve() stops gracefully
    for w in workers:
        assert wait_child(w) == 0, stderr_of(w)
        assert "stopped" in lines_of(w)

    starts, ends = lab.runs("start"), lab.runs("end")
    twice = [key for key, n in collections.Counter((r.id, r.attempt) for r in starts).items() if n > 1]
    assert not twice, f"{len(twice)} attempts ran twice, e.g. {twice[:5]}"
    assert len(starts) == len(ends) == JOBS, (len(starts), len(ends))  # no job run twice, none lost
    assert sorted(r.id for r in ends) == sorted(ids)
    assert {r.attempt for r in starts} == {1}
    per_process = collections.Counter(r.pid for r in starts)
    assert set(per_process) <= {w.pid for w in workers}
    assert len(per_process) >= 2, f"one process drained the whole queue, the others never took a job: {per_process}"
    lab.assert_sound(finished=[("q", id) for id in ids])
    lab.assert_consistent()
    assert lab.kit.leases(lab.target) == []


def test_worker_processes_killed_one_after_another_while_draining_lose_no_job_and_run_no_attempt_twice(
        lab, open_store):
    jobs = 1000
    # At most 4 run at once across the processes: the drain takes 5 s whatever the workers' slots, so that
    # the kills after job-200 and job-400 land while work is left, however late the watch hears of those.
    lab.prepare("q", dedupe="1d", concurrency=4)
    workers = [lab.worker(kind, serve=True) for kind in ("q:sync", "q:async")]
    for w in workers:
        wait_for_line(w, "serving")
    store = open_store()
    q = store.queue("q")
    ids = [f"job-{i}" for i in range(jobs)]
    q.add_many([tinystore.Job({"n": i, "work": 0.02}, id=ids[i]) for i in range(jobs)])

    held_at_kill = []
    for marker in ("job-200", "job-400"):
        lab.watch_until_ended(q, [marker], timeout=DRAIN_TIMEOUT)  # jobs start in order: the drain got this far
        # The worker holding the most leases now: the queue's four places may all be one process's.
        held = [len(lab.leases_of(lab.owner_of(w.pid))) for w in workers]
        n = held.index(max(held))
        held_at_kill.append(held[n])
        assert kill_child(workers[n]) == KILLED
        workers[n] = lab.worker("q:sync", serve=True)  # its open, or a worker's look, ends the dead one's leases
        wait_for_line(workers[n], "serving")  # registered: the next marker reads its leases too

    last = lab.watch_until_ended(q, ids, timeout=DRAIN_TIMEOUT)
    assert {s.state for s in last.values()} == {"done"}
    for w in workers:  # each said it was serving when it started
        w.send_signal(signal.SIGTERM)
    for w in workers:
        assert wait_child(w) == 0, stderr_of(w)

    lab.assert_sound(finished=[("q", id) for id in ids])  # none lost, no attempt run twice
    ends: dict[str, list[int]] = collections.defaultdict(list)
    for r in lab.runs("end"):
        ends[r.id].append(r.attempt)
    for id, state in last.items():  # the attempt that settled done is the last that reached its end
        assert max(ends[id]) == state.attempt, (id, ends[id], state)
    rerun = [id for id, state in last.items() if state.attempt > 1]
    assert sum(held_at_kill) > 0 and rerun, f"no kill caught a worker holding a lease: {held_at_kill}"
    lab.assert_consistent()
    assert lab.kit.leases(lab.target) == []
