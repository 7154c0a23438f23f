"""Connections to the server, and the server's errors as tinystore's.

Every connection of the backend (the writer's, the keeper's, the readers'
pool) is made here, with the session settings durability and lock_timeout
ask for. A connection through a pooler in transaction mode (``Where.pooled``)
keeps no session state: nothing is prepared on it and nothing is SET for
its session; each transaction sets what it needs for itself (``begin``), as
its next transaction may be on another server connection, and the server
connection it had goes on to the pooler's next client.

Errors are translated at the boundary (``translated``): a server
that cannot be reached or refuses at open is a ``tinystore.Error`` naming
host, port and database (never the password); a connection lost or a server
restarting during work is ``Unavailable``, which background tasks retry;
a lock wait past ``lock_timeout`` is ``Locked``; a schema that does not hold
tinystore's tables as this version made them is ``StoreCorrupt``. The
application's own SQL keeps psycopg's errors (see ``is_connection_error``).
"""

from __future__ import annotations

import os
from typing import Any, Iterable, NoReturn, Optional, Sequence

import psycopg
from psycopg import errors as pe
from psycopg.conninfo import conninfo_to_dict

from ..._errors import DiskFull, Error, Locked, ReadOnly, StoreCorrupt, Unavailable
from .._targets import scrubbed

# SQLSTATEs of tinystore's own transactions that are tried again at once, inside the backend.
RETRIED = {"40P01", "40001"}  # deadlock detected, serialization failure
CONNECT_TIMEOUT = 10  # seconds to wait for the server at connect


class Where:
    """Where a store is: the server and database, for messages (never the password)."""

    def __init__(self, url: str, schema: str):
        self.schema = schema
        self.url = url
        try:
            params = conninfo_to_dict(url)
        except psycopg.Error as exc:
            from ..._errors import InvalidArgument
            self.password = None
            raise InvalidArgument(f"the PostgreSQL URL cannot be read: {self.scrub(str(exc))}") from None
        self.params = params
        self.pooled = False  # reached through a pooler in transaction mode (see behind_pooler)
        password = params.get("password")
        self.password = None if password is None else str(password)
        # As libpq reads them: the URL's, else its environment's (localhost, 5432, the user's name).
        self.host = str(params.get("host") or params.get("hostaddr") or os.environ.get("PGHOST") or "localhost")
        self.port = str(params.get("port") or os.environ.get("PGPORT") or "5432")
        self.user = params.get("user") or os.environ.get("PGUSER")
        self.dbname = str(params.get("dbname") or os.environ.get("PGDATABASE") or self.user or "")
        user = f"{self.user}@" if self.user else ""
        self.location = f"postgresql://{user}{self.host}:{self.port}/{self.dbname}"
        if schema != "tinystore":
            self.location += f" (schema {schema})"

    def connect_kwargs(self) -> dict[str, Any]:
        """What tinystore adds to the URL's own parameters: a connect timeout, and an application_name that
        names tinystore and the schema (for pg_stat_activity), where the URL gives none of its own."""
        kwargs: dict[str, Any] = {}
        if "connect_timeout" not in self.params:
            kwargs["connect_timeout"] = CONNECT_TIMEOUT
        if not any(key.startswith("keepalives") for key in self.params):  # this side notices a server gone
            kwargs.update(keepalives=1, keepalives_idle=10, keepalives_interval=5, keepalives_count=3)
        if "application_name" not in self.params:
            kwargs["application_name"] = f"tinystore {self.schema}"[:63]
        if self.pooled:  # psycopg prepares a statement on the server connection after its 5th run
            kwargs["prepare_threshold"] = None
        return kwargs

    def server(self) -> str:
        return f"the PostgreSQL server at {self.host}:{self.port}, database {self.dbname!r}"

    def scrub(self, text: str) -> str:
        """``text`` in one line, without the URL's password (as the URL, a token of it, or the bare word)."""
        return _scrub(scrubbed(text, self.url), self.password)


def _scrub(text: str, password: Optional[str]) -> str:
    if password:
        text = text.replace(str(password), "***")
    return text.strip().splitlines()[0] if text.strip() else text


def dial(where: Where, *, opening: bool = False) -> psycopg.Connection:
    """A connection in autocommit, without the store's settings; a failure as a tinystore error."""
    try:
        return psycopg.connect(where.url, autocommit=True, **where.connect_kwargs())
    except psycopg.Error as exc:
        reason = where.scrub(str(exc))
        kind = Error if opening else Unavailable
        raise kind(f"cannot connect to {where.server()}: {reason}") from None


def connect(where: Where, durability: str, lock_timeout: float, *, opening: bool = False) -> psycopg.Connection:
    """A connection in autocommit with the store's session settings (none through a pooler)."""
    conn = dial(where, opening=opening)
    try:
        configure(conn, durability, lock_timeout, where.pooled)
    except psycopg.Error as exc:
        conn.close()
        raise translated(exc, where) from None
    return conn


def behind_pooler(conn: psycopg.Connection) -> bool:
    """Whether ``conn`` reaches the server through a pooler: PgBouncer (as other poolers) answers the
    connection's startup with a cancel key of its own, whose process id is not the server process's."""
    row = conn.execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None  # the query answers one row
    return bool(conn.info.backend_pid != row[0])


def _settings(durability: str, lock_timeout: float) -> tuple[str, str]:
    synchronous = "on" if durability == "full" else "off"
    return f"synchronous_commit = {synchronous}", f"lock_timeout = {int(max(lock_timeout, 0.001) * 1000)}"


def configure(conn: psycopg.Connection, durability: str, lock_timeout: float, pooled: bool = False) -> None:
    """Session settings of tinystore's own connections (the readers' pool too: only tinystore's
    statements and the application's SQL inside store.transaction() run there); none on a pooled one."""
    if pooled:
        return
    commit = conn.autocommit
    conn.autocommit = True
    for setting in _settings(durability, lock_timeout):
        conn.execute(f"SET {setting}")
    conn.autocommit = commit


def begin(where: Where, durability: str, lock_timeout: float) -> tuple[str, ...]:
    """What begins a write transaction: BEGIN, and through a pooler the session settings for this
    transaction only (SET LOCAL), sent with it in the writer's pipeline: no round trip more."""
    if not where.pooled:
        return ("BEGIN",)
    return ("BEGIN", *(f"SET LOCAL {setting}" for setting in _settings(durability, lock_timeout)))


def is_connection_error(exc: BaseException, conn: Any = None) -> bool:
    """Whether an error means the connection or the server failed, not the statement."""
    if isinstance(exc, (pe.AdminShutdown, pe.CrashShutdown, pe.CannotConnectNow, pe.ConnectionException)):
        return True
    if isinstance(exc, psycopg.OperationalError) and not isinstance(exc, pe.LockNotAvailable):
        return conn is None or conn.closed or conn.broken or exc.sqlstate is None
    return isinstance(exc, psycopg.InterfaceError)


def translated(exc: BaseException, where: Where, queue: Optional[str] = None, unknown: Optional[str] = None) -> BaseException:
    """``exc`` as a tinystore error; an error that is not psycopg's is returned as it is.

    ``unknown``: what to say where the commit may have happened (the connection was lost during it).
    """
    if not isinstance(exc, psycopg.Error):
        return exc
    text = where.scrub(str(exc))
    if isinstance(exc, pe.LockNotAvailable):
        return Locked(f"another transaction held a lock of {where.location} longer than lock_timeout; "
                      f"nothing was written", queue=queue)
    if isinstance(exc, pe.DiskFull):
        return DiskFull(f"{where.server()} has no space left: {text}; nothing was written", queue=queue)
    if isinstance(exc, (pe.ReadOnlySqlTransaction, pe.InsufficientPrivilege)):
        return ReadOnly(f"{where.location} cannot be written: {text}; nothing was written", queue=queue)
    if isinstance(exc, (pe.UndefinedTable, pe.UndefinedColumn, pe.UndefinedFunction, pe.InvalidSchemaName)):
        return StoreCorrupt(f"the schema {where.schema!r} of {where.server()} does not hold tinystore's "
                            f"tables as this version of tinystore made them ({text}): they were changed by "
                            f"hand or by another version", queue=queue)
    if is_connection_error(exc) or isinstance(exc, (pe.QueryCanceled, pe.TooManyConnections)) \
            or exc.sqlstate in RETRIED:
        said = "nothing was written" if unknown is None else unknown
        return Unavailable(f"the connection to {where.server()} failed: {text}" + (f"; {said}" if said else ""),
                           queue=queue)
    return Error(f"{where.location}: {text}", queue=queue)


def raise_translated(exc: BaseException, where: Where, queue: Optional[str] = None) -> NoReturn:
    error = translated(exc, where, queue)
    if error is exc:
        raise exc
    raise error from exc


def _wrote(cur: psycopg.Cursor) -> bool:
    """Whether a statement answered wrote rows."""
    status = cur.statusmessage or ""
    return bool(cur.rowcount and cur.rowcount > 0 and status.split(" ", 1)[0] in ("INSERT", "UPDATE", "DELETE", "MERGE"))


class PgConn:
    """A psycopg connection as tinystore's modules and ``Transaction`` use one: ``execute`` returns a
    cursor, ``executemany`` too (psycopg's connection has none), and ``changes`` counts the statements
    that wrote rows (SQLite's total_changes), so that a commit that changed nothing tells nobody."""

    def __init__(self, raw: psycopg.Connection, q: Any):
        self.raw = raw
        self.q = q  # the schema's statements (_sql.Schema)
        self.changes = 0
        self.locked: set[str] = set()  # the queues whose locks the transaction holds (see _writer)
        # The writer's transaction's queue options as kept (text, or None), read once per queue: they
        # cannot change while it holds the queue's lock, which save_options takes (it forgets its queue's).
        self.options: Optional[dict[str, Any]] = None  # text, None, or a read sent ahead (PgExecutor)
        # Set by the writer: the process whose notices its transaction sends, and whether the operation runs
        # bare (alone in autocommit, each statement its own transaction: see _writer).
        self.owner: Optional[int] = None
        self.bare = False
        self.sent: Optional[list[psycopg.Cursor]] = None  # while the writer's pipeline runs: its statements
        self.retired = False  # the writer makes a new connection before its next batch (see _writer)

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> psycopg.Cursor:
        cur = self.raw.execute(sql, params if params is not None and params != () else None)
        self._count(cur)
        return cur

    def executemany(self, sql: str, rows: Iterable[Sequence[Any] | dict[str, Any]]) -> psycopg.Cursor:
        cur = self.raw.cursor()
        cur.executemany(sql, list(rows))
        self._count(cur)
        return cur

    def _count(self, cur: psycopg.Cursor) -> None:
        if self.sent is not None:  # in the writer's pipeline: the answer comes later (count_sent)
            self.sent.append(cur)
        elif _wrote(cur):
            self.changes += 1

    def count_sent(self, first: int, end: int) -> bool:
        """The pipeline answered: count the statements sent in it from ``first`` to ``end`` that wrote rows;
        whether any did."""
        wrote = sum(_wrote(cur) for cur in (self.sent or [])[first:end])
        self.changes += wrote
        return wrote > 0

    def one(self, sql: str, params: Any = None) -> Optional[tuple[Any, ...]]:
        return self.execute(sql, params).fetchone()

    def row(self, sql: str, params: Any = None) -> tuple[Any, ...]:
        """The one row ``sql`` always answers (an aggregate, a row it wrote and returns)."""
        found = self.one(sql, params)
        if found is None:
            raise LookupError(f"{sql!r} answered no row, where it always answers one")
        return found

    def all(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        return self.execute(sql, params).fetchall()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)
