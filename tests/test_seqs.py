"""A job's seq names it in leases, steps and watches: it is never handed out twice.

Adds write no counter: a new seq is above every kept job and above the floor
that jobs leaving raise. These tests read the seqs from the file itself.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from typing import Any

import tinystore


def seq_of(store: tinystore.Store, queue: str, id: str) -> int:
    with sqlite3.connect(store.location) as conn:
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


def test_an_add_in_an_applications_transaction_takes_the_write_lock_before_it_reads_a_seq(
        store: tinystore.Store) -> None:
    # A plain sqlite3 connection begins its transaction only at its first write: a seq read before
    # that could be handed out by another connection meanwhile. The add's first statement must write.
    seen: list[tuple[str, bool]] = []

    class Recording(sqlite3.Connection):
        def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
            cursor = super().execute(sql, *args)
            if "tinystore_" in sql:
                seen.append((sql.split()[0].upper(), self.in_transaction))
            return cursor

    app = sqlite3.connect(store.location, factory=Recording)
    try:
        store.queue("q").add("mine", id="mine", conn=app)
        app.commit()
    finally:
        app.close()
    first, holds_lock = seen[0]
    assert first in ("INSERT", "UPDATE", "DELETE") and holds_lock


def test_a_store_from_before_the_floor_goes_on_above_the_last_seq_it_handed_out(store_path: str) -> None:
    # A file written by a version that kept the last seq handed out (migration 001 only): its jobs are
    # gone, and the next seq must still come after every one it handed out.
    from tinystore.backends.sqlite import _statements
    from tinystore.backends.sqlite._sql import MIGRATIONS

    with closing(sqlite3.connect(store_path, isolation_level=None)) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE tinystore_migrations (version INTEGER PRIMARY KEY, applied_at TEXT)")
        for statement in _statements(dict(MIGRATIONS)[1]):
            conn.execute(statement)
        conn.execute("INSERT INTO tinystore_migrations (version) VALUES (1)")
        conn.execute("UPDATE tinystore_sequence SET last = 50")
    store = tinystore.open(store_path)
    try:
        assert seq_of(store, "q", store.queue("q").add("next", id="next").id) == 51
    finally:
        store.close()
