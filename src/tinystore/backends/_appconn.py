"""The application's own connection as ``conn=`` takes it: a driver's, or SQLAlchemy's around one.

Each backend checks the driver connection's kind and database itself; what
SQLAlchemy needs is the same for every backend, and said here once.
"""

from __future__ import annotations

from typing import Any


def driver_connection(conn: Any) -> Any:
    """The driver's connection behind ``conn``: what a SQLAlchemy Connection or Session wraps, else
    ``conn`` itself (the backend then checks that it is one of its driver's)."""
    if hasattr(conn, "get_bind") and hasattr(conn, "connection"):  # a SQLAlchemy Session
        conn = conn.connection()
    return getattr(getattr(conn, "connection", None), "driver_connection", None) or conn


def join_transaction(conn: Any) -> None:
    """Make a SQLAlchemy Connection count the job's insert as a statement of its own transaction.

    SQLAlchemy begins a transaction when it runs its first statement; an insert
    it did not run itself leaves it thinking none is open, so that its
    ``commit()`` would do nothing and the job would be rolled back when the
    connection goes back to the pool. A Session began one when it was asked for
    its connection; a driver's connection needs nothing (its ``in_transaction``,
    where it has one, is not a method).
    """
    in_transaction = getattr(conn, "in_transaction", None)
    if callable(in_transaction) and not in_transaction():
        conn.begin()
