"""A store file damaged under its jobs: a poison row fails its own job, and damage is never silent.

The damage is real: bytes changed in the store file itself while no process
has it open, or text that is not UTF-8 written into a row through a raw
sqlite3 connection, as a failing disk or another program could leave it.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import struct
import subprocess
from pathlib import Path

import pytest

import tinystore
from helpers import run_child
from tinystore.testing import FakeClock

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


def middle_leaf(path: str, name: str) -> tuple[int, int]:
    """Where the middle one of a table's or an index's leaf pages (in the order of their keys) begins in
    the file, and the page size."""
    conn = sqlite3.connect(path)
    try:
        leaves = [n for (n,) in conn.execute("SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' "
                                             "ORDER BY path", (name,))]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    finally:
        conn.close()
    assert len(leaves) >= 3
    return (leaves[len(leaves) // 2] - 1) * size, size


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


DUE_AT = 1_700_000_000.5  # every job is added at this time of a fake clock: due now, and the file's bytes the same each run
DRAIN = """
import sys, tinystore
ran = []
with tinystore.open(sys.argv[1]) as store:
    q = store.queue("mail")
    q.work(lambda payload, run: ran.append(payload["n"]))
    try:
        store.run_until_idle()
        print("idle")
    except tinystore.StoreCorrupt as exc:
        print("StoreCorrupt:", exc)
    print("ran", len(ran))
"""


def due_jobs(path: str, count: int, **options) -> None:
    """``count`` jobs of queue "mail", due, added at DUE_AT; the store closed."""
    grp = "one" if "group_concurrency" in options else None
    with tinystore.open(path, clock=FakeClock(DUE_AT)) as store:
        q = store.queue("mail", **options)
        q.add_many([tinystore.Job({"n": n}, id=f"j{n}", group=grp) for n in range(count)])


@pytest.mark.parametrize("options", [{}, {"group_concurrency": 1}, {"group_concurrency": None}],
                         ids=["ungrouped", "a-group-one-at-a-time", "a-group-without-limit"])
def test_a_job_the_due_index_lists_that_the_damaged_table_no_longer_yields_stops_the_claims_with_StoreCorrupt(
        store_path, options):
    # A bit flipped in the seq of a row of the jobs table's middle leaf page: the due index still lists
    # the job, the table no longer yields it, and every claim picked it again, at full speed, for ever.
    due_jobs(store_path, 1000, **options)
    start, _ = middle_leaf(store_path, "tinystore_jobs")
    with open(store_path, "rb") as f:
        f.seek(start)
        header = f.read(8)
        assert header[0] == 0x0D  # a leaf of a table: its header, then a pointer to each row's cell
        f.seek(start + 8 + 2 * (struct.unpack(">H", header[3:5])[0] // 2))
        cell = start + struct.unpack(">H", f.read(2))[0]
        f.seek(cell)
        size, seq_high = f.read(2)
    assert size < 0x80 and 0x80 < seq_high < 0x88  # one byte of size, then a seq of two bytes, under 1024
    flip(store_path, cell + 1, 0x40)  # the seq is 8192 more: out of order, and no job's

    try:
        done = run_child(DRAIN, store_path, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("run_until_idle was still claiming after 60 s: it picks a job it cannot take, for ever")
    assert done.returncode == 0, done.stderr
    said, ran = done.stdout.splitlines()
    assert said.startswith("StoreCorrupt: ") and "queue 'mail'" in said
    # Ungrouped jobs are picked from the due index by priority alone: the take finds the job missing. A
    # group's due jobs are ordered by priority, which the pick reads from the row: SQLite finds it missing.
    assert ("lists jobs as waiting that its jobs table does not hold as waiting" in said
            or "database disk image is malformed" in said and options)
    assert f"run `tinystore check {store_path}`" in said
    # Ungrouped, the jobs before the damaged page ran; a group's pick sorts its due jobs by priority and
    # meets the damage at once
    assert (0 if options else 1) <= int(ran.split()[1]) < 1000


def test_maintenance_checks_tinystores_tables_once_a_day_and_logs_damage_that_hides_waiting_jobs(
        store_path, caplog):
    # A bit of one due job's time flipped in the due index: that job is due in 2^64 times as long, the
    # claims' scan of the index stops at it, and the jobs after it wait for ever with no error anywhere.
    due_jobs(store_path, 1000)
    start, size = middle_leaf(store_path, "tinystore_jobs_due_priority")  # the index claims read
    page = Path(store_path).read_bytes()[start:start + size]
    at = struct.pack(">d", DUE_AT)
    assert page.count(at) > 10
    flip(store_path, start + page.index(at), 0x10)

    clock = FakeClock(DUE_AT + 60)
    with tinystore.open(store_path, clock=clock) as store:
        q = store.queue("mail")
        ran = run_all(store, q)
        assert 0 < len(ran) < 1000 and store.stats()["mail"]["waiting"] == 1000 - len(ran)  # silently hidden

        def damage_logged() -> list[str]:
            found = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
            caplog.clear()
            return found

        with caplog.at_level(logging.INFO, logger="tinystore.store"):
            store.maintain()
            logged = damage_logged()
            assert len(logged) == 1
            assert f"the store {store.location} is damaged" in logged[0]
            assert "missing from index tinystore_jobs_due_priority" in logged[0]
            assert f"run `tinystore check {store.location}`" in logged[0]

            clock.advance("23h")
            store.maintain()
            assert damage_logged() == []  # once a day
            clock.advance("1h")
            store.maintain()
            assert len(damage_logged()) == 1

    with tinystore.open(store_path, clock=clock) as store:  # opened again, as by another process: checked today
        with caplog.at_level(logging.INFO, logger="tinystore.store"):
            store.maintain()
            assert damage_logged() == []


def test_the_daily_check_of_a_whole_store_logs_no_damage(store_path, caplog):
    due_jobs(store_path, 1000)
    with tinystore.open(store_path, clock=FakeClock(DUE_AT)) as store:
        with caplog.at_level(logging.INFO, logger="tinystore.store"):
            store.maintain()
    said = [r.getMessage() for r in caplog.records if r.name == "tinystore.store"]
    assert any("found no damage" in line for line in said)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
