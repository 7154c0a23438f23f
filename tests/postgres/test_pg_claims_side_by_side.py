"""Processes claim one queue side by side (SPEC §7, "Many machines, one queue").

A claim of a queue without limits holds no lock across its cycle and skips
the rows another claim holds; adds and settlements never wait for a claim of
another process; a queue with limits stays exact with four processes
claiming at once (LIM-01, LIM-02), counted by a witness file the handlers
write.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import tinystore
from tinystore.backends.postgres import _sql


def hold(pg, queue: str, ids: list[str] = ()):  # type: ignore[assignment]
    """Another process's claim in flight: a transaction that holds the queue's lock and these jobs' rows."""
    conn = pg.connect()
    conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_sql.schema(pg.schema).queue_key, queue))
    for id in ids:
        conn.execute(f'SELECT 1 FROM "{pg.schema}".jobs WHERE queue = %s AND id = %s FOR UPDATE', (queue, id))
    return conn


def test_a_claim_of_a_queue_without_limits_skips_the_rows_another_claim_holds_and_waits_for_no_lock(pg, wait_for):
    store = pg.open(lock_timeout=0.5)
    q = store.queue("open")
    for id in ("a", "b", "c"):
        q.add({}, id=id)
    ran = []
    q.work(lambda payload, run: ran.append(run.id))
    other = hold(pg, "open", ["a"])
    store.start()
    try:
        wait_for(lambda: len(ran) == 2, timeout=10)
        assert ran == ["b", "c"]  # in add order, past the row held
    finally:
        other.rollback()
        other.close()
    wait_for(lambda: len(ran) == 3, timeout=10)
    store.stop()
    assert ran == ["b", "c", "a"]


def test_adds_and_settlements_wait_for_no_claim_of_a_limited_queue(pg):
    store = pg.open(lock_timeout=0.5)
    q = store.queue("limited", concurrency=1)
    q.add({}, id="first")
    ran = []
    q.work(lambda payload, run: ran.append(run.id))
    store.run_until_idle()
    other = hold(pg, "limited")  # another process's claim of the queue, counting
    try:
        assert q.add({}, id="second").added  # an add takes no queue lock
        with store.transaction() as tx:
            q.add({}, id="third", tx=tx)
    finally:
        other.rollback()
        other.close()
    store.run_until_idle()
    assert ran == ["first", "second", "third"]


WORKER = r"""
import os, sys, time
import tinystore

url, schema, witness = sys.argv[1:4]
store = tinystore.open(url, schema=schema)
q = store.queue("limits", concurrency=3, group_concurrency=1, lease="30s")

def note(event, group, run):
    with open(witness, "a") as f:
        f.write(f"{event} {group} {run.id} {os.getpid()} {time.time():.6f}\n")

@q.work
def handle(payload, run):
    note("start", payload["g"], run)
    time.sleep(0.02)
    note("end", payload["g"], run)

print("serving", flush=True)
store.serve()
"""

JOBS = 120


def test_LIM_01_and_LIM_02_hold_with_four_processes_claiming_at_once(pg, tmp_path: Path, child_env: dict,
                                                                     wait_for) -> None:
    witness = tmp_path / "witness.txt"
    witness.touch()
    store = pg.open()
    q = store.queue("limits", concurrency=3, group_concurrency=1, lease="30s")
    for n in range(JOBS):
        q.add({"n": n, "g": f"g{n % 5}"}, id=f"j{n}", group=f"g{n % 5}")
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, pg.url, pg.schema, str(witness)], env=child_env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    try:
        for w in workers:
            assert w.stdout.readline().startswith("serving"), w.stderr.read()

        def ends() -> set[str]:
            return {line.split()[2] for line in witness.read_text().splitlines() if line.startswith("end ")}
        wait_for(lambda: len(ends()) == JOBS, timeout=120)
    finally:
        for w in workers:
            if w.poll() is None:
                w.send_signal(signal.SIGTERM)
        codes = [w.wait(60) for w in workers]
    assert codes == [0, 0, 0, 0], [w.stderr.read()[-2000:] for w in workers]
    events = []
    for line in witness.read_text().splitlines():
        event, grp, id, pid, at = line.split()
        events.append((float(at), 0 if event == "end" else 1, grp, id))
    events.sort()
    running: dict[str, str] = {}
    most = 0
    pids = {line.split()[3] for line in witness.read_text().splitlines()}
    for at, starting, grp, id in events:
        if starting:
            assert grp not in running.values(), f"group {grp} ran two jobs at once at {at}"
            running[id] = grp
        else:
            running.pop(id)
        most = max(most, len(running))
    assert most <= 3, f"{most} handlers ran at once under concurrency=3"
    assert len(pids) > 1, "one process ran every job"
