"""Workers whose every connection the server ends, again and again, while they drain a limited queue.

Three worker processes serve a queue of ``concurrency=2`` on one PostgreSQL
store; each handler writes its start and end to a witness file outside the
database. While they run, the test ends every connection of the store
(by its ``application_name``) with ``pg_terminate_backend``, as a server
restart or a failover would, several times. At the end: no job lost, no job run twice at the same time,
never more than two handlers running at once, and every worker still
serving (it exits 0 on SIGTERM).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

WORKER = r"""
import logging, os, sys, time
import tinystore

logging.basicConfig(level=logging.WARNING)

url, schema, witness = sys.argv[1:4]
store = tinystore.open(url, schema=schema)
q = store.queue("cut", concurrency=2, lease="5s", backoff=("100ms", "100ms"))

def note(event, run):
    with open(witness, "a") as f:
        f.write(f"{event} {run.id} {run.attempt} {os.getpid()} {time.time():.6f}\n")

@q.work
def handle(payload, run):
    note("start", run)
    time.sleep(0.03)
    note("end", run)

print("serving", flush=True)
store.serve()
"""

JOBS = 150
CUTS = 6


def test_workers_ride_out_every_connection_ended_by_the_server_losing_nothing_and_exceeding_no_limit(
        pg, tmp_path: Path, child_env: dict, wait_for) -> None:
    witness = tmp_path / "witness.txt"
    witness.touch()
    store = pg.open()
    q = store.queue("cut", concurrency=2, lease="5s", backoff=("100ms", "100ms"))
    ids = [state.id for state in q.add_many([{"n": n} for n in range(JOBS)])]
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, pg.url, pg.schema, str(witness)], env=child_env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    try:
        for w in workers:
            assert w.stdout.readline().startswith("serving"), w.stderr.read()
        def ends() -> int:
            return sum(line.startswith("end ") for line in witness.read_text().splitlines())
        for cut in range(CUTS):  # every connection to the database but this one, while jobs run
            wait_for(lambda: ends() > (cut + 1) * JOBS // (CUTS + 2), timeout=60)
            with pg.connect(autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"  # this store's only
                              " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                              " AND application_name LIKE %s", (f"%{pg.schema}",))

        def done() -> set[str]:
            return {line.split()[1] for line in witness.read_text().splitlines() if line.startswith("end ")}

        wait_for(lambda: done() >= set(ids), timeout=120)
        wait_for(lambda: all(q.get(id) is None for id in ids), timeout=60)  # every job settled done
        assert all(w.poll() is None for w in workers), "a worker stopped"
    finally:
        for w in workers:
            if w.poll() is None:
                w.send_signal(signal.SIGTERM)
        codes = [w.wait(60) for w in workers]
    logs = [w.stderr.read() for w in workers]
    assert codes == [0, 0, 0], [log[-2000:] for log in logs]
    assert any("tries it again" in log for log in logs), "no worker saw its connections end: " + logs[0][-2000:]

    events = []
    for line in witness.read_text().splitlines():
        event, id, attempt, pid, at = line.split()
        events.append((float(at), 0 if event == "end" else 1, id, int(attempt), int(pid)))
    events.sort()
    running: dict[tuple, int] = {}
    most = 0
    for at, starting, id, attempt, pid in events:
        if starting:
            assert not any(key[0] == id for key in running), f"{id} ran twice at once at {at}"
            running[(id, pid)] = attempt
        else:
            running.pop((id, pid), None)
        most = max(most, len(running))
    assert most <= 2, f"{most} handlers ran at once under concurrency=2"
