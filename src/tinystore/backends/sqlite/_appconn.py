"""The application's own connection to the store file: sqlite3, or SQLAlchemy's Connection or Session."""

from __future__ import annotations

import os
import sqlite3
from typing import Any

from ..._errors import InvalidArgument
from .._appconn import driver_connection


def sqlite_connection_of(conn: Any, queue: str) -> sqlite3.Connection:
    """The sqlite3 connection behind ``conn``: itself, or what a SQLAlchemy Connection or Session wraps."""
    dbapi = driver_connection(conn)
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
