"""Reading a store without writing a byte: for the commands that only read (status, jobs, show, check).

``tinystore.open`` writes as it opens (this process's registration, the
leases of processes that died), so it cannot open a store that this process
may not write: a file or folder that is read-only, a read-only mount, a copy
being looked at. These commands read through one read-only SQLite connection
instead, with the SQLite backend's own read statements and the store's own
``stats`` and ``Queue`` reads; anything that would write raises.

A store that was closed cleanly in a folder this process may not write has
no ``-wal`` file, and SQLite cannot make the ``-shm`` file a read-only
connection needs: then the file is read as immutable, which is safe because
no process can be changing it without a ``-wal`` beside it.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import tinystore
from tinystore import Clock, Error, Store
from tinystore.backends.sqlite._damage import damaged, is_damage
from tinystore.backends.sqlite import SQLiteBackend
from tinystore.backends.sqlite._sql import MIGRATIONS


def connect_read_only(path: str) -> sqlite3.Connection:
    """One read-only connection to the SQLite file at ``path`` (which exists): never writes, never creates."""
    uri = Path(path).resolve().as_uri()
    try:
        conn = sqlite3.connect(uri + "?mode=ro", uri=True, isolation_level=None, check_same_thread=False)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError as exc:
        if exc.sqlite_errorcode != getattr(sqlite3, "SQLITE_READONLY_DIRECTORY", 1544) or \
                os.path.exists(path + "-wal"):
            raise
    # No -wal, and no -shm can be made: nothing can be changing the file, so it is read as it is.
    conn = sqlite3.connect(uri + "?mode=ro&immutable=1", uri=True, isolation_level=None, check_same_thread=False)
    return conn


def is_current(conn: sqlite3.Connection) -> bool:
    """Whether the store's tables are those of this version: every migration applied."""
    done = {v for (v,) in conn.execute("SELECT version FROM tinystore_migrations")}
    return all(version in done for version, _ in MIGRATIONS)


class ReadOnlyBackend(SQLiteBackend):
    """The SQLite backend's reads on one read-only connection; no writer, no registration.

    It keeps nothing of the backend's own state but its path: every read of
    the backend goes through ``_read``, which is this class's own.
    """

    def __init__(self, path: str, conn: sqlite3.Connection):  # the backend's own __init__ writes
        self.path = os.path.abspath(path)
        self._conn = conn

    def _thread_connection(self) -> sqlite3.Connection:
        return self._conn

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """The connection, in one read transaction (one snapshot of the file)."""
        self._conn.execute("BEGIN")
        try:
            yield self._conn
        finally:
            self._conn.execute("COMMIT")

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        raise Error(f"the store {self.path} is open read-only here: nothing can be written")

    def changed(self) -> bool:
        return False

    def close(self) -> None:
        self._conn.close()


class ReadOnlyStore(Store):
    """A Store whose reads (stats, queues, a queue's get and jobs) work and whose writes raise."""

    def __init__(self, path: str, conn: sqlite3.Connection):  # Store's own __init__ registers this process
        self.clock = Clock()
        self._backend = ReadOnlyBackend(path, conn)
        self._owner = None
        self._queues = {}
        self._lock = threading.Lock()
        self._closed = False

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._backend.close()


def open_read_only(path: str) -> Store:
    """The store at ``path`` for reading only; a damaged file is a tinystore.StoreCorrupt."""
    conn = connect_read_only(path)
    try:
        current = is_current(conn)
    except sqlite3.DatabaseError as exc:
        conn.close()
        if is_damage(exc):
            raise damaged(os.path.abspath(path), exc) from exc
        raise
    if not current:  # an earlier version's tables: tinystore.open migrates them first
        conn.close()
        return tinystore.open(path)
    return ReadOnlyStore(path, conn)
