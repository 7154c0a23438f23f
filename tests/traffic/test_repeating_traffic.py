"""Repeating jobs under traffic: three worker processes on the real clock, fifty jobs repeating every
second or two among one-off jobs, handlers of realistic lengths (some longer than their period), one
worker killed with SIGKILL on the way and replaced (SPEC §8).

A witness file outside the store (O_APPEND, a line per write) records each
run's begin (job, run.at, attempt, pid, time) and end. At the end the
invariants: no repeating job ever ran twice at once; each first attempt is
of a time of its rule, later than the run before (a run the kill cut short
runs again at once as its next attempt); while the workers were up no time
of a fast job was skipped; the jobs still repeat, none failed, none lost.
"""

from __future__ import annotations

import collections
import math
import signal
import subprocess
import time
from pathlib import Path

import tinystore
from helpers import kill_child, start_child, wait_child, wait_for_line

CHILD = """
import os, sys, time
import tinystore

store_path, witness_path = sys.argv[1:3]
store = tinystore.open(store_path)
out = os.open(witness_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

def handler(payload, run):
    os.write(out, f"begin {run.id} {run.at.timestamp():.3f} {run.attempt} {os.getpid()} {time.time():.6f}\\n".encode())
    time.sleep(payload["ms"] / 1000)  # the work
    os.write(out, f"end {run.id} {run.at.timestamp():.3f} {run.attempt} {time.time():.6f}\\n".encode())

store.queue("ticks").work(handler)
store.queue("orders").work(handler)
print("serving", flush=True)
store.serve(workers=8)
print("stopped", flush=True)
"""

Begin = collections.namedtuple("Begin", "id at attempt pid t")


def read_witness(path: Path) -> tuple[list[Begin], dict[tuple[str, float, int], float]]:
    """The begins in order, and the end of each run by (job, its time, attempt)."""
    begins, ends = [], {}
    for line in path.read_text().splitlines():
        word, *rest = line.split()
        if word == "begin":
            id, at, attempt, pid, t = rest
            begins.append(Begin(id, float(at), int(attempt), int(pid), float(t)))
        else:
            id, at, attempt, t = rest
            ends[(id, float(at), int(attempt))] = float(t)
    return begins, ends


def test_SPEC_8_repeating_jobs_among_traffic_with_a_worker_killed_never_overlap_skip_or_get_lost(
        tmp_path: Path, child_env: dict) -> None:
    store_path, witness = str(tmp_path / "app.db"), tmp_path / "witness"
    fast = {f"tick:{n}": (1, 50 + 7 * n) for n in range(40)}  # every 1 s, 50-330 ms of work
    slow = {f"slow:{n}": (2, 2_300) for n in range(10)}  # every 2 s, 2.3 s of work: longer than its period
    with tinystore.open(store_path) as store:
        ticks = store.queue("ticks", lease="3s", timeout="10s")
        store.queue("orders", lease="3s")
        start = math.ceil(time.time() / 2) * 2 + 2  # a time of every rule here
        ticks.add_many([tinystore.Job({"ms": ms}, id=id, repeat=tinystore.every(f"{every}s"), at=start)
                        for id, (every, ms) in {**fast, **slow}.items()])

    def worker() -> subprocess.Popen:
        proc = start_child(CHILD, store_path, str(witness), env=child_env)
        wait_for_line(proc, "serving")
        return proc

    workers = [worker() for _ in range(3)]
    with tinystore.open(store_path) as store:
        orders = store.queue("orders")
        began = time.time()
        killed_at = None
        n = 0
        while time.time() - began < 14:
            orders.add_many([tinystore.Job({"ms": 5}) for _ in range(20)])  # one-off traffic beside them
            n += 20
            if killed_at is None and time.time() - began > 5:
                victim = workers.pop(0)
                assert kill_child(victim) == -signal.SIGKILL
                killed_at = time.time()
                workers.append(worker())
            time.sleep(0.05)  # the pace of the traffic, not a synchronisation
        stopped_adding = time.time()
        for proc in workers:
            proc.send_signal(signal.SIGTERM)
        assert [wait_child(proc, timeout=30) for proc in workers] == [0, 0, 0]

        begins, ends = read_witness(witness)
        by_job: dict[str, list[Begin]] = collections.defaultdict(list)
        for b in begins:
            if b.id in fast or b.id in slow:
                by_job[b.id].append(b)
        assert set(by_job) == set(fast) | set(slow), "every repeating job ran"
        cut = []  # runs the kill cut short: no end
        for id, runs in by_job.items():
            period = (fast.get(id) or slow[id])[0]
            for before, after in zip(runs, runs[1:]):
                end = ends.get((before.id, before.at, before.attempt))
                if end is None or (before.pid == victim.pid and after.attempt == before.attempt + 1):
                    cut.append(before)  # the kill cut it short, or came before its settlement was written
                    assert before.pid == victim.pid, f"{id}: a run with no end in a live worker"
                    # its next attempt runs at once (at the time its lease ended), before the next time
                    assert after.attempt == before.attempt + 1 and after.at >= before.at, f"{id}: the cut run again"
                    continue
                assert after.t >= end, f"{id} ran twice at once: {before} and {after}"
                assert after.at > before.at and after.attempt == 1, f"{id}: a time ran twice: {before}, {after}"
            last = runs[-1]
            if last.pid == victim.pid and ends.get((last.id, last.at, last.attempt)) is None:
                cut.append(last)  # the kill cut its last run, and the stop came before its lease's end ran it again
            for run in (r for r in runs if r.attempt == 1):
                assert round(run.at) == run.at and round(run.at) % period == 0, f"{id}: {run.at} is not its time"
            # While workers ran, no time of a fast job was skipped: one run per second, allowing the
            # seconds of the kill (its lease ends at the next liveness look, within 2 s), and the times
            # a run spanned because it began late (a loaded machine): the next is the first after its end.
            if id in fast:
                firsts = sorted({r.at for r in runs})
                gaps = [b - a for a, b in zip(firsts, firsts[1:])]
                near_kill = [g for a, g in zip(firsts, gaps) if g > 1 and abs(a - killed_at) < 4]
                last_end = {at: max(t for (i, a, _), t in ends.items() if i == id and a == at)
                            for at in firsts if any(i == id and a == at for (i, a, _) in ends)}
                assert all(g == 1 or (a in last_end and a + g - 1 < last_end[a] + 0.5)
                           for a, g in zip(firsts, gaps) if abs(a - killed_at) >= 4), (id, gaps, last_end)
                assert all(g <= 4 for g in near_kill), (id, gaps)
            else:  # a run longer than the period skips the times it spans: the next is the first time after it
                for a, b in zip(runs, runs[1:]):
                    end = ends.get((a.id, a.at, a.attempt))
                    if end is not None:
                        assert end < b.at <= end + period + 0.5, (id, a, end, b)

        jobs = {j.id: j for j in store.queue("ticks").jobs(limit=100)}
        assert set(jobs) == set(fast) | set(slow)
        wrong = [j for j in jobs.values() if not any(c.id == j.id for c in cut)
                 and not (j.repeat is not None and j.state in ("scheduled", "waiting") and j.error is None)]
        assert not wrong, [(j, by_job[j.id][-1], ends.get((j.id, by_job[j.id][-1].at, by_job[j.id][-1].attempt)))
                           for j in wrong]
        assert all(j.at.timestamp() >= stopped_adding - 4 for j in jobs.values())  # no time left behind
        stats = store.stats()
        assert stats["ticks"]["failed"] == 0 and stats["ticks"]["repeating"] == 50
        assert stats["orders"]["waiting"] + stats["orders"]["running"] <= n
