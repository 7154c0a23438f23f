"""The chapter's crash table, row by row, with real processes killed by SIGKILL.

Each test starts children that open the same store (``crash_child.py``),
waits until a child says it reached the moment of the row, kills it with
SIGKILL, and then checks what the next open, the next worker and the witness
(an append-only file every handler run writes to, outside the store) show.
The store runs on the real clock: a lease lasts its default 30 s (where a test
does not shorten it on purpose), so anything that ends one within a few seconds
of the kill is the dead-process recovery of DUR-03, not the lease running out.

A witness line "start" is a handler run's first act, "end" its last before it
answers; ``lab.assert_sound`` checks after each test that no attempt ran twice
and no job was lost.
"""

from __future__ import annotations

import signal
import time

import pytest

import tinystore
from helpers import kill_child, lines_of, wait_child, wait_for_line

LOST = "lease ended without a settlement"
KILLED = -signal.SIGKILL
# Seconds a look may take to end a dead process's leases, beyond the backend's grace (kit.liveness_grace: on
# PostgreSQL a process whose sessions ended may be connecting again for a few seconds); a lease lasts 30.
AT_ONCE = 10.0


def test_DUR_02_a_kill_in_the_middle_of_adding_promised_nothing_and_get_says_whether_each_job_exists(lab, open_store):
    lab.prepare("q", dedupe="1d")
    adder = lab.adder("q")  # adds job-0, job-1, ... until killed
    wait_for_line(adder, "added job-40")
    assert kill_child(adder) == KILLED  # lands while some add is on its way: the loop does nothing else

    added = [line.split()[1] for line in lines_of(adder) if line.startswith("added ")]
    last = len(added) - 1
    assert added == [f"job-{i}" for i in range(last + 1)]

    store = open_store()  # the file opens fine after the crash
    q = store.queue("q")
    for i, id in enumerate(added):  # DUR-01: every add that returned is kept
        job = q.get(id)
        assert job is not None, f"{id} was added (add returned) but is lost"
        assert (job.state, job.attempt, job.payload) == ("waiting", 0, {"n": i})
    # The add that was on its way when the kill came may or may not have committed (DUR-02): get says
    # which, and where it did, the job is whole. Nothing after it was ever asked for.
    in_flight = q.get(f"job-{last + 1}")
    if in_flight is not None:
        assert (in_flight.state, in_flight.attempt, in_flight.payload) == ("waiting", 0, {"n": last + 1})
    assert q.get(f"job-{last + 2}") is None
    lab.assert_consistent()
    assert q.add({"n": "after"}, id="after").added  # and takes new jobs

    existing = added + ([f"job-{last + 1}"] if in_flight is not None else []) + ["after"]
    worker = lab.worker("q:sync", until_idle=True)
    assert wait_child(worker) == 0
    assert sorted(r.id for r in lab.runs("end")) == sorted(existing)  # each exactly once
    assert all(q.get(id).state == "done" for id in existing)
    lab.assert_sound(finished=[("q", id) for id in existing])
    lab.assert_consistent()


def test_DUR_01_a_job_whose_add_returned_before_a_kill_waits_on_disk_and_runs_when_a_worker_comes(lab, open_store):
    lab.prepare("q", dedupe="1d")
    adder = lab.adder("q", count=5, then_block=True)
    wait_for_line(adder, "blocking")  # every add returned; the process has not closed the store
    assert kill_child(adder) == KILLED

    store = open_store()
    q = store.queue("q")
    ids = [f"job-{i}" for i in range(5)]
    assert [(q.get(id).state, q.get(id).attempt) for id in ids] == [("waiting", 0)] * 5
    assert lab.runs() == []  # no worker came yet

    worker = lab.worker("q:async", until_idle=True)
    assert wait_child(worker) == 0
    assert [(q.get(id).state, q.get(id).attempt) for id in ids] == [("done", 1)] * 5
    assert sorted((r.id, r.attempt, r.pid) for r in lab.runs("end")) == [(id, 1, worker.pid) for id in ids]
    lab.assert_sound(finished=[("q", id) for id in ids])
    lab.assert_consistent()


def test_DUR_03_the_next_open_ends_the_lease_of_a_process_killed_while_its_handler_runs_and_the_job_runs_again_from_the_top(
        lab, open_store):
    lab.prepare("q", [("job-1", {"block_on": [1]})], dedupe="1d")
    first = lab.worker("q:sync", serve=True)
    wait_for_line(first, "started job-1 1")  # the handler runs attempt 1, and blocks

    owner = lab.owner_of(first.pid)
    lease = [lease for lease in lab.kit.leases(lab.target) if lease.id == "job-1"]
    assert len(lease) == 1 and lease[0].attempt == 1 and lease[0].owner == owner
    assert lease[0].expires > time.time() + 20  # left alone, this lease would hold the job for ~30 s more
    assert kill_child(first) == KILLED
    killed = time.monotonic()
    # as the store holds it (no open since the kill, nothing recovered)
    assert [(r.state, r.attempt) for r in lab.kit.job_rows(lab.target) if r.id == "job-1"] == [("running", 1)]

    store = open_store(at_once=True)  # the next open, right after the kill, as a restart makes it
    lab.until_leases_ended(owner, killed, within=lab.kit.liveness_grace + AT_ONCE)  # by this open: nobody serves
    q = store.queue("q")
    job = q.get("job-1")
    assert (job.state, job.attempt) == ("waiting", 1)  # the lease ended at once, its attempt counted
    assert LOST in job.error
    assert lab.kit.leases(lab.target) == []
    lab.assert_consistent()

    second = lab.worker("q:sync", until_idle=True)
    assert wait_child(second) == 0
    job = q.get("job-1")
    assert (job.state, job.attempt) == ("done", 2)
    # From the top: attempt 2 began at the handler's first line; only attempt 2 reached the end.
    assert [(r.phase, r.attempt, r.pid) for r in lab.runs()] == [
        ("start", 1, first.pid), ("start", 2, second.pid), ("end", 2, second.pid)]
    lab.assert_sound(finished=[("q", "job-1")])
    lab.assert_consistent()


def test_DUR_03_a_worker_already_running_takes_a_dead_process_job_once_its_lease_runs_out(lab, open_store):
    # The chapter's walk-through: worker 1 dies, nothing renews its lease, so it runs out, and worker 2,
    # which was serving all along (no open after the death), claims the job for attempt 2.
    lab.prepare("q", [("job-1", {"block_on": [1]})], dedupe="1d", lease="1s")
    first = lab.worker("q:sync", serve=True)
    wait_for_line(first, "started job-1 1")
    second = lab.worker("q:async", serve=True)
    wait_for_line(second, "serving")
    store = open_store()  # opened while the first worker lives: this open ends no lease of it
    q = store.queue("q")
    assert (q.get("job-1").state, q.get("job-1").attempt) == ("running", 1)

    assert kill_child(first) == KILLED
    job = lab.watch_until_ended(q, ["job-1"], timeout=20)["job-1"]
    assert (job.state, job.attempt) == ("done", 2)
    assert [(r.phase, r.attempt, r.pid) for r in lab.runs()] == [
        ("start", 1, first.pid), ("start", 2, second.pid), ("end", 2, second.pid)]
    lab.assert_sound(finished=[("q", "job-1")])
    lab.assert_consistent()


def test_DUR_03_a_worker_killed_holding_three_leases_is_followed_by_a_drain_started_at_once_that_runs_them(lab):
    # As a supervisor restarts a worker: the one that died held three 30 s leases and every place of the
    # queue; the drain started at once runs the three jobs once their leases ended, at once (within the
    # grace on PostgreSQL), not when they would run out.
    ids = ["job-1", "job-2", "job-3"]
    lab.prepare("q", [(id, {"block_on": [1]}) for id in ids], dedupe="1d", concurrency=3)
    first = lab.worker("q:sync", serve=True)
    assert {wait_for_line(first, "started ").split()[1] for _ in ids} == set(ids)
    owner = lab.owner_of(first.pid)
    held = lab.leases_of(owner)
    assert len(held) == 3 and min(lease.expires for lease in held) > time.time() + 20
    assert kill_child(first) == KILLED
    killed = time.monotonic()

    drain = lab.worker("q:sync", until_idle=True)
    assert wait_child(drain, timeout=60) == 0
    took = time.monotonic() - killed
    assert took < lab.kit.liveness_grace + AT_ONCE, f"the drain ended {took:.1f}s after the kill"
    # The witness, per job: attempt 1 began in the process killed and never ended; attempt 2 ran whole in
    # the drain, which began after the kill: one run of each attempt, none beside another of its job.
    for id in ids:
        assert [(r.phase, r.attempt, r.pid) for r in lab.runs() if r.id == id] == [
            ("start", 1, first.pid), ("start", 2, drain.pid), ("end", 2, drain.pid)]
    assert len(lab.runs()) == 9
    with tinystore.open(lab.target) as store:
        assert {(s.state, s.attempt) for s in map(store.queue("q").get, ids)} == {("done", 2)}
    assert lab.kit.leases(lab.target) == []
    lab.assert_sound(finished=[("q", id) for id in ids])
    lab.assert_consistent()


def test_JOB_05_a_stalled_process_is_not_taken_for_dead_and_its_late_settlement_changes_nothing(lab, open_store):
    # SIGSTOP, not SIGKILL: the process is alive but stalled. Its lease runs out, another worker takes the
    # job and finishes it; when the stalled process wakes up, its attempt answers fail, too late.
    lab.prepare("q", [("job-1", {"wait_on": [1], "fail_on": [1]})], dedupe="1d", lease="1s")
    stalled = lab.worker("q:sync", serve=True)
    wait_for_line(stalled, "waiting job-1 1")
    lab.stall(stalled)
    try:
        store = open_store()  # the next open: a stopped process is alive, so its lease stays
        q = store.queue("q")
        job = q.get("job-1")
        assert (job.state, job.attempt, job.error) == ("running", 1, None)

        other = lab.worker("q:sync", serve=True)  # takes the job once the stalled lease runs out
        job = lab.watch_until_ended(q, ["job-1"], timeout=20)["job-1"]
        assert (job.state, job.attempt) == ("done", 2)
    finally:
        stalled.send_signal(signal.SIGCONT)
    stalled.stdin.write("go\n")
    stalled.stdin.flush()
    wait_for_line(stalled, "failing job-1 1")  # attempt 1 ends at last and answers run.fail(...)
    for worker in (stalled, other):
        worker.send_signal(signal.SIGTERM)  # a graceful stop settles what finished: the late answer too
    assert [wait_child(stalled), wait_child(other)] == [0, 0]
    job = q.get("job-1")
    assert (job.state, job.attempt, job.error) == ("done", 2, None)  # the late fail changed nothing
    assert sorted((r.attempt, r.pid) for r in lab.runs("end")) == [(1, stalled.pid), (2, other.pid)]
    lab.assert_sound(finished=[("q", "job-1")])
    lab.assert_consistent()


def test_JOB_03_a_kill_after_the_handler_did_its_work_and_before_the_settlement_runs_the_job_again(lab, open_store):
    # The moment: the handler writes its witness "end" (its work is done) and prints "handled", then
    # blocks forever instead of returning, so the settlement that would follow never comes. A SIGKILL
    # now is a crash after the handler's work and before settling.
    lab.prepare("q", [("job-1", {"hang_after_on": [1]})], dedupe="1d")
    first = lab.worker("q:async", serve=True)
    wait_for_line(first, "handled job-1 1")
    assert kill_child(first) == KILLED

    store = open_store()
    q = store.queue("q")
    job = q.get("job-1")
    assert (job.state, job.attempt) == ("waiting", 1)
    assert LOST in job.error

    second = lab.worker("q:async", until_idle=True)
    assert wait_child(second) == 0
    job = q.get("job-1")
    assert (job.state, job.attempt) == ("done", 2)
    # At least once, not exactly once: the work ran twice, once per attempt.
    assert [(r.attempt, r.pid) for r in lab.runs("end")] == [(1, first.pid), (2, second.pid)]
    lab.assert_sound(finished=[("q", "job-1")])
    lab.assert_consistent()


def test_DUR_03_when_the_whole_store_process_dies_the_next_open_ends_every_lease_it_held_at_once(lab, open_store):
    fast = [f"fast-{i}" for i in range(40)]
    slow = [f"slow-{i}" for i in range(10)]
    lab.prepare("fast", [(id, {"block_on": [1]}) for id in fast], dedupe="1d")
    # The sync queue's jobs are in groups, at most two running per group: the dead process's leases
    # must also give its groups their room back, or those groups would wait forever.
    lab.prepare("slow", [tinystore.Job({"block_on": [1]}, id=id, group=f"g{i % 5}") for i, id in enumerate(slow)],
                dedupe="1d", group_concurrency=2)
    lab.prepare("other", [("other-0", {"block_on": [1]})], dedupe="1d")

    alive = lab.worker("other:sync", serve=True)  # another process, alive, holding a lease throughout
    wait_for_line(alive, "started other-0 1")
    doomed = lab.worker("fast:async", "slow:sync", serve=True)
    started = {wait_for_line(doomed, "started ").split()[1] for _ in fast + slow}
    assert started == set(fast + slow)

    owner = lab.owner_of(doomed.pid)
    held = lab.leases_of(owner)
    assert len(held) == 50 and min(lease.expires for lease in held) > time.time() + 20
    assert kill_child(doomed) == KILLED
    killed = time.monotonic()

    store = open_store(at_once=True)  # the next open, right after the kill
    lab.until_leases_ended(owner, killed, within=lab.kit.liveness_grace + AT_ONCE)
    queues = {"fast": store.queue("fast"), "slow": store.queue("slow"), "other": store.queue("other")}
    states = {id: queues[id.split("-")[0]].get(id) for id in fast + slow}
    assert {(s.state, s.attempt) for s in states.values()} == {("waiting", 1)}
    assert all(LOST in s.error for s in states.values())
    assert lab.leases_of(owner) == []
    assert [p for p in lab.kit.registered_processes(lab.target) if p.id == owner] == []
    # The live process is not taken for a dead one: its job still runs under its lease.
    other = queues["other"].get("other-0")
    assert (other.state, other.attempt) == ("running", 1)
    lab.assert_consistent()

    after = lab.worker("fast:async", "slow:sync", until_idle=True)
    assert wait_child(after) == 0
    assert {(s.state, s.attempt) for s in (queues[id.split("-")[0]].get(id) for id in fast + slow)} == {("done", 2)}
    for id in fast + slow:
        assert [(r.phase, r.attempt, r.pid) for r in lab.runs() if r.id == id] == [
            ("start", 1, doomed.pid), ("start", 2, after.pid), ("end", 2, after.pid)]
    lab.assert_sound(finished=[(id.split("-")[0], id) for id in fast + slow])
    lab.assert_consistent()
    assert alive.poll() is None and queues["other"].get("other-0").state == "running"


def test_DUR_03_a_live_process_that_opened_the_store_through_a_symlink_is_not_taken_for_dead(
        lab, open_store, tmp_path):
    if lab.kit.name != "sqlite":
        pytest.skip("a second name of the store by a symbolic link is a SQLite store file's")
    # The same file under two names: a worker opens it through a symbolic link, the next open uses
    # the file's own name. SQLite sees one database; the worker must be seen alive by both names.
    link = tmp_path / "link-to-store.db"
    link.symlink_to(lab.target)
    lab.prepare("q", [("job-1", {"block_on": [1]})], dedupe="1d")
    worker = lab.worker("q:sync", serve=True, target=str(link))
    wait_for_line(worker, "started job-1 1")

    store = open_store()  # the next open, by the file's own name
    job = store.queue("q").get("job-1")
    assert (job.state, job.attempt, job.error) == ("running", 1, None), "a live process's lease was ended"
    assert worker.poll() is None
    lab.assert_consistent()


def test_JOB_04_a_handler_that_kills_its_process_every_run_reaches_attempts_and_fails_for_good(lab, open_store):
    lab.prepare("q", [("job-1", {"kill_on": list(range(1, 20))})], attempts=3)
    exits = []
    while len(exits) < 6:  # restart the worker as a supervisor would, until one survives
        worker = lab.worker("q:sync", until_idle=True)
        exits.append(wait_child(worker))
        if exits[-1] != KILLED:
            break  # each started right after the last one died: its drain waits for that one's leases to end
    # Attempts 1..3 each took a worker down; the fourth worker's open ended the last lease, found the
    # attempts used up, failed the job for good, and the worker went on with nothing to do.
    assert exits == [KILLED, KILLED, KILLED, 0]
    assert "idle" in lines_of(worker)

    store = open_store()
    job = store.queue("q").get("job-1")
    assert (job.state, job.attempt, job.attempts) == ("failed", 3, 3)
    assert LOST in job.error
    runs = lab.runs()
    assert [(r.phase, r.attempt) for r in runs] == [("start", 1), ("start", 2), ("start", 3)]
    assert len({r.pid for r in runs}) == 3
    lab.assert_sound()
    lab.assert_consistent()


def test_JOB_04_a_job_that_failed_for_good_because_its_workers_kept_dying_counts_in_the_last_minutes_failures(
        lab, open_store):
    lab.prepare("q", [("job-1", {"kill_on": list(range(1, 20))})], attempts=2)
    exits = []
    while len(exits) < 5:  # restart the worker as a supervisor would, until one survives
        worker = lab.worker("q:sync", until_idle=True)
        exits.append(wait_child(worker))
        if exits[-1] != KILLED:
            break  # each started right after the last one died: its drain waits for that one's leases to end
    assert exits == [KILLED, KILLED, 0]  # the third worker's open failed the job for good

    stats = open_store().stats()["q"]
    assert stats["failed"] == 1
    assert stats["failed_last_minute"] == 1, "a job whose workers kept dying failed, and counts as a failure"
    assert (stats["started_last_minute"], stats["done_last_minute"]) == (2, 0)
    lab.assert_sound()
    lab.assert_consistent()
