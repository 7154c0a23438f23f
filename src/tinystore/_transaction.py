"""``store.transaction()`` and ``transaction_async()``, and the application's own connection: its SQL and
its jobs in one commit (JOB-02)."""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Iterable, Optional, Sequence, TypeVar

from ._errors import Closed

T = TypeVar("T")


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


class AsyncTransaction:
    """One open write transaction of ``store.transaction_async()``: ``Transaction``'s calls, awaited.

    Each call runs on the transaction's own thread (see ``_lanes``), in the
    order made, while the loop runs other tasks. ``queue.add_async(...,
    tx=tx)`` adds a job in it. Leaving the ``async with`` block commits all
    of it; an exception, or the task's cancellation, rolls all of it back.
    """

    def __init__(self, tx: Transaction, call: Callable[..., Awaitable[Any]]):
        self._tx = tx
        self._call = call  # runs a function on the transaction's thread

    @property
    def closed(self) -> bool:
        """Whether the transaction has ended: committed or rolled back."""
        return self._tx.closed

    async def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> int:
        """Run one statement; return the number of rows it changed."""
        changed: int = await self._call(self._tx.execute, sql, params)
        return changed

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any] | dict[str, Any]]) -> int:
        """Run one statement once per row of parameters; return the rows changed."""
        changed: int = await self._call(self._tx.executemany, sql, list(rows))
        return changed

    async def query(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[tuple[Any, ...]]:
        """Run one query; return its rows."""
        rows: list[tuple[Any, ...]] = await self._call(self._tx.query, sql, params)
        return rows

    async def run_sync(self, fn: Callable[[Transaction], T]) -> T:
        """``fn(tx)`` with the sync ``Transaction`` of the same transaction, on its thread: sync code
        (``queue.add(..., tx=tx)``, a helper that takes a ``Transaction``) in this transaction."""
        answer: T = await self._call(fn, self._tx)
        return answer
