"""The store's own failures reach callers as tinystore errors that say what happened and what to do.

Real faults: a small tmpfs of the test's own filled with a file (the disk is
really full), and a store file whose pages are overwritten while it is open
(it is really damaged). Nothing reaches a caller as a raw sqlite3.Error.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Iterator

import pytest

import tinystore
from test_resilience import Disk, mounted_disk


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Disk]:
    yield from mounted_disk(tmp_path / "disk", size="4M")


def assert_no_space(error: BaseException) -> None:
    assert isinstance(error, tinystore.DiskFull), repr(error)
    assert isinstance(error, tinystore.Unavailable) and not isinstance(error, sqlite3.Error)
    text = str(error)
    assert "no space is left on the device" in text and "nothing was written" in text, text
    assert "free some space" in text, text


def test_add_on_a_full_disk_raises_DiskFull_writes_nothing_and_adds_once_space_is_freed(disk: Disk) -> None:
    store = tinystore.open(disk.root / "store.db")
    emails = store.queue("emails")
    emails.add({"n": 0}, id="before")
    disk.fill()
    try:
        with pytest.raises(tinystore.DiskFull) as raised:
            emails.add({"n": 1}, id="during")
        assert_no_space(raised.value)
        with pytest.raises(tinystore.DiskFull):
            emails.add_many([{"n": n} for n in range(50)])
        assert emails.get("before").state == "waiting"  # reads go on
        assert emails.get("during") is None
    finally:
        disk.free()
    assert emails.add({"n": 1}, id="during").added
    assert [j.id for j in emails.jobs()] == ["before", "during"]
    store.close()


def test_a_transaction_on_a_full_disk_raises_DiskFull_and_commits_none_of_its_rows(disk: Disk) -> None:
    store = tinystore.open(disk.root / "store.db")
    store.execute("CREATE TABLE messages (id INTEGER PRIMARY KEY, body TEXT)")
    replies = store.queue("replies")
    disk.fill()
    try:
        with pytest.raises(tinystore.DiskFull) as raised:
            with store.transaction() as tx:
                tx.execute("INSERT INTO messages (body) VALUES (?)", ("x" * 20000,))
                replies.add({"message": 1}, id="reply:1", tx=tx)
        assert_no_space(raised.value)
    finally:
        disk.free()
    assert store.query("SELECT count(*) FROM messages") == [(0,)]
    assert replies.get("reply:1") is None
    with store.transaction() as tx:  # the connection is fine again
        tx.execute("INSERT INTO messages (body) VALUES ('hello')")
    assert store.query("SELECT count(*) FROM messages") == [(1,)]
    store.close()


def test_open_on_a_full_disk_says_that_no_space_is_left_not_that_the_file_is_damaged(disk: Disk) -> None:
    tinystore.open(disk.root / "kept.db").close()
    disk.fill()
    try:
        for name in ("kept.db", "new.db"):  # a store to register in, a store to make
            with pytest.raises(tinystore.Error) as raised:
                tinystore.open(disk.root / name)
            assert_no_space(raised.value)
            assert not isinstance(raised.value, tinystore.StoreCorrupt)
            assert "damaged" not in str(raised.value)
        assert not (disk.root / "new.db").exists(), "a refused open leaves no empty store file behind"
    finally:
        disk.free()
    tinystore.open(disk.root / "kept.db").close()


def test_a_store_damaged_while_open_raises_StoreCorrupt_from_get_and_add_saying_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    with tinystore.open(path) as store:
        store.queue("emails").add_many([{"to": f"user{n}@example.com", "pad": "x" * 200} for n in range(300)])
    store = tinystore.open(path)
    emails = store.queue("emails")
    page = 4096
    size = os.path.getsize(path)
    with open(path, "r+b") as f:  # every page but the first, where the header and the schema begin
        for offset in range(page, size, page):
            f.seek(offset)
            f.write(b"\xff" * page)
    try:
        with pytest.raises(tinystore.StoreCorrupt) as raised:
            emails.get("anything")
        assert not isinstance(raised.value, sqlite3.Error)
        assert "is damaged" in str(raised.value) and "tinystore check" in str(raised.value)
        with pytest.raises(tinystore.StoreCorrupt):
            emails.add({"to": "ann@example.com"})
    finally:
        try:
            store.close()
        except tinystore.Error:
            pass  # recording that this process left needs the damaged pages too
