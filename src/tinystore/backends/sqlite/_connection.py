"""Connections to a store file: the pragmas every connection needs, and waiting out SQLITE_BUSY."""

from __future__ import annotations

import sqlite3
import time

from ..._errors import StoreCorrupt

SQLITE_HEADER = b"SQLite format 3\x00"
BUSY_TIMEOUT = 5.0  # SQLite's own busy handler waits this long before we retry


def connect(path: str, synchronous: str) -> sqlite3.Connection:
    """A connection in autocommit mode: tinystore issues BEGIN and COMMIT itself."""
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT, isolation_level=None,
                           check_same_thread=False, cached_statements=256)
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    return conn


def is_busy(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and (
        "locked" in str(exc) or "busy" in str(exc))


def begin_immediate(conn: sqlite3.Connection) -> None:
    """Take the write lock up front, waiting as long as another writer holds it.

    Users never see "database is locked": a connection whose busy handler
    gives up (after BUSY_TIMEOUT, or at once for the writer, see
    ``poll_for_the_write_lock``) tries again here, in steps of 0.1 to 2 ms.
    """
    pause = 0.0001
    while True:
        try:
            conn.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if not is_busy(exc):
                raise
        time.sleep(pause)
        pause = min(2 * pause, 0.002)


def poll_for_the_write_lock(conn: sqlite3.Connection) -> None:
    """Let ``begin_immediate`` wait for the write lock on this connection, not SQLite's busy handler.

    The busy handler sleeps 1, 2, 5, 10... ms between tries: while another
    process holds the lock for a fraction of a millisecond per transaction,
    a worker would spend most of its time asleep. The writer runs nothing
    that waits for a lock but BEGIN IMMEDIATE.
    """
    conn.execute("PRAGMA busy_timeout = 0")


def check_file(path: str) -> None:
    """Refuse a file that is not a SQLite database, before anything writes to it."""
    try:
        with open(path, "rb") as f:
            header = f.read(len(SQLITE_HEADER))
    except FileNotFoundError:
        return
    except IsADirectoryError:
        raise StoreCorrupt(f"{path} is a directory, not a SQLite database") from None
    if header and header != SQLITE_HEADER:
        raise StoreCorrupt(f"{path} is not a SQLite database: its header is {header[:16]!r}")


def corrupt(path: str, exc: sqlite3.DatabaseError) -> StoreCorrupt:
    return StoreCorrupt(f"{path} is damaged or not a SQLite database: {exc}")
