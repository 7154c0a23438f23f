"""A worker process for the traffic tests: serves one queue of a store and writes a witness of every run.

    python traffic_child.py STORE WITNESS QUEUE WORKERS sync|async

Not a test module: the tests run its text with ``python -c``. It opens the
store, takes the queue with the options kept in it (it names none, so it
enforces what the test set), registers a ``def`` (sync) or ``async def``
handler, prints "serving" once a SIGTERM would stop it gracefully, serves
until then and prints "stopped".

Each run appends a line to the witness (a file of its own, outside the store,
opened with O_APPEND: one ``write`` per line, so lines of processes and threads
never mix) as its first act, "begin KEY ID GROUP PID ATTEMPT CLAIMED STARTED",
and another as its last, "end KEY ENDED OUTCOME". Appending is one system
call: it does not slow a handler that is meant to be instant. With
``{"claim": true}`` the run first reads when its claim took the lease, from
the store's own lease row (its expiry minus the queue's lease, which the
tests make long enough that no renewal moves it): limits are enforced on
claims, and a handler begins a little after its claim.

What a run does is read from its payload:

- ``{"ms": N}``: work N milliseconds (the work itself, not a wait for anything);
- ``{"gate": path}``: wait until the test lets go of its lock on that file;
- ``{"fail": n}``: raise on attempts 1..n, then succeed;
- ``{"snooze": n}``: answer ``run.snooze("100ms")`` the first n times it runs;
- ``{"progress": n}``: report progress n times before the answer.
"""

from __future__ import annotations

import asyncio
import fcntl
import itertools
import os
import sys
import time

import tinystore

store_path, witness_path, queue_name, workers, kind = sys.argv[1:6]
store = tinystore.open(store_path)
queue = store.queue(queue_name)
LEASE = queue.options.lease
LEASE_OF = ("SELECT l.expires FROM tinystore_leases l JOIN tinystore_jobs j ON j.seq = l.job"
            " WHERE j.queue = ? AND j.id = ? AND l.attempt = ?")
WITNESS = os.open(witness_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
PID = os.getpid()
_keys = itertools.count()


def say(line: str) -> None:
    os.write(1, (line + "\n").encode())  # one write per line: threads never interleave their lines


def begin(run: tinystore.Run, payload: dict) -> str:
    started = time.time()
    claimed = "-"
    if payload.get("claim"):
        rows = store.query(LEASE_OF, (run.queue, run.id, run.attempt))
        claimed = repr(rows[0][0] - LEASE) if rows else "-"
    key = f"{PID}-{next(_keys)}"
    os.write(WITNESS, f"begin {key} {run.id} {run.group or '-'} {PID} {run.attempt} {claimed} {started!r}\n".encode())
    return key


def end(key: str, outcome: str) -> None:
    os.write(WITNESS, f"end {key} {time.time()!r} {outcome}\n".encode())


def snoozed_before(run: tinystore.Run) -> int:
    """How many runs of this job answered snooze, in any process: read from the witness."""
    with open(witness_path) as f:
        lines = [line.split() for line in f]
    keys = {line[1] for line in lines if line[0] == "begin" and line[2] == run.id}
    return sum(1 for line in lines if line[0] == "end" and line[1] in keys and line[3] == "snooze")


def answer(payload: dict, run: tinystore.Run, key: str):
    """The end of a run: its outcome in the witness, then its answer."""
    for n in range(payload.get("progress", 0)):
        run.progress({"step": n + 1})
    if payload.get("snooze") and snoozed_before(run) < payload["snooze"]:
        end(key, "snooze")
        return run.snooze("100ms")
    if run.attempt <= payload.get("fail", 0):
        end(key, "raised")
        raise RuntimeError(f"attempt {run.attempt} of {run.id} fails on purpose")
    end(key, "returned")
    return None


if kind == "sync":
    @queue.work
    def handle(payload: dict, run: tinystore.Run):
        key = begin(run, payload)
        if "gate" in payload:
            with open(payload["gate"], "rb") as gate:
                fcntl.flock(gate, fcntl.LOCK_SH)  # blocks while the test holds its exclusive lock
        if payload.get("ms"):
            time.sleep(payload["ms"] / 1000)
        return answer(payload, run, key)
else:
    @queue.work
    async def handle(payload: dict, run: tinystore.AsyncRun):
        key = begin(run, payload)
        if "gate" in payload:
            await asyncio.get_running_loop().run_in_executor(None, _wait_gate, payload["gate"])
        if payload.get("ms"):
            await asyncio.sleep(payload["ms"] / 1000)
        return answer(payload, run, key)


def _wait_gate(path: str) -> None:
    with open(path, "rb") as gate:
        fcntl.flock(gate, fcntl.LOCK_SH)


async def serve() -> None:
    serving = asyncio.ensure_future(store.serve_async(workers=int(workers), handle_signals=True))
    await asyncio.sleep(0)  # serve_async runs up to its first wait, its signal handlers installed
    say("serving")
    await serving


asyncio.run(serve())
store.close()
say("stopped")
