"""JOB-13 under traffic: watchers in this process, workers in other processes, jobs that move fast.

The workers are ``traffic_child.py`` processes; this process adds the jobs
and watches them, so every change a watcher sees was made by another
process. The contract, sharpened: however fast a job moves, a watcher sees
every attempt's ``running`` state and the final state; only progress updates
and ``ahead`` counts may be coalesced.

A watch yields the job as it is, then each change. So the attempts a watcher
must see running are those claimed after it began: every attempt after the
one counted in the first state it yielded (and that one too where the first
state is ``running``). The tests start each watch before its job can run,
so in practice that is every attempt; the invariant they assert holds
whatever the moment the watch began.
"""

from __future__ import annotations

from traffic_tools import WAIT, Follower, Lab, Producer, settle, some

import tinystore


def missed_runs(seen: list[tinystore.JobState], attempts: int) -> list[int]:
    """The attempts, of 1..attempts, claimed after the watch began that it never saw running."""
    first = seen[0]
    due = range(first.attempt + 1 if first.state != "running" else first.attempt, attempts + 1)
    saw = {s.attempt for s in seen if s.state == "running"}
    return [a for a in due if a not in saw]


def watch_back_to_back(lab: Lab, jobs: list[tuple[str, dict]], kinds: list[str]) -> dict[str, Follower]:
    """Serve queue "w" in worker processes of these kinds; add the jobs one every 30 ms, each due 300 ms after
    its add, and start watching each right after its add returned (while it is still scheduled)."""
    q = lab.store.queue("w", attempts=5, backoff=("100ms", "100ms"))
    procs = lab.start_workers("w", kinds, workers=4)
    followers: dict[str, Follower] = {}

    def watch(id: str) -> None:
        followers[id] = Follower(q, id)

    producer = Producer(q, [(id, payload, {"delay": "300ms"}) for id, payload in jobs], every=0.03, on_added=watch)
    ids = settle(q, producer)
    for id in ids:
        followers[id].wait_ended(WAIT)
    lab.stop_workers(procs)
    return followers


def check_watchers(followers: dict[str, Follower], attempts: dict[str, int]) -> None:
    """Each watcher saw running for every attempt claimed after it began, and ended on done after the last."""
    missed = {id: missed_runs(f.seen, attempts[id]) for id, f in followers.items()}
    missed = {id: m for id, m in missed.items() if m}
    assert not missed, f"{len(missed)} of {len(followers)} watchers missed attempts' running states: " + "; ".join(
        f"{id} missed running of attempt(s) {m}, it saw {followers[id].summary()}" for id, m in some(missed).items())
    wrong_end = {id: f.summary() for id, f in followers.items()
                 if (f.seen[-1].state, f.seen[-1].attempt) != ("done", attempts[id])}
    assert not wrong_end, f"watchers that did not end on done after the last attempt: {some(wrong_end)}"
    ended_early = {id: f.summary() for id, f in followers.items()
                   if any(s.state in ("done", "failed", "cancelled") for s in f.seen[:-1])}
    assert not ended_early, f"watchers that saw an end state before the last: {some(ended_early)}"


def test_JOB_13_watchers_in_another_process_see_running_for_attempts_1_2_and_3_of_instant_jobs_then_done(
        lab: Lab) -> None:
    # Instant handlers that raise on attempts 1 and 2 and are done on attempt 3: each attempt runs for
    # well under a millisecond, and its running state must still reach the watcher.
    jobs = [(f"x{i:02}", {"fail": 2}) for i in range(12)]
    followers = watch_back_to_back(lab, jobs, ["sync"])
    got = {}
    for r in lab.runs():
        got.setdefault(r.id, []).append((r.attempt, r.outcome))
    expected_runs = [(1, "raised"), (2, "raised"), (3, "returned")]
    assert all(got[id] == expected_runs for id, _ in jobs), f"the handlers did not run as planned: {got}"
    check_watchers(followers, {id: 3 for id, _ in jobs})


def test_JOB_13_watchers_of_many_jobs_added_back_to_back_each_see_every_attempts_running_and_the_final_state(
        lab: Lab) -> None:
    jobs, attempts = [], {}
    for i in range(30):
        fails = i % 3  # done on attempt 1, 2 or 3; every fourth job reports progress three times per run
        jobs.append((f"j{i:02}", {"fail": fails, "progress": 3 if i % 4 == 0 else 0}))
        attempts[f"j{i:02}"] = fails + 1
    followers = watch_back_to_back(lab, jobs, ["sync", "async"])
    check_watchers(followers, attempts)
