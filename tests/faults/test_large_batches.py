"""``add_many`` takes any iterable of at most 10,000 jobs, all or none; a longer one writes nothing (LIM-04).

One transaction holds the store's one write lock while it writes, so a batch
of a million would keep every worker of the file waiting for many seconds
and hold every job and state in memory; past 10,000 a batch is refused
before a row is written, having read one item past the limit.
"""

from __future__ import annotations

import sqlite3
from typing import Iterator

import pytest

import tinystore
from tinystore._values import MAX_BATCH


def job_rows(path: str) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT count(*) FROM tinystore_jobs").fetchone()[0]
    finally:
        conn.close()


class Counted:
    """An iterable that counts the items taken from it."""

    def __init__(self, n: int):
        self.n = n
        self.taken = 0

    def __iter__(self) -> Iterator[tinystore.Job]:
        for i in range(self.n):
            self.taken += 1
            yield tinystore.Job({"i": i}, id=f"j{i}")


def test_LIM_04_add_many_adds_10000_jobs_from_a_generator_in_one_transaction(store, store_path):
    q = store.queue("backfill")
    states = q.add_many({"i": i} for i in range(MAX_BATCH))
    assert MAX_BATCH == 10_000 and len(states) == MAX_BATCH
    assert [s.payload["i"] for s in states[:3]] == [0, 1, 2] and all(s.added for s in states)
    assert job_rows(store_path) == MAX_BATCH


@pytest.mark.parametrize("given", ["generator", "list"])
def test_LIM_04_add_many_of_more_than_10000_jobs_is_refused_and_writes_nothing(store, store_path, given):
    q = store.queue("backfill")
    items = Counted(1_000_000) if given == "generator" else list(Counted(MAX_BATCH + 1))
    with pytest.raises(tinystore.LimitExceeded) as caught:
        q.add_many(items)
    assert caught.value.queue == "backfill"
    assert "at most 10000 jobs in one call" in str(caught.value) and "nothing was written" in str(caught.value)
    if given == "generator":
        assert items.taken == MAX_BATCH + 1  # a million items were never read, let alone held
    assert job_rows(store_path) == 0


def test_a_batch_refused_for_its_size_can_be_added_in_calls_of_10000_with_ids_that_add_nothing_twice(
        store, store_path):
    q = store.queue("backfill")
    jobs = [tinystore.Job({"i": i}, id=f"j{i}") for i in range(MAX_BATCH + 500)]
    with pytest.raises(tinystore.LimitExceeded):
        q.add_many(jobs)
    first = q.add_many(jobs[:MAX_BATCH])
    again = q.add_many(jobs[MAX_BATCH - 500:])  # a call made again after a failure: its first 500 are kept
    assert all(s.added for s in first)
    assert [s.added for s in again].count(False) == 500
    assert job_rows(store_path) == MAX_BATCH + 500
