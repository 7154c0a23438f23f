"""The jobs per queue and state the store keeps for ``stats()`` stay true under traffic and SIGKILLs.

Two worker processes serve a queue while the test adds jobs back to back for
a few seconds: plain ones of realistic lengths, grouped ones, ones due a
little later, ones that fail for good, ones that SIGKILL their process on
their first attempt (the dead worker is replaced; its leases end and the
jobs run again), and the test cancels waiting jobs and retries failed ones
as it goes. After every batch, the counts the store keeps are compared with
a count of its job rows in one snapshot of the store; at the end,
``stats()`` with a count of every job, and the witness says no job was lost and no attempt ran
twice (but those of the jobs retried from failed, whose attempts begin again).
"""

from __future__ import annotations

import collections
import signal
import time

import tinystore
from helpers import lines_of, stderr_of, wait_child, wait_for_line

SECONDS = 6


def test_SPEC_10_kept_counts_agree_with_the_jobs_after_every_batch_of_traffic_with_workers_killed(lab, open_store):
    lab.prepare("mix", dedupe="1h", keep="1h", attempts=3, lease="2s", group_concurrency=2)
    kinds = iter(["mix:sync", "mix:async"] * 50)

    def worker():
        proc = lab.worker(next(kinds), serve=True)
        wait_for_line(proc, "serving")
        return proc

    workers = [worker(), worker()]
    store = open_store()
    q = store.queue("mix")
    ids, cancelled, retried, kills, drift = [], set(), set(), 0, []
    began, n = time.time(), 0
    while time.time() - began < SECONDS:
        batch = []
        for _ in range(30):
            n += 1
            payload, options = {"work": 0.002 + (n * 37 % 30) / 1000}, {}
            if n % 7 == 0:
                options["group"] = f"user-{n % 5}"
            if n % 11 == 0:
                options["delay"] = f"{n % 3 * 500 + 300}ms"
            if n % 13 == 0:
                payload["fail_on"] = [1]
            if n % 97 == 0 and kills < 3:
                payload["kill_on"], kills = [1], kills + 1
            batch.append(tinystore.Job(payload, id=f"job-{n}", **options))
        q.add_many(batch)
        ids += [job.id for job in batch]
        for job in q.jobs(state="waiting", limit=2, after=f"job-{n - 20}"):
            if q.cancel(job.id):
                cancelled.add(job.id)
        for job in q.jobs(state="failed", limit=1):
            if q.retry(job.id):  # its attempts from zero: it runs attempt 1 again
                retried.add(job.id)
        found = lab.kit.inconsistencies(lab.target)["state counts off the jobs"]
        if found:
            drift.append(found)
        for i, proc in enumerate(workers):
            if proc.poll() is not None:  # killed by its own job: replaced, as a supervisor would
                assert proc.returncode == -signal.SIGKILL, stderr_of(proc)
                workers[i] = worker()
        time.sleep(0.05)  # the pace of the traffic, not a synchronisation
    assert not drift, f"kept counts differed from the jobs in {len(drift)} snapshots, first: {drift[0]}"

    live = [id for id in ids if id not in cancelled]
    last = lab.watch_until_ended(q, live, timeout=90)
    assert {s.state for s in last.values()} <= {"done", "failed"}
    for proc in workers:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in workers:
        if proc.returncode != -signal.SIGKILL:
            assert wait_child(proc) == 0, stderr_of(proc)
            assert "stopped" in lines_of(proc)

    stats, counted = store.stats()["mix"], lab.kit.counted_by_scan(lab.target, store.clock.now())["mix"]
    assert {k: stats[k] for k in counted if k != "oldest_due"} == {k: v for k, v in counted.items() if k != "oldest_due"}
    assert stats["oldest_due_age"] is None and counted["oldest_due"] is None  # nothing left due
    assert stats["done"] + stats["failed"] == len(live)
    assert stats["failed"] >= 1 and stats["done"] >= 1
    starts = collections.Counter((r.id, r.attempt) for r in lab.runs("start"))
    twice = [key for key, times in starts.items() if times > 1 and key[0] not in retried]
    assert not twice, f"attempts that ran twice: {twice}"
    ended = {r.id for r in lab.runs("end")}
    assert not [id for id in live if last[id].state == "done" and id not in ended], "done jobs that never ran"
    lab.assert_consistent()
