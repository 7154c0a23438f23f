"""A worker process for the limit tests: serves one queue of a store and writes a witness of every run.

    python limits_child.py TARGET WITNESS QUEUE WORKERS

It opens the store (TARGET is what ``tinystore.open`` takes: a file path, a
URL), takes the queue with the options kept in it (it names none, so it
enforces what the test set), prints ``ready <pid>`` and serves until SIGTERM.
Each run of the handler appends to the witness file (outside the store), one
JSON line per record, each with one ``write`` so that lines never interleave:
a "start" with the job, its group, the process, when the claim took the lease
and when the handler started, and an "end" with when it ended.

The claim time is read from the store's own lease (its expiry minus the
queue's lease, which is long enough that no renewal moves it during a test),
through the backend's kit (``tests/kits.py``): the limits are enforced on
claims, and a handler starts a little after its claim, so the rate windows are
checked on claim times.

A payload may ask the handler to
- ``{"ms": N}``: work N milliseconds;
- ``{"barrier": [key, n]}``: wait until n runs with that key have started, so
  that n run at once and the test knows the limit can be reached (if it is
  never reached within 20 s the run writes a "problem" and the test fails);
- ``{"gate": path}``: wait until the test lets go of its lock on that file.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time

import kits
import tinystore

target, witness_path, queue_name, workers = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
kit = kits.kit_for(target)
store = tinystore.open(target)
queue = store.queue(queue_name)
LEASE = queue.options.lease
witness = os.open(witness_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)


def note(**record: object) -> None:
    os.write(witness, (json.dumps(record) + "\n").encode())


def started_with(key: str) -> int:
    """How many runs with this key have started, as the witness says."""
    with open(witness_path) as f:
        lines = f.read().split("\n")[:-1]  # whole lines: another process's may be on its way
    return sum(1 for line in lines if json.loads(line).get("key") == key)


def barrier(key: str, n: int) -> None:
    """Wait until n runs with this key have started: as none ends before that, n ran at once."""
    deadline = time.monotonic() + 20
    while started_with(key) < n:
        if time.monotonic() > deadline:
            note(problem=f"barrier {key} never reached {n}")
            return
        time.sleep(0.005)


@queue.work
def handle(payload: dict, run: tinystore.Run) -> None:
    started = time.time()
    expires = [lease.expires for lease in kit.leases(target)
               if (lease.queue, lease.id, lease.attempt) == (run.queue, run.id, run.attempt)]
    claimed = expires[0] - LEASE if expires else None
    key = payload["barrier"][0] if "barrier" in payload else None
    note(phase="start", id=run.id, grp=run.group, pid=os.getpid(), attempt=run.attempt, key=key,
         claimed=claimed, started=started)
    if key is not None:
        barrier(key, payload["barrier"][1])
    if "gate" in payload:
        with open(payload["gate"], "rb") as gate:
            fcntl.flock(gate, fcntl.LOCK_SH)  # blocks while the test holds its exclusive lock
    if payload.get("ms"):
        time.sleep(payload["ms"] / 1000)  # the work itself, not a wait for anything
    note(phase="end", id=run.id, pid=os.getpid(), attempt=run.attempt, ended=time.time())


print("ready", os.getpid(), flush=True)
store.serve(workers=workers)
store.close()
print("stopped", flush=True)
