"""``store.transaction()``, and the application's own connection: its SQL and its jobs in one commit (JOB-02)."""

from __future__ import annotations

from typing import Any, Iterable, Optional, Sequence

from ._errors import Closed


class Transaction:
    """One open write transaction on the store's database.

    ``execute`` and ``executemany`` run the application's SQL in it, ``query``
    returns rows, and ``queue.add(..., tx=tx)`` adds a job in it. Leaving the
    ``with`` block commits all of it; an exception rolls all of it back. The
    SQL is the database's own (``?`` placeholders on SQLite), and so are the
    errors about it.
    """

    def __init__(self, connection: Any, told: Optional[set[str]] = None):
        self.connection = connection  # the driver's connection the statements run on
        # The queues jobs were added to, told to this process's workers once it commits; None for the
        # application's own connection, whose commit the store cannot see: other connections hear of it.
        self.told = told
        self.closed = False

    def _conn(self) -> Any:
        if self.closed:
            raise Closed("this transaction has ended")
        return self.connection

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> int:
        """Run one statement; return the number of rows it changed."""
        changed: int = self._conn().execute(sql, params).rowcount
        return changed

    def executemany(self, sql: str, rows: Iterable[Sequence[Any] | dict[str, Any]]) -> int:
        """Run one statement once per row of parameters; return the rows changed."""
        changed: int = self._conn().executemany(sql, rows).rowcount
        return changed

    def query(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[tuple[Any, ...]]:
        """Run one query; return its rows."""
        rows: list[tuple[Any, ...]] = self._conn().execute(sql, params).fetchall()
        return rows
