"""``store.transaction()``: the application's SQL and its jobs in one commit (JOB-02)."""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from ._errors import Closed


class Transaction:
    """One open write transaction on the store's database.

    ``execute`` and ``executemany`` run the application's SQL in it, ``query``
    returns rows, and ``queue.add(..., tx=tx)`` adds a job in it. Leaving the
    ``with`` block commits all of it; an exception rolls all of it back.
    """

    def __init__(self, connection: Any, backend: Any):
        self.connection = connection
        self.backend = backend
        self.closed = False

    def _conn(self) -> Any:
        if self.closed:
            raise Closed("this transaction has ended")
        return self.connection

    def execute(self, sql: str, params: Sequence[Any] | dict = ()) -> int:
        """Run one statement; return the number of rows it changed."""
        return self._conn().execute(sql, params).rowcount

    def executemany(self, sql: str, rows: Iterable[Sequence[Any] | dict]) -> int:
        """Run one statement once per row of parameters; return the rows changed."""
        return self._conn().executemany(sql, rows).rowcount

    def query(self, sql: str, params: Sequence[Any] | dict = ()) -> list[tuple]:
        """Run one query; return its rows."""
        return self._conn().execute(sql, params).fetchall()
