"""Reading a store without writing a byte: for an operator's commands that only read (status, jobs, show).

Opening a store writes (this process's registration, the leases of
processes that died, the migrations), so a normal open cannot read a store
that this process may not write: a file or folder that is read-only, a
read-only mount, a copy being looked at. ``ReadOnlyBackend`` reads through
one read-only connection (``_files.connect_read_only``) instead, with the
SQLite backend's own read statements; it registers nothing, and every write
raises ``tinystore.Error`` saying that the store is open read-only here. The
core wraps it in a ``Store`` as it does any backend.
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import contextmanager
from typing import Any, Callable, Iterator, NoReturn, Optional

from ..._errors import Error
from ..._transaction import Transaction
from .._base import FailureListener, NoticeListener
from . import SQLiteBackend
from .._targets import LOCK_TIMEOUT
from ._connection import translated
from ._damage import damaged, is_damage
from ._files import connect_read_only, is_current


class ReadOnlyBackend(SQLiteBackend):
    """The SQLite backend's reads on one read-only connection; no writer, no registration.

    It keeps nothing of the backend's own state but its path: every read of
    the backend goes through ``_read``, which is this class's own, and every
    method that would write is this class's own, and raises.
    """

    def __init__(self, path: str, conn: sqlite3.Connection):  # the backend's own __init__ writes
        self.path = self.location = os.path.abspath(path)
        self._pid = os.getpid()
        self._lock_timeout = LOCK_TIMEOUT
        self._owner = None
        self._conn: "sqlite3.Connection | None" = conn

    def _refuse(self) -> NoReturn:
        raise Error(f"the store {self.path} is open read-only here: nothing can be written")

    def _thread_connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise Error(f"the store {self.path} is closed")
        return self._conn

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """The connection, in one read transaction (one snapshot of the file); errors as tinystore's."""
        conn = self._thread_connection()
        try:
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            error = translated(exc, self.path)
            if error is exc:
                raise
            raise error from exc

    # Nothing is registered: the owner id names no lease, and no lease is ever taken under it.

    def register(self, now: float) -> int:
        return 0

    def end_dead(self, now: float) -> int:
        self._refuse()

    def close(self) -> None:
        if self.forked():
            return  # a forked child's copy: the connection is the parent's
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # Every write, and what needs one (hearing of commits, transactions), is refused.

    def submit(self, fn: Callable[..., Any], *args: Any, work: Any = None, source: Any = None,
               alone: bool = False) -> Any:
        self._refuse()

    def listen(self, on_notice: NoticeListener, on_error: FailureListener) -> None:
        self._refuse()

    def transaction(self) -> NoReturn:
        self._refuse()

    def in_transaction(self) -> bool:
        return False

    def adopt(self, conn: Any, queue: str) -> Transaction:
        self._refuse()

    def inherited_connections(self) -> list[sqlite3.Connection]:
        return [self._conn] if self._conn is not None else []


def open_read_only(path: str) -> Optional[ReadOnlyBackend]:
    """The store at ``path`` (a file holding tinystore's tables) for reading only; damage is StoreCorrupt.

    None where its tables are an earlier version's: the read statements are
    this version's, so it must be opened as a store is, which migrates them.
    """
    conn = connect_read_only(path)
    try:
        current = is_current(conn)
    except sqlite3.Error as exc:
        conn.close()
        if is_damage(exc):
            raise damaged(os.path.abspath(path), exc)
        error = translated(exc, os.path.abspath(path))
        if isinstance(error, Error):
            raise error from exc
        raise Error(f"cannot read the store {os.path.abspath(path)}: {exc}") from exc
    except BaseException:
        conn.close()
        raise
    if not current:
        conn.close()
        return None
    return ReadOnlyBackend(path, conn)
