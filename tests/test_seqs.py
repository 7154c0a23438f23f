"""A job's seq names it in leases, steps and watches: it is never handed out twice.

Adds write no counter: a new seq is above every kept job and above the floor
that jobs leaving raise. These tests read the seqs from the file itself.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import tinystore


def seq_of(store: tinystore.Store, queue: str, id: str) -> int:
    with sqlite3.connect(store.path) as conn:
        return conn.execute("SELECT seq FROM tinystore_jobs WHERE queue = ? AND id = ?", (queue, id)).fetchone()[0]


def test_the_newest_job_leaving_does_not_free_its_seq(store: tinystore.Store) -> None:
    q = store.queue("q")
    q.work(lambda payload, run: None)
    newest = q.add("a", id="a")
    seq = seq_of(store, "q", newest.id)
    store.run_until_idle()  # done and removed: no job is kept any more
    assert q.get("a") is None
    assert seq_of(store, "q", q.add("b", id="b").id) > seq


def test_a_cancelled_or_expired_newest_job_does_not_free_its_seq(store: tinystore.Store, clock: Any) -> None:
    q = store.queue("q", dedupe="1m")
    q.work(lambda payload, run: None)
    q.add("a", id="a")
    seq_a = seq_of(store, "q", "a")
    assert q.cancel("a")
    q.add("b", id="b")
    seq_b = seq_of(store, "q", "b")
    assert seq_b > seq_a
    store.run_until_idle()  # b is done and kept for a minute (dedupe)
    clock.advance(120)
    assert store.maintain()["removed"] == 1
    assert seq_of(store, "q", q.add("c", id="c").id) > seq_b


def test_seqs_of_a_batch_follow_the_jobs_kept_and_a_reopened_store_goes_on(open_store: Any) -> None:
    store = open_store()
    q = store.queue("q")
    q.add_many(["x", "y"])
    q.add_many([tinystore.Job("z", id="z")])
    first = seq_of(store, "q", "z")
    store.close()
    again = open_store()
    assert seq_of(again, "q", again.queue("q").add("w", id="w").id) == first + 1
