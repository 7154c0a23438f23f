"""A store file damaged under its jobs: a poison row fails its own job, and damage is never silent.

The damage is real: bytes changed in the store file itself while no process
has it open, or text that is not UTF-8 written into a row through a raw
sqlite3 connection, as a failing disk or another program could leave it.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

import tinystore

MARK = b"POISON-PAYLOAD"


def page_of(path: str, table: str) -> tuple[int, int]:
    """Where a table's first page begins in the file, and the page size."""
    conn = sqlite3.connect(path)
    try:
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    finally:
        conn.close()
    return (root - 1) * size, size


def flip(path: str, offset: int, mask: int) -> None:
    """Flip the bits of ``mask`` in the byte at ``offset`` of the file (no process has it open)."""
    assert not os.path.exists(path + "-wal") or os.path.getsize(path + "-wal") == 0
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([byte ^ mask]))


def six_jobs(path: str, poison: int, **options) -> None:
    """Six jobs in queue "mail", job j{poison} with a payload that holds MARK; the store closed."""
    with tinystore.open(path) as store:
        q = store.queue("mail", **options)
        for n in range(6):
            q.add({"n": n, "text": MARK.decode() if n == poison else "fine"}, id=f"j{n}",
                  group="one" if options.get("group_concurrency") else None)


def run_all(store: tinystore.Store, q: tinystore.Queue) -> list[int]:
    ran: list[int] = []
    q.work(lambda payload, run: ran.append(payload["n"]))
    store.run_until_idle()
    return sorted(ran)


@pytest.mark.parametrize("options", [{}, {"group_concurrency": 1}], ids=["ungrouped", "one-group"])
def test_bits_flipped_in_a_payload_in_the_file_fail_that_job_for_good_and_the_queue_runs_the_others(
        store_path, options):
    six_jobs(store_path, poison=2, **options)
    data = Path(store_path).read_bytes()
    assert data.count(MARK) == 1
    flip(store_path, data.index(MARK), 0xAF)  # "P" becomes 0xff: the payload is no longer UTF-8 text

    with tinystore.open(store_path) as store:
        q = store.queue("mail")
        assert run_all(store, q) == [0, 1, 3, 4, 5]
        bad = q.get("j2")
        assert bad.state == "failed" and bad.attempt == 1 and bad.payload is None
        assert "its payload could not be read" in bad.error and "not UTF-8" in bad.error
        assert "tinystore check" in bad.error
        assert [(j.id, j.state) for j in q.jobs()] == [("j2", "failed")]
        assert store.stats()["mail"]["failed_last_minute"] == 1

    with tinystore.open(store_path) as store:  # and after reopening, the same
        q = store.queue("mail")
        assert q.get("j2").state == "failed"
        q.add({"n": 9}, id="j9")
        assert run_all(store, q) == [9]


def test_a_payload_made_invalid_utf8_through_sqlite_fails_its_own_job_not_every_claim(store_path):
    six_jobs(store_path, poison=4)
    conn = sqlite3.connect(store_path)
    with conn:
        conn.execute("UPDATE tinystore_jobs SET payload = CAST(x'ff' AS TEXT) WHERE id = 'j4'")
    conn.close()
    with tinystore.open(store_path) as store:
        q = store.queue("mail")
        assert q.get("j4").payload is None  # get and jobs read the row, too
        assert len(q.jobs()) == 6
        assert run_all(store, q) == [0, 1, 2, 3, 5]
        assert q.get("j4").state == "failed" and "its payload could not be read" in q.get("j4").error


def test_a_payload_that_is_no_longer_json_fails_its_own_job_at_its_claim(store_path):
    six_jobs(store_path, poison=1)
    data = Path(store_path).read_bytes()
    flip(store_path, data.index(MARK) - 2, ord(":") ^ ord(";"))  # {"n":1,"text":"POISON..."} loses its ':'
    with tinystore.open(store_path) as store:
        q = store.queue("mail")
        assert run_all(store, q) == [0, 2, 3, 4, 5]
        assert q.get("j1").state == "failed" and "it is not JSON" in q.get("j1").error


def test_damage_that_sqlite_meets_while_reading_is_StoreCorrupt_saying_to_run_tinystore_check(store_path):
    six_jobs(store_path, poison=0)
    start, _ = page_of(store_path, "tinystore_jobs")
    flip(store_path, start + 3, 0xFF)  # the count of cells of the jobs' page: now past its end
    flip(store_path, start + 4, 0xFF)
    with tinystore.open(store_path) as store:  # opening reads no job: it succeeds
        q = store.queue("mail")
        for read in (lambda: q.get("j1"), q.jobs, lambda: q.add({}, id="new"), lambda: q.cancel("j1"),
                     lambda: q.retry("j1")):
            with pytest.raises(tinystore.StoreCorrupt) as caught:
                read()
            assert f"run `tinystore check {store.location}`" in str(caught.value)
            assert caught.value.queue == "mail"
