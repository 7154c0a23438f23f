"""JOB-12 across processes under traffic: a cancel made in one process stops the handler running the job in another.

Two worker processes serve one store file, one a queue of ``async def``
handlers, the other a queue of ``def`` handlers, while this process adds
jobs to both back to back:
long ones, which hold for 30 s unless told to stop, among short ones. Once
every long job runs, this process cancels each of them, one after another.
Each handler writes what it did to a witness file outside the store. The
leases are a minute long, so no renewal can tell a handler before the test
looks: only the cancel's notice can.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Callable

from helpers import start_child, wait_child, wait_for_line

import tinystore

HOLD = 30.0  # a long job's run unless it is told to stop
TOLD_WITHIN = 10.0  # far below HOLD and below the first renewal (lease 60 s: every 30 s)

WORKER = r"""
import asyncio, json, os, sys, time
import tinystore

store = tinystore.open(sys.argv[1])
q = store.queue("work-" + sys.argv[3], lease="60s", timeout=None)

def witness(event, run):
    with open(sys.argv[2], "a") as f:
        f.write(json.dumps({"event": event, "id": run.id, "pid": os.getpid(), "queue": run.queue}) + "\n")

if sys.argv[3] == "async":
    @q.work
    async def handle(payload, run):
        witness("begin", run)
        try:
            await asyncio.sleep(payload["hold"])
        except asyncio.CancelledError:
            witness("told", run)
            raise
        witness("end", run)
else:
    @q.work
    def handle(payload, run):
        witness("begin", run)
        deadline = time.monotonic() + payload["hold"]
        while time.monotonic() < deadline:
            if run.cancelled:
                witness("told", run)
                return
            time.sleep(0.005)
        witness("end", run)

print("ready", flush=True)
store.serve()
"""


def events(witness: Path) -> list[dict]:
    if not witness.exists():
        return []
    return [json.loads(line) for line in witness.read_text().splitlines()]


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"waited {timeout:g}s for {what}"
        time.sleep(0.02)


def test_JOB_12_cancels_made_in_another_process_stop_each_running_handler_in_both_kinds_of_worker(
        tmp_path: Path, child_env: dict[str, str]) -> None:
    path = str(tmp_path / "store.db")
    witness = tmp_path / "witness.jsonl"
    with tinystore.open(path) as store:
        kinds = ("async", "def")
        queues = [store.queue(f"work-{kind}", lease="60s", timeout=None) for kind in kinds]
        workers = [start_child(WORKER, path, str(witness), kind, env=child_env) for kind in kinds]
        try:
            for proc in workers:
                wait_for_line(proc, "ready")
            long_ids = [f"long:{n:02}" for n in range(12)]
            short_ids = [f"short:{n:03}" for n in range(120)]
            queue_of = {}
            for n, id in enumerate(short_ids):  # back to back, a long one among every ten short ones
                queue_of[id] = queues[n % 2]
                queue_of[id].add({"hold": 0.01}, id=id)
                if n % 10 == 0:
                    long_id = long_ids[n // 10]
                    queue_of[long_id] = queues[(n // 10) % 2]
                    queue_of[long_id].add({"hold": HOLD}, id=long_id)

            def begun() -> set[str]:
                return {e["id"] for e in events(witness) if e["event"] == "begin"}
            wait_until(lambda: set(long_ids) <= begun(), 30, "every long job to run")
            for id in long_ids:
                assert queue_of[id].cancel(id) is True, id
            cancelled_at = time.monotonic()

            def told() -> set[str]:
                return {e["id"] for e in events(witness) if e["event"] == "told"}
            wait_until(lambda: set(long_ids) <= told(), TOLD_WITHIN, "every cancelled handler to be told")
            assert time.monotonic() - cancelled_at < TOLD_WITHIN
            wait_until(lambda: {e["id"] for e in events(witness) if e["event"] == "end"} >= set(short_ids), 30,
                       "every short job to end")
        finally:
            for proc in workers:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            codes = [wait_child(proc, 60) for proc in workers]
        assert codes == [0, 0]

        seen = events(witness)
        for id in long_ids:
            mine = [(e["event"], e["pid"]) for e in seen if e["id"] == id]
            assert [ev for ev, _ in mine] == ["begin", "told"], (id, mine)  # once, never again after the cancel
            assert mine[0][1] == mine[1][1], (id, mine)  # told in the process that ran it
            assert queue_of[id].get(id) is None
        for id in short_ids:
            assert [e["event"] for e in seen if e["id"] == id] == ["begin", "end"], id
            assert queue_of[id].get(id) is None  # done
