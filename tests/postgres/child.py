"""A child process on a PostgreSQL store: ``child.py URL SCHEMA ROLE [ARGS...]``; ``DIRECT`` in the
environment, where set, is ``open``'s ``direct=`` (URL is then a pooler's).

Roles:
- ``open``: open the store (migrating it), print "opened", close.
- ``worker QUEUE WITNESS CONCURRENCY HOLD WORKERS``: serve QUEUE (at most WORKERS handlers at once in this
  process) with a handler that appends "start ID"/"end ID" lines to WITNESS around a sleep of HOLD
  seconds; runs until killed or SIGTERM.
- ``hold QUEUE``: serve QUEUE with a handler that prints "running ID" and sleeps for a minute (killed meanwhile).
- ``cancellable QUEUE``: serve QUEUE with an async handler that prints "running ID" then waits; prints
  "cancelled ID" when it is cancelled.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

import tinystore


def main() -> None:
    url, schema, role, *args = sys.argv[1:]
    store = tinystore.open(url, schema=schema, direct=os.environ.get("DIRECT"))
    if role == "open":
        print("opened", flush=True)
        store.close()
        return
    if role == "worker":
        name, witness, concurrency, hold, workers = args
        queue = store.queue(name, concurrency=int(concurrency), lease="10s")

        @queue.work
        def handler(payload, run):
            with open(witness, "a") as f:
                f.write(f"start {run.id} {time.time()} {os.getpid()}\n")
            time.sleep(float(hold))
            with open(witness, "a") as f:
                f.write(f"end {run.id} {time.time()} {os.getpid()}\n")
    elif role == "hold":
        (name,) = args
        queue = store.queue(name, lease="1h")

        @queue.work
        def handler(payload, run):
            print("running", run.id, flush=True)
            time.sleep(60)
    elif role == "cancellable":
        (name,) = args
        queue = store.queue(name, lease="1h", timeout="1h")

        @queue.work
        async def handler(payload, run):
            print("running", run.id, flush=True)
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                print("cancelled", run.id, flush=True)
                raise
    else:
        raise SystemExit(f"unknown role {role}")
    print("serving", flush=True)
    store.serve(workers=int(workers) if role == "worker" else None)
    store.close()


if __name__ == "__main__":
    main()
