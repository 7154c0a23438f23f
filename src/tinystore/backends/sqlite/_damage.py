"""A damaged store file: the database's "malformed" errors as ``StoreCorrupt``, saying what to do.

SQLite keeps no checksums: damage in the middle of a file shows only when a
statement reads the damaged page (SQLITE_CORRUPT, "database disk image is
malformed"), or not at all. ``tinystore check FILE`` reads every page and
says what it found.
"""

from __future__ import annotations

import sqlite3
from typing import Optional

from ..._errors import StoreCorrupt

_DAMAGE = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


def is_damage(exc: BaseException) -> bool:
    """Whether a database error says that the file is damaged (any extended code of CORRUPT or NOTADB)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(exc, sqlite3.DatabaseError) and isinstance(code, int) and code & 0xFF in _DAMAGE


def damaged(path: str, exc: "BaseException | str", queue: Optional[str] = None) -> StoreCorrupt:
    """The StoreCorrupt for damage met while reading or writing the store at ``path``: a database's error,
    or what tinystore found wrong."""
    error = StoreCorrupt(f"the store {path} is damaged ({exc}): run `tinystore check {path}` to see what is "
                         f"damaged, then restore the file from a backup", queue=queue)
    if isinstance(exc, BaseException):
        error.__cause__ = exc
        error.__suppress_context__ = True
    return error
