"""Priorities under traffic: one queue of concurrency=1 served by three worker processes.

While a gate job holds the queue's one place, jobs of mixed priorities are
added; once the gate opens, more jobs of the lowest priority keep arriving.
The witness (``traffic_child.py``: a line per run's begin and end, outside the
store) must show the mixed jobs start strictly by priority, then in the order
added, before any of the later lowest ones, with never two runs at once.
"""

from __future__ import annotations

from traffic_tools import Lab, Producer, overlapping, peak, settle, some, wait_until

KINDS = ["sync", "async", "sync"]


def test_JOB_01_PRI_01_with_concurrency_1_three_processes_start_jobs_by_priority_amid_arrivals(lab: Lab) -> None:
    q = lab.store.queue("ranked", concurrency=1, lease="10m", dedupe="1h")
    gate = lab.gate()
    procs = lab.start_workers("ranked", KINDS, workers=3)
    q.add({"gate": gate}, id="gate", priority=100)
    lab.wait_runs("the gate job starting", lambda rs: any(r.id == "gate" for r in rs))
    mixed = [(f"m{n:02}", {"ms": 5}, {"priority": (n * 37) % 21 - 10}) for n in range(24)]
    for id, payload, options in mixed:
        q.add(payload, id=id, **options)
    lab.open_gates()
    later = Producer(q, [(f"low{n:02}", {"ms": 5}, {"priority": -100}) for n in range(15)], every=0.01)
    ids = settle(q, later) + [id for id, _, _ in mixed] + ["gate"]
    wait_until("every job done", lambda: all(q.get(id).state == "done" for id in ids))
    lab.stop_workers(procs)

    runs = sorted(lab.runs(), key=lambda r: r.started)
    assert sorted(r.id for r in runs) == sorted(ids), "each job ran once, none lost"
    spans = [(r.id, r.started, r.ended) for r in runs]
    assert peak([(s, e) for _, s, e in spans]) <= 1, f"two runs at once: {some(overlapping(spans, 1))}"
    started = [r.id for r in runs]
    expected = [id for id, _, _ in sorted(mixed, key=lambda m: -m[2]["priority"])]  # stable: added order kept
    assert started[0] == "gate" and started[1:1 + len(mixed)] == expected, started
