"""The application's own connection to the store file: sqlite3, or SQLAlchemy's Connection or Session."""

from __future__ import annotations

import os
import sqlite3
from typing import Any

from ..._errors import InvalidArgument


def sqlite_connection_of(conn: Any, queue: str) -> sqlite3.Connection:
    """The sqlite3 connection behind ``conn``: itself, or what a SQLAlchemy Connection or Session wraps."""
    if isinstance(conn, sqlite3.Connection):
        return conn
    if hasattr(conn, "get_bind") and hasattr(conn, "connection"):  # a SQLAlchemy Session
        conn = conn.connection()
    dbapi = getattr(getattr(conn, "connection", None), "driver_connection", None)  # a SQLAlchemy Connection
    if isinstance(dbapi, sqlite3.Connection):
        return dbapi
    raise InvalidArgument(f"conn= must be a sqlite3 connection or a SQLAlchemy Connection or Session on "
                          f"the store's file, not {type(conn).__name__}", queue=queue)


def check_same_file(conn: sqlite3.Connection, path: str, queue: str) -> None:
    """Refuse a connection to another file: its transaction would not hold the job."""
    files = [row[2] for row in conn.execute("PRAGMA database_list") if row[1] == "main"]
    if not files or not files[0] or not os.path.exists(files[0]) or not os.path.samefile(files[0], path):
        raise InvalidArgument(f"conn= is a connection to {files[0] if files else 'nothing'!r}, "
                              f"not to the store's file {path!r}", queue=queue)


def join_transaction(conn: Any) -> None:
    """Make a SQLAlchemy Connection count the job's insert as a statement of its own transaction.

    SQLAlchemy begins a transaction when it runs its first statement; an insert
    it did not run itself leaves it thinking none is open, so that its
    ``commit()`` would do nothing and the job would be rolled back when the
    connection goes back to the pool. A sqlite3 connection needs nothing.
    """
    in_transaction = getattr(conn, "in_transaction", None)
    if not isinstance(conn, sqlite3.Connection) and callable(in_transaction) and not in_transaction():
        conn.begin()
