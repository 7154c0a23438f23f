"""One worker's sessions ended while its handler runs, again and again: no other process takes it for dead.

Two worker processes serve a queue of ``concurrency=1`` whose handlers take
1.5 s; each handler writes its start and end to a witness table on a
connection of its own, which nothing ends. Every ~0.4 s the test ends every
session of the worker that is inside a handler (its keeper's, its writer's,
its readers'), as a network blip or a failover would for that machine alone,
for some 40 s. The other worker looks for dead processes often (every 0.2 s),
so that a moment while the cut worker connects again is met often. At the
end: no two handler runs overlap, by the witness's own clock; every job ran
to its end and is done.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

WORKER = r"""
import logging, sys, time
import psycopg
import tinystore
import tinystore._worker

tinystore._worker.LIVENESS_EVERY = 0.2  # looks for dead processes often (see the module's docstring)
logging.basicConfig(level=logging.INFO, format="%(created).3f %(name)s %(message)s")

url, schema, name = sys.argv[1:4]
join = "&" if "?" in url else "?"
store = tinystore.open(f"{url}{join}application_name={name}", schema=schema)
witness = psycopg.connect(f"{url}{join}application_name=witness", autocommit=True)
q = store.queue("cut", concurrency=1, lease="10s", backoff=("100ms", "100ms"))

def note(event, run):
    witness.execute(f'INSERT INTO "{schema}".witness (job, attempt, worker, event, at)'
                    " VALUES (%s, %s, %s, %s, clock_timestamp())", (run.id, run.attempt, name, event))

@q.work
def handle(payload, run):
    note("start", run)
    ends = time.monotonic() + 1.5
    while time.monotonic() < ends and not run.cancelled:  # a handler taken away stops at once
        time.sleep(0.01)
    note("end", run)

print("serving", store._ctx.owner, flush=True)
store.serve()
"""

JOBS = 26
CUT_EVERY = 0.4


def test_LIM_01_a_worker_whose_every_session_is_ended_while_its_handler_runs_is_not_taken_for_dead(
        pg, child_env: dict, wait_for) -> None:
    store = pg.open()
    pg.rows("CREATE TABLE {s}.witness (job text, attempt int, worker text, event text, at timestamptz)")
    q = store.queue("cut", concurrency=1, lease="10s", backoff=("100ms", "100ms"))
    ids = [state.id for state in q.add_many([{"n": n} for n in range(JOBS)])]
    names = ["wa", "wb"]
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, pg.url, pg.schema, name], env=child_env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for name in names]
    owners = {}
    cuts = 0
    try:
        for name, w in zip(names, workers):
            line = w.stdout.readline()
            assert line.startswith("serving"), w.stderr.read()
            owners[name] = int(line.split()[1])
        began = time.monotonic()
        while not all(q.get(id) is None for id in ids):
            assert time.monotonic() - began < 180, "the jobs were not done in time"
            assert all(w.poll() is None for w in workers), "a worker stopped"
            inside = pg.rows("SELECT s.worker FROM {s}.witness s WHERE s.event = 'start' AND NOT EXISTS ("
                             "SELECT 1 FROM {s}.witness e WHERE e.event = 'end' AND e.job = s.job"
                             " AND e.attempt = s.attempt AND e.worker = s.worker)")
            for (name,) in inside:
                writer = f"tinystore #{owners[name]} {pg.schema}"[:63]
                cuts += len(pg.rows("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                                    " WHERE datname = current_database() AND application_name IN (%s, %s)",
                                    (name, writer)))
            time.sleep(CUT_EVERY)  # the pace of the cuts, not a wait for anything
    finally:
        for w in workers:
            if w.poll() is None:
                w.send_signal(signal.SIGTERM)
        codes = [w.wait(60) for w in workers]
    logs = [w.stderr.read() for w in workers]
    assert codes == [0, 0], [log[-3000:] for log in logs]
    assert cuts >= 40, f"only {cuts} sessions were ended"

    runs: dict[tuple, dict] = {}
    for job, attempt, worker, event, at in pg.rows("SELECT job, attempt, worker, event, at FROM {s}.witness"):
        runs.setdefault((job, attempt, worker), {})[event] = at
    assert all("end" in r for r in runs.values()), "a handler run never ended"
    ordered = sorted(runs.items(), key=lambda item: item[1]["start"])
    for (before, b), (after, a) in zip(ordered, ordered[1:]):
        assert a["start"] >= b["end"], (
            f"{after} started at {a['start']} while {before} ran ({b['start']} to {b['end']}) under "
            f"concurrency=1; logs:\n" + "\n".join(log[-3000:] for log in logs))
    assert {key[0] for key in runs} == set(ids)
