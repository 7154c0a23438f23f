"""W10 round trips (PostgreSQL): what an add, a claim cycle, a settlement and a renewal cost in round trips.

Every connection of the store and of its worker goes through a relay of its
own (``relay.py``, recording, at the run's ``--relay`` delay or none), which
sees every message the clients send. It groups each connection's statements
into transactions (BEGIN ... COMMIT, or one statement alone) and names each
by what it writes: a claim cycle inserts leases (it may settle too), a
settlement deletes leases and inserts none, a renewal updates leases'
expiry, an add inserts jobs; the rest ("other") are reads and cycles that
found nothing. A round trip is each time a client sends after the server
answered, so statements sent together (a pipeline) are one.

Three phases, each between two marks of the relay: ``add`` called one at a
time in this process; jobs added one every 100 ms into an idle worker in
another process (``child.py latency``: every transaction of a job's path);
a worker holding a few leases of a queue whose lease is 2 s (renewed every
second), doing nothing else.
"""

from __future__ import annotations

import queue as queues
import signal
import threading
import time
from typing import Any

import tinystore

from common import QUEUE, Context, RelayProcess, Row, finish, payload, read_line, start_child

TITLE = "round trips"
KINDS = ("add", "claim cycle", "settlement", "renewal", "other")


def _summary(marked: list[dict[str, Any]]) -> dict[str, Any]:
    from relay import by_kind
    return {"by_kind": by_kind(marked), "round_trips": sum(c["round_trips"] for c in marked),
            "connections": len(marked)}


def adds(location: str, ctx: Context, relay: RelayProcess) -> dict[str, Any]:
    count = ctx.sizes["w10_adds"]
    store = tinystore.open(location, durability=ctx.durability)
    try:
        queue = store.queue(QUEUE)
        queue.add({"warm": True})
        relay.mark()
        for n in range(count):
            queue.add(payload(n))
        return {"count": count, **_summary(relay.mark())}
    finally:
        store.close()


def job_path(location: str, ctx: Context, relay: RelayProcess) -> dict[str, Any]:
    """Jobs one at a time into a worker of another process: each job's add, claim and settlement."""
    count, interval = ctx.sizes["w10_jobs"], ctx.sizes["w10_interval"]
    store = tinystore.open(location, durability=ctx.durability)
    child = start_child("latency", location, "--durability", ctx.durability)
    lines: "queues.Queue[str]" = queues.Queue()
    try:
        queue = store.queue(QUEUE)
        read_line(child, "ready", timeout=60)
        threading.Thread(target=lambda: [lines.put(ln) for ln in child.stdout], daemon=True).start()

        def started(n: int) -> None:
            while not lines.get(timeout=30).startswith(f"lat {n} "):
                pass

        queue.add({"n": 0, "t": time.time()})
        started(0)
        time.sleep(interval)  # its settlement is made before the mark
        relay.mark()
        for n in range(1, count + 1):
            queue.add({"n": n, "t": time.time()})
            started(n)
            time.sleep(interval)  # the job settles, and the worker is idle again, before the next
        return {"count": count, **_summary(relay.mark())}
    finally:
        child.send_signal(signal.SIGTERM)
        finish(child)
        store.close()


def renewals(location: str, ctx: Context, relay: RelayProcess) -> dict[str, Any]:
    leases, lease = ctx.sizes["w10_leases"], ctx.sizes["w10_lease_s"]
    store = tinystore.open(location, durability=ctx.durability)
    try:
        store.queue(QUEUE, lease=lease).add_many([payload(n) for n in range(leases)])
    finally:
        store.close()
    child = start_child("hold", location, "--durability", ctx.durability, "--leases", str(leases),
                        "--lease", repr(lease))
    try:
        read_line(child, "held", timeout=60)
        relay.mark()
        time.sleep(2 * lease)  # about four renewals at lease/2
        return {"leases": leases, "lease_s": lease, **_summary(relay.mark())}
    finally:
        child.kill()
        finish(child)


def _rows(phase: str, found: dict[str, Any], per: str, per_count: int) -> list[Row]:
    rows = []
    kinds = found["by_kind"]
    for kind in KINDS:
        if kind not in kinds or (kind == "other" and phase != "a job's path"):
            continue
        k = kinds[kind]
        rows.append(Row("W10", f"{phase}: per {kind} ({k['transactions']} seen)", k["round_trips_mean"],
                        "round trips", None, "", "", None,
                        {**k, "phase": phase}))
    rows.append(Row("W10", f"{phase}: every connection, per {per}", found["round_trips"] / per_count,
                    "round trips", None, "", "", None,
                    {"round_trips": found["round_trips"], "connections": found["connections"], per: per_count}))
    return rows


def run(ctx: Context) -> list[Row]:
    if not ctx.postgres:
        return [ctx.not_measured("W10", "round trips", "no network: a statement is a function call")]
    delay = 0.0 if ctx.target.relay is None else ctx.target.relay.delay_ms
    relay = RelayProcess(ctx.target.server_address(), delay, record=True)
    rows: list[Row] = []
    try:
        for phase, measure, per, key in (("add alone", adds, "add", "count"),
                                         ("a job's path", job_path, "job", "count"),
                                         ("leases held", renewals, "renewal", None)):
            location = ctx.path(f"w10-{per}")
            try:
                found = measure(ctx.target.through(location, relay), ctx, relay)
            finally:
                ctx.remove(location)
            count = found[key] if key else max(1, found["by_kind"].get("renewal", {}).get("transactions", 0))
            rows += _rows(phase, found, per, count)
    finally:
        relay.close()
    return rows
