"""The application's own async connection as ``conn=`` takes it from an ``_async`` call.

An add in the application's transaction is written once, for a sync
connection (``Backend.adopt``); an async connection is handed to it as the
sync connection of the same session, on a thread that is not the loop's,
while the awaiting task holds the connection:

- psycopg's ``AsyncConnection``: a sync ``psycopg.Connection`` over the same
  libpq connection (so the same open transaction), run in a thread; it
  prepares no statements, whose names could meet the async connection's.
- aiosqlite's ``Connection``: its own sqlite3 connection, on aiosqlite's
  own thread, where every call of that connection runs.
- SQLAlchemy's ``AsyncConnection`` and ``AsyncSession``: the driver
  connection behind them (one of the two above), after its transaction is
  begun, as ``join_transaction`` does for a sync one.

asyncpg speaks its own protocol, with no sync connection over the same
session: it is refused, naming the drivers that work.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any, Callable, TypeVar

from .._errors import InvalidArgument

T = TypeVar("T")

_twins: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()  # psycopg: async -> sync


def _kind(conn: Any) -> str:
    cls = type(conn)
    return f"{cls.__module__}.{cls.__qualname__}"


def is_async_connection(conn: Any) -> bool:
    """Whether ``conn`` is an async connection (or SQLAlchemy's async wrapper of one)."""
    kind = _kind(conn)
    return (kind.startswith(("sqlalchemy.ext.asyncio.", "aiosqlite.", "asyncpg."))
            or kind == "psycopg.AsyncConnection" or kind.startswith("psycopg.connection_async."))


async def run_on_async_connection(conn: Any, queue: str, fn: Callable[[Any], T]) -> T:
    """``fn(sync)``, where ``sync`` is the sync connection of ``conn``'s session, in its open transaction."""
    driver = await _driver_of(conn, queue)
    kind = _kind(driver)
    if kind.startswith("aiosqlite."):
        # aiosqlite runs every call of its sqlite3 connection on its own thread: fn runs there too.
        answer: T = await driver._execute(fn, driver._conn)
        return answer
    if kind.startswith("psycopg."):
        async with driver.lock:  # nothing else of the application uses the session meanwhile
            return await asyncio.to_thread(fn, _sync_twin(driver))
    if kind.startswith("asyncpg."):
        raise InvalidArgument("conn= is an asyncpg connection, which tinystore cannot add jobs through: use "
                              "psycopg's AsyncConnection, or SQLAlchemy with postgresql+psycopg://", queue=queue)
    raise InvalidArgument(f"conn= must be psycopg's AsyncConnection, an aiosqlite connection, or SQLAlchemy's "
                          f"AsyncConnection or AsyncSession on one, not {type(conn).__name__}", queue=queue)


async def _driver_of(conn: Any, queue: str) -> Any:
    """The driver's connection behind ``conn``, its SQLAlchemy transaction begun where it is SQLAlchemy's."""
    kind = _kind(conn)
    if not kind.startswith("sqlalchemy.ext.asyncio."):
        return conn
    if hasattr(conn, "get_bind"):  # an AsyncSession: asking for its connection begins its transaction
        conn = await conn.connection()
    if not hasattr(conn, "get_raw_connection"):
        raise InvalidArgument(f"conn= must be SQLAlchemy's AsyncConnection or AsyncSession, not "
                              f"{type(conn).__name__}", queue=queue)
    if not conn.in_transaction():  # else SQLAlchemy's commit would not commit the job (see join_transaction)
        await conn.begin()
    return (await conn.get_raw_connection()).driver_connection


def _sync_twin(conn: Any) -> Any:
    """A sync psycopg connection over ``conn``'s libpq connection: the same session and transaction."""
    import psycopg
    from psycopg import pq

    twin = _twins.get(conn)
    if twin is None:
        twin = _twins[conn] = psycopg.Connection(conn.pgconn)
        twin.prepare_threshold = None
    if conn.pgconn.transaction_status == pq.TransactionStatus.IDLE and twin.autocommit != conn.autocommit:
        twin.autocommit = conn.autocommit  # outside a transaction, an add in autocommit commits by itself
    return twin
