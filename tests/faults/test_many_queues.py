"""A worker's threads and write transactions do not grow with the number of queues it serves.

``def`` handlers share the worker's handler threads (64, or one queue's
``workers`` if more), each queue still capped by its own ``workers``. A
commit wakes only the runners of the queues it changed; a commit by another
connection, which cannot say, makes the worker read which idle queues have
work, not run a claim transaction per queue. Write transactions are counted
by the store's writer.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Callable

import tinystore


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"waited {timeout:g}s for {what}"
        time.sleep(0.01)


def test_a_worker_serving_200_queues_of_def_handlers_runs_them_all_in_at_most_64_threads_each_queue_within_its_workers(
        tmp_path: Path) -> None:
    store = tinystore.open(tmp_path / "store.db", durability="off")
    lock = threading.Lock()
    running: dict[str, int] = {}
    most: dict[str, int] = {}
    threads_seen: list[int] = []
    done: list[str] = []

    def handle(payload: Any, run: Any) -> None:
        with lock:
            running[run.queue] = running.get(run.queue, 0) + 1
            most[run.queue] = max(most.get(run.queue, 0), running[run.queue])
            threads_seen.append(sum(t.name.startswith("tinystore-handler") for t in threading.enumerate()))
        time.sleep(0.02)
        with lock:
            running[run.queue] -= 1
            done.append(run.id)

    queues = [store.queue(f"q{n}") for n in range(200)]
    for q in queues:
        q.work(handle)
        q.add_many(range(4))
    store.start(workers=2)
    try:
        wait_until(lambda: len(done) == 800, 60, "every job to run")
    finally:
        store.close()
    assert max(threads_seen) <= 64, max(threads_seen)  # 200 queues x 16 threads before
    assert max(most.values()) <= 2  # workers=2 still caps each queue
    assert set(most) == {q.name for q in queues}  # every queue had its turn


def test_def_handlers_of_one_queue_get_as_many_threads_as_its_workers_even_past_64(tmp_path: Path) -> None:
    store = tinystore.open(tmp_path / "store.db", durability="off")
    wide = store.queue("wide")
    lock, at_once, gate = threading.Lock(), [0], threading.Event()

    def handle(payload: Any, run: Any) -> None:
        with lock:
            at_once[0] += 1
            if at_once[0] == 80:
                gate.set()
        gate.wait(10)

    wide.work(handle)
    wide.add_many(range(80))
    store.start(workers=80)
    try:
        assert gate.wait(30), at_once
    finally:
        store.close()


def transactions_for_20_adds(path: Path, queues: int, foreign: bool) -> int:
    """The worker's write transactions while 20 jobs of one queue are added one by one and run."""
    store = tinystore.open(path, durability="off")
    served = [store.queue(f"q{n}") for n in range(queues)]
    ran = threading.Semaphore(0)

    async def handle(payload: Any, run: Any) -> None:
        ran.release()

    for q in served:
        q.work(handle)
    adder = tinystore.open(path, durability="off") if foreign else store  # another connection: cannot say
    target = adder.queue("q0")
    writer = store._backend._writer
    store.start()
    try:
        wait_until(lambda: all(r.waiting for w in store._serving for r in w.runners), 30, "the runners to idle")
        time.sleep(0.2)
        before = writer.transactions
        for n in range(20):
            target.add({"n": n}, id=f"j{n}")
            assert ran.acquire(timeout=10)
            wait_until(lambda: target.get(f"j{n}") is None, 10, "the job to be settled")
        time.sleep(0.2)
        return writer.transactions - before
    finally:
        store.close()
        if adder is not store:
            adder.close()


def test_an_add_to_one_queue_makes_no_runner_of_99_other_queues_run_a_claim_transaction(tmp_path: Path) -> None:
    one = transactions_for_20_adds(tmp_path / "one.db", 1, foreign=False)
    hundred = transactions_for_20_adds(tmp_path / "hundred.db", 100, foreign=False)
    assert one <= 80, one
    assert hundred <= one + 10, (one, hundred)  # 6,020 with 100 queues before


def test_an_add_by_another_connection_makes_no_runner_of_99_other_queues_run_a_claim_transaction(
        tmp_path: Path) -> None:
    one = transactions_for_20_adds(tmp_path / "one.db", 1, foreign=True)
    hundred = transactions_for_20_adds(tmp_path / "hundred.db", 100, foreign=True)
    assert one <= 60, one
    assert hundred <= one + 10, (one, hundred)
