"""The process that works on the store until the power is cut (see power.py), and the check after it.

    python child.py MODE TARGET WITNESS ROUND SEED

TARGET is what ``tinystore.open`` takes (a file on the disk that is cut, or
the URL of the server whose data is on it). The child appends "ready ROUND"
to the WITNESS file, then works until it is killed. The WITNESS is on the
machine's own disk, which is never cut: each line is one ``os.write`` on an
``O_APPEND`` descriptor, fsynced before the child goes on, and written only
after tinystore returned:

    ack ID        an add of job ID returned (in ``transaction``: the transaction
                  that added it with its application row committed)
    done ID       the store said that job ID is done
    begin ID N    the handler of attempt N of job ID began

Modes, each on a queue named after it:

    add           one ``add`` after another
    add_many      ``add_many`` of 1 to 10 jobs at a time
    threads       four threads adding at once
    transaction   ``store.transaction()`` writing an application row and adding a job
    settle        adds 30 jobs, then a worker runs them while a thread says which are done
    job04         a queue with ``concurrency=1`` (its claims are limited ones); each handler
                  says it began, then works 50-300 ms, and a third of first attempts raise
    control       as ``add``, with ``durability="normal"``: a cut may lose the last adds

``check TARGET MODE`` opens the store from a fresh process and prints
what it holds: ``{"jobs": {id: [state, attempt]}, "rows": [application row ids]}``.
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time

import tinystore

ROWS = "powercut_rows"


class Witness:
    def __init__(self, path: str):
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def say(self, *words: object) -> None:
        os.write(self.fd, (" ".join(map(str, words)) + "\n").encode())
        os.fsync(self.fd)


def main() -> None:
    if sys.argv[1] == "check":
        print(json.dumps(check(*sys.argv[2:4])))
        return
    mode, target, witness_path, round_name, seed = sys.argv[1:6]
    if mode not in MODES:
        raise SystemExit(f"no mode {mode!r}: {', '.join(MODES)}")
    store = tinystore.open(target, durability="normal" if mode == "control" else "full")
    witness = Witness(witness_path)
    MODES[mode](store, store.queue(mode), witness, round_name, random.Random(int(seed)))


def add(store: tinystore.Store, queue: tinystore.Queue, witness: Witness, name: str, rng: random.Random) -> None:
    witness.say("ready", name)
    adds(queue, witness, name)


def adds(queue: tinystore.Queue, witness: Witness, prefix: str) -> None:
    for n in range(10**9):
        queue.add({"n": n}, id=f"{prefix}-{n}")
        witness.say("ack", f"{prefix}-{n}")


def add_many(store: tinystore.Store, queue: tinystore.Queue, witness: Witness, name: str, rng: random.Random) -> None:
    witness.say("ready", name)
    for n in range(10**9):
        ids = [f"{name}-{n}-{k}" for k in range(rng.randint(1, 10))]
        queue.add_many([tinystore.Job({"n": n}, id=i) for i in ids])
        for i in ids:
            witness.say("ack", i)


def threads(store: tinystore.Store, queue: tinystore.Queue, witness: Witness, name: str, rng: random.Random) -> None:
    witness.say("ready", name)
    adders = [threading.Thread(target=adds, args=(queue, witness, f"{name}-t{k}")) for k in range(4)]
    for thread in adders:
        thread.start()
    for thread in adders:
        thread.join()


def transaction(store: tinystore.Store, queue: tinystore.Queue, witness: Witness, name: str,
                rng: random.Random) -> None:
    with store.transaction() as tx:
        tx.execute(f"CREATE TABLE IF NOT EXISTS {ROWS} (id TEXT PRIMARY KEY)")
    mark = "%s" if store.location.startswith("postgres") else "?"
    witness.say("ready", name)
    for n in range(10**9):
        with store.transaction() as tx:
            tx.execute(f"INSERT INTO {ROWS} (id) VALUES ({mark})", (f"{name}-{n}",))
            queue.add({"n": n}, id=f"{name}-{n}", tx=tx)
        witness.say("ack", f"{name}-{n}")


def settle(store: tinystore.Store, queue: tinystore.Queue, witness: Witness, name: str, rng: random.Random) -> None:
    queue = store.queue(queue.name, lease="2s", dedupe="1h")  # done jobs stay, to be checked
    witness.say("ready", name)
    for n in range(30):
        queue.add({"n": n}, id=f"{name}-{n}")
        witness.say("ack", f"{name}-{n}")

    @queue.work
    def handle(payload: dict, run: tinystore.Run) -> None:
        time.sleep(rng.uniform(0, 0.02))

    def say_done() -> None:
        seen: set[str] = set()
        while True:
            for job in all_jobs(queue, "done"):
                if job.id not in seen:
                    seen.add(job.id)
                    witness.say("done", job.id)
            time.sleep(0.02)

    threading.Thread(target=say_done, daemon=True).start()
    store.serve(workers=4)


def job04(store: tinystore.Store, queue: tinystore.Queue, witness: Witness, name: str, rng: random.Random) -> None:
    # concurrency=1: every claim is a limited one, committed under the queue's lock, then flushed (JOB-04)
    queue = store.queue(queue.name, concurrency=1, attempts=20, lease="2s", backoff=("50ms", "100ms"), dedupe="1h")
    witness.say("ready", name)
    for n in range(10):
        queue.add({"n": n}, id=f"{name}-{n}")
        witness.say("ack", f"{name}-{n}")

    @queue.work
    def handle(payload: dict, run: tinystore.Run) -> None:
        witness.say("begin", run.id, run.attempt)
        time.sleep(rng.uniform(0.05, 0.3))
        if run.attempt == 1 and rng.random() < 0.33:
            raise RuntimeError("a planned failure: the next attempt is claimed too")

    store.serve(workers=1)


MODES = {"add": add, "add_many": add_many, "threads": threads, "transaction": transaction, "settle": settle,
         "job04": job04, "control": add}


def all_jobs(queue: tinystore.Queue, state: str | None = None) -> list[tinystore.JobState]:
    jobs, after = [], None
    while True:
        page = queue.jobs(state=state, limit=10_000, after=after)
        jobs += page
        if len(page) < 10_000:
            return jobs
        after = page[-1].id


def check(target: str, mode: str) -> dict:
    store = tinystore.open(target)
    try:
        jobs = {job.id: [job.state, job.attempt] for job in all_jobs(store.queue(mode))}
        rows: list[str] = []
        if mode == "transaction":
            with store.transaction() as tx:
                rows = [r[0] for r in tx.query(f"SELECT id FROM {ROWS}")]
        return {"jobs": jobs, "rows": rows}
    finally:
        store.close()


if __name__ == "__main__":
    main()
