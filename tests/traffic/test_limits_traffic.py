"""LIM-01, LIM-02 and LIM-03 under traffic: limits across worker processes while jobs arrive back to back.

Three worker processes (``traffic_child.py``, some with ``def`` handlers,
some with ``async def`` ones) serve one queue of a store file while this
process adds jobs one after another. Every run appends to a witness, a file
of its own: job, group, process, attempt, begin and end (and, for the rate,
its claim time, read from its lease). Once every job settled and the workers stopped,
the tests check the bounds on the witness:

- no more handlers run at once than ``concurrency`` (per group:
  ``group_concurrency``): a handler runs inside its lease, so handler
  intervals overlap at most as much as the leases that the limit bounds;
- no sliding window of the rate's period holds more claims than the rate;
- every job ran, as often as its answers call for, and no job was lost.

The traffic is faster than the limits allow, so the limits are pressed; the
tests assert bounds, never how fast the jobs went.
"""

from __future__ import annotations

import collections
from typing import Optional

from traffic_tools import Lab, Producer, Run, busiest_window, failed_jobs, overlapping, peak, settle, some, wait_until

KINDS = ["sync", "async", "sync"]  # one process of each kind at least: the limits hold across both


def intervals(runs: list[Run]) -> list[tuple[str, float, float]]:
    return [(f"{r.id}#{r.attempt}@{r.pid}", r.started, r.ended) for r in runs]


def ran_once_each(lab: Lab, ids: list[str]) -> list[Run]:
    """Each job ran exactly once, to its end, and is done; nothing else ran."""
    runs = lab.runs()
    count = collections.Counter(r.id for r in runs)
    assert sorted(count) == sorted(ids) and set(count.values()) == {1}, (
        f"not every job ran exactly once: lost {some(sorted(set(ids) - set(count)))}, "
        f"twice {some([id for id, n in count.items() if n > 1])}, unknown {some(sorted(set(count) - set(ids)))}")
    unfinished = [r for r in runs if r.ended is None or r.outcome != "returned"]
    assert not unfinished, f"runs that did not end as done: {some(unfinished)}"
    return runs


def test_LIM_01_concurrency_bounds_the_running_jobs_across_three_processes_while_jobs_arrive_back_to_back(
        lab: Lab) -> None:
    q = lab.store.queue("reports", concurrency=3, lease="10m", dedupe="1h")
    procs = lab.start_workers("reports", KINDS, workers=3)  # 9 slots across the processes, 3 allowed
    # Jobs of 100-250 ms, one every 30 ms: about 6 would run at once without the limit.
    producer = Producer(q, [(f"j{i:02}", {"ms": 100 + i * 53 % 150}) for i in range(30)], every=0.03)
    ids = settle(q, producer)
    lab.stop_workers(procs)
    assert failed_jobs(q, ids) == {}
    runs = ran_once_each(lab, ids)
    spans = intervals(runs)
    assert peak([(s, e) for _, s, e in spans]) <= 3, (
        f"more than concurrency=3 handlers ran at once: {some(overlapping(spans, 3))}")


def test_LIM_02_group_concurrency_holds_per_group_under_traffic_and_a_full_group_does_not_hold_up_the_others(
        lab: Lab) -> None:
    q = lab.store.queue("orders", group_concurrency=2, lease="10m", dedupe="1h")
    gate = lab.gate()
    procs = lab.start_workers("orders", KINDS, workers=3)
    # The hot group is full: its first two jobs run until the test opens the gate.
    q.add({"gate": gate}, id="hot:00", group="hot")
    q.add({"gate": gate}, id="hot:01", group="hot")
    lab.wait_runs("the hot group's first two jobs starting",
                  lambda rs: {"hot:00", "hot:01"} <= {r.id for r in rs})
    jobs: list[tuple] = []
    for i in range(40):  # customers' orders arrive interleaved, with more for the hot group among them
        jobs.append((f"g{i % 4}:{i:02}", {"ms": 50 + i * 37 % 100}, {"group": f"g{i % 4}"}))
        if i % 4 == 0:
            jobs.append((f"hot:{2 + i // 4:02}", {"ms": 20}, {"group": "hot"}))
    hot = ["hot:00", "hot:01"] + [id for id, _, _ in jobs if id.startswith("hot")]
    others = [id for id, _, _ in jobs if not id.startswith("hot")]
    producer = Producer(q, jobs, every=0.025)
    producer.join()

    def not_done() -> list[str]:
        return [id for id in others if (q.get(id) is None or q.get(id).state != "done")]
    wait_until("every other group's jobs being done while the hot group is full", lambda: not not_done(),
               describe=lambda: f"not done: {some(not_done())}; {lab.store.stats()['orders']}")
    held = sorted(j.id for j in q.jobs(state="running", group="hot"))
    assert held == ["hot:00", "hot:01"], f"the hot group should run its first two jobs only: {held}"
    ran_early = sorted({r.id for r in lab.runs()} & set(hot[2:]))
    assert not ran_early, f"jobs of the full hot group ran while it was full: {ran_early}"
    lab.open_gates()
    ids = settle(q, producer) + ["hot:00", "hot:01"]
    lab.stop_workers(procs)

    assert failed_jobs(q, ids) == {}
    runs = ran_once_each(lab, ids)
    per_group: dict[Optional[str], list[Run]] = collections.defaultdict(list)
    for r in runs:
        per_group[r.grp].append(r)
    for group, group_runs in per_group.items():
        spans = intervals(group_runs)
        assert peak([(s, e) for _, s, e in spans]) <= 2, (
            f"more than group_concurrency=2 jobs of {group} ran at once: {some(overlapping(spans, 2))}")
    first_hot_end = min(r.ended for r in per_group["hot"] if r.id in ("hot:00", "hot:01"))
    late = [r for r in runs if r.grp != "hot" and r.ended > first_hot_end]
    assert not late, f"jobs of other groups ended only after the full hot group had room again: {some(late)}"


def test_LIM_03_rate_bounds_the_starts_in_every_sliding_window_across_processes_retries_and_snoozes_included(
        lab: Lab) -> None:
    q = lab.store.queue("geocode", rate=(4, "500ms"), lease="10m", attempts=3, backoff=("100ms", "100ms"),
                        dedupe="1h")
    procs = lab.start_workers("geocode", KINDS, workers=3)
    jobs, expected = [], {}
    for i in range(16):  # 20 per second arrive, 8 per second may start
        payload, runs = {"ms": 30, "claim": True}, [(1, "returned")]  # each run notes its claim time
        if i % 5 == 2:
            payload, runs = {**payload, "fail": 1}, [(1, "raised"), (2, "returned")]
        elif i % 5 == 4:
            payload, runs = {**payload, "snooze": 1}, [(1, "snooze"), (1, "returned")]
        jobs.append((f"j{i:02}", payload))
        expected[f"j{i:02}"] = runs
    producer = Producer(q, jobs, every=0.05)
    ids = settle(q, producer)
    lab.stop_workers(procs)

    assert failed_jobs(q, ids) == {}
    runs = lab.runs()
    got = collections.defaultdict(list)
    for r in runs:
        got[r.id].append((r.attempt, r.outcome))
    wrong = {id: got.get(id) for id in ids if got.get(id) != expected[id]}
    assert not wrong, f"jobs whose runs were not those promised (attempt, outcome): {some(wrong)}"
    assert all(r.claimed is not None and r.claimed <= r.started for r in runs), some(runs)
    claims = [r.claimed for r in runs]
    assert busiest_window(claims, 0.5) <= 4, (
        f"{busiest_window(claims, 0.5)} claims (retries and snoozed runs included) in one 500 ms window; "
        f"rate=(4, 500ms)")
    # The limit is enforced on claims; a handler begins a little after its claim (its lag). Where every lag
    # is at most D, the begins in any window [t, t + P - D) were claimed in [t - D, t + P - D), a window of
    # the period P: so windows of P - D hold at most the rate's count of begins. That is the slack for the
    # claim-to-begin lag, measured here rather than guessed.
    lag = max(r.started - r.claimed for r in runs)
    assert lag < 0.5, f"a handler began {lag:.3f}s after its claim"
    begins = [r.started for r in runs]
    assert busiest_window(begins, 0.5 - lag) <= 4, (
        f"{busiest_window(begins, 0.5 - lag)} handlers began within {0.5 - lag:.3f}s (the period less the "
        f"largest claim-to-begin lag, {lag:.3f}s); rate=(4, 500ms)")
