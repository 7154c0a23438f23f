"""Priorities, pauses and batches amid steady traffic, one queue of concurrency=1 served by three processes.

A producer adds jobs of mixed priorities one after another, each in one of
several batches whose ``then`` job goes to a second queue; the test pauses and
resumes the first queue again and again while they arrive. The witness
(``traffic_child.py``: a line per run, outside the store) must show: never
two runs at once; nothing started from a second after a pause was kept until
its resume; the jobs that came during a pause start, once it is resumed, by
priority and then in the order added; every job ran once; every batch's
``then`` job ran once, its counts those of the batch.
"""

from __future__ import annotations

import threading
import time

from traffic_tools import Lab, Producer, overlapping, peak, settle, some, wait_until

KINDS = ["sync", "async", "sync"]
BATCHES = 12
PER_BATCH = 20
PAUSE = 2.0  # seconds each pause lasts
GRACE = 1.0  # a pause binds every process's claims within a second


def test_PAU_PRI_BAT_three_processes_pauses_and_batches_amid_traffic(lab: Lab) -> None:
    q = lab.store.queue("work", concurrency=1, lease="10m", dedupe="1h")
    after = lab.store.queue("after", lease="10m", dedupe="1h")  # done then jobs kept, and their batches
    workers = lab.start_workers("work", KINDS, workers=3)
    thens = lab.start_workers("after", ["sync"], workers=2)

    batches = [lab.store.batch(then=(after, {"ms": 1, "n": n})) for n in range(BATCHES)]
    jobs = []
    for n in range(BATCHES * PER_BATCH):
        priority = (n * 37) % 21 - 10
        jobs.append((f"j{n:03}", {"ms": 10}, {"priority": priority, "batch": batches[n % BATCHES]}))
    priorities = {id: options["priority"] for id, _, options in jobs}
    added_at: dict[str, float] = {}
    last_of_batch = {id: batches[n % BATCHES] for n, (id, _, _) in enumerate(jobs[-BATCHES:], len(jobs) - BATCHES)}

    def on_added(id: str) -> None:
        added_at[id] = time.time()
        if id in last_of_batch:
            last_of_batch[id].close()  # its last job is in: the batch can end

    pauses: list[tuple[float, float]] = []  # (kept, resumed): from pause() returning to resume() called
    producing = Producer(q, jobs, every=0.04, on_added=on_added)
    stop = threading.Event()

    def pause_now_and_then() -> None:
        while not stop.wait(0.5):
            q.pause()
            kept = time.time()
            stop.wait(PAUSE)
            resumed = time.time()
            q.resume()
            pauses.append((kept, resumed))

    pauser = threading.Thread(target=pause_now_and_then, daemon=True)
    pauser.start()
    ids = producing.join()
    stop.set()
    pauser.join(10)
    assert not q.paused
    ids = settle(q, producing)
    states = [lab.store.batch_state(b.id) for b in batches]
    wait_until("every batch's then job done",
               lambda: all((s := lab.store.batch_state(b.id)).then_id and after.get(s.then_id).state == "done"
                           for b in batches))
    lab.stop_workers(workers + thens)

    runs = lab.runs()
    work = [r for r in runs if r.id in priorities]
    assert sorted(r.id for r in work) == sorted(ids), "each job ran once, none lost"
    spans = [(r.id, r.started, r.ended) for r in work]
    assert peak([(s, e) for _, s, e in spans]) <= 1, f"two runs at once: {some(overlapping(spans, 1))}"

    assert len(pauses) >= 3, f"the traffic lasted for {len(pauses)} pauses only"
    waited = 0
    for kept, resumed in pauses:
        started = [r.id for r in work if kept + GRACE < r.started < resumed]
        assert not started, f"started while paused (kept at {kept}, resumed at {resumed}): {started}"
        # Added once the pause bound every claim, and before the resume: all due when the queue resumed.
        came = [id for id in ids if kept + GRACE < added_at[id] < resumed]
        order = [r.id for r in sorted(work, key=lambda r: r.started) if r.id in came]
        expected = sorted(came, key=lambda id: (-priorities[id], added_at[id]))
        assert order == expected, f"the jobs that came during a pause started out of priority order: {order}"
        waited += len(came)
    assert waited >= 40, f"only {waited} jobs came while the queue was paused"

    then_ids = {lab.store.batch_state(b.id).then_id for b in batches}
    then_runs = [r for r in runs if r.id in then_ids]
    assert len(then_ids) == BATCHES and sorted(r.id for r in then_runs) == sorted(then_ids), \
        f"each batch's then job ran exactly once: {then_runs}"
    assert len(after.jobs(limit=1000)) == BATCHES, "no batch added its then job twice"
    for b in batches:
        state = lab.store.batch_state(b.id)
        payload = after.get(state.then_id).payload
        assert payload["batch"] == {"id": b.id, "done": PER_BATCH, "failed": 0, "cancelled": 0}, payload
    assert all(s.closed for s in states)
