"""A store file that exists already, for an operator's command: read-only connections, and whether a path
is a SQLite file holding tinystore's tables, told before anything writes a byte to it.

``tinystore.open`` makes a store of a new or empty file; an operator's
command (``tinystore status FILE``...) never does: a typo in FILE must not
become an empty store, nor a file of another application a store.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from ..._errors import InvalidArgument
from ._connection import SQLITE_HEADER
from ._damage import damaged, is_damage
from ._sql import MIGRATIONS


def check_existing(path: str) -> None:
    """Refuse a path that is not an existing, readable file that begins as a SQLite database does."""
    if not os.path.exists(path):
        raise InvalidArgument(f"no such file: {path}")
    if os.path.isdir(path):
        raise InvalidArgument(f"{path} is a directory, not a store file")
    try:
        with open(path, "rb") as f:
            header = f.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise InvalidArgument(f"cannot read {path}: {exc.strerror}") from None
    if header != SQLITE_HEADER:
        raise InvalidArgument(f"{path} is not a tinystore store: it is not a SQLite database")


def check_store(path: str) -> None:
    """Refuse a path that is not an existing SQLite file holding tinystore's tables; damage met while
    reading its schema is ``StoreCorrupt``. Reads the file read-only."""
    check_existing(path)
    try:
        conn = connect_read_only(path)
        try:
            found = has_tables(conn)
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        if is_damage(exc):
            raise damaged(os.path.abspath(path), exc)
        raise InvalidArgument(f"{path} is damaged or not a SQLite database: {exc}") from None
    if not found:
        raise InvalidArgument(f"{path} is not a tinystore store: it has no tinystore tables")


def has_tables(conn: sqlite3.Connection) -> bool:
    """Whether the database holds tinystore's tables (of any version)."""
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table'"
                        " AND name = 'tinystore_migrations'").fetchone() is not None


def is_current(conn: sqlite3.Connection) -> bool:
    """Whether the store's tables are those of this version: every migration applied."""
    done = {v for (v,) in conn.execute("SELECT version FROM tinystore_migrations")}
    return all(version in done for version, _ in MIGRATIONS)


def connect_read_only(path: str) -> sqlite3.Connection:
    """One read-only connection to the SQLite file at ``path`` (which exists): never writes, never creates.

    A store that was closed cleanly in a folder this process may not write
    has no ``-wal`` file, and SQLite cannot make the ``-shm`` file a
    read-only connection needs: then the file is read as immutable, which is
    safe because no process can be changing it without a ``-wal`` beside it.
    """
    uri = Path(path).resolve().as_uri()
    conn = sqlite3.connect(uri + "?mode=ro", uri=True, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError as exc:
        conn.close()
        if exc.sqlite_errorcode != getattr(sqlite3, "SQLITE_READONLY_DIRECTORY", 1544) or \
                os.path.exists(path + "-wal"):
            raise
    except BaseException:
        conn.close()
        raise
    # No -wal, and no -shm can be made: nothing can be changing the file, so it is read as it is.
    return sqlite3.connect(uri + "?mode=ro&immutable=1", uri=True, isolation_level=None, check_same_thread=False)
