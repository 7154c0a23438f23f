"""A worker process for the limit tests: serves one queue of a store and writes a witness of every run.

    python limits_child.py STORE WITNESS QUEUE WORKERS

It opens the store, takes the queue with the options kept in it (it names
none, so it enforces what the test set), prints ``ready <pid>`` and serves
until SIGTERM. Each run of the handler writes one row to the witness file (a
SQLite file of its own, outside the store): the job, its group, the process,
when the claim took the lease, when the handler started and when it ended.

The claim time is read from the store's own lease row (its expiry minus the
queue's lease, which is long enough that no renewal moves it during a test):
the limits are enforced on claims, and a handler starts a little after its
claim, so the rate windows are checked on claim times.

A payload may ask the handler to
- ``{"ms": N}``: work N milliseconds;
- ``{"barrier": [key, n]}``: wait until n runs with that key have started, so
  that n run at once and the test knows the limit can be reached (if it is
  never reached within 20 s the run writes a problem row and the test fails);
- ``{"gate": path}``: wait until the test lets go of its lock on that file.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import sys
import threading
import time

import tinystore

store_path, witness_path, queue_name, workers = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
store = tinystore.open(store_path)
queue = store.queue(queue_name)
LEASE = queue.options.lease
LEASE_OF = ("SELECT l.expires FROM tinystore_leases l JOIN tinystore_jobs j ON j.seq = l.job"
            " WHERE j.queue = ? AND j.id = ? AND l.attempt = ?")
_local = threading.local()


def witness() -> sqlite3.Connection:
    conn = getattr(_local, "conn", None)
    if conn is None:
        conn = _local.conn = sqlite3.connect(witness_path, timeout=60, isolation_level=None)
    return conn


def barrier(key: str, n: int) -> None:
    """Wait until n runs with this key have started: as none ends before that, n ran at once."""
    deadline = time.monotonic() + 20
    while witness().execute("SELECT count(*) FROM runs WHERE key = ?", (key,)).fetchone()[0] < n:
        if time.monotonic() > deadline:
            witness().execute("INSERT INTO problems (what) VALUES (?)", (f"barrier {key} never reached {n}",))
            return
        time.sleep(0.005)


@queue.work
def handle(payload: dict, run: tinystore.Run) -> None:
    started = time.time()
    rows = store.query(LEASE_OF, (run.queue, run.id, run.attempt))
    claimed = rows[0][0] - LEASE if rows else None
    key = payload["barrier"][0] if "barrier" in payload else None
    witness().execute("INSERT INTO runs (id, grp, pid, attempt, key, claimed, started) VALUES (?, ?, ?, ?, ?, ?, ?)",
                      (run.id, run.group, os.getpid(), run.attempt, key, claimed, started))
    if key is not None:
        barrier(key, payload["barrier"][1])
    if "gate" in payload:
        with open(payload["gate"], "rb") as gate:
            fcntl.flock(gate, fcntl.LOCK_SH)  # blocks while the test holds its exclusive lock
    if payload.get("ms"):
        time.sleep(payload["ms"] / 1000)  # the work itself, not a wait for anything
    witness().execute("UPDATE runs SET ended = ? WHERE id = ? AND attempt = ?", (time.time(), run.id, run.attempt))


print("ready", os.getpid(), flush=True)
store.serve(workers=workers)
store.close()
print("stopped", flush=True)
