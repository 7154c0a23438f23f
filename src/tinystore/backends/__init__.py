"""Backends: the databases a store can live in, behind one interface (``_base.Backend``).

``open_backend`` is the one place that picks a backend from what the user
gave ``tinystore.open``: a file path is a SQLite store (``sqlite/``), a
``postgresql://`` or ``postgres://`` URL a PostgreSQL one (``postgres/``).
As in sqlite3 and SQLAlchemy, ``sqlite:///app.db`` is the path ``app.db``
(relative to the working folder), ``sqlite:////srv/app.db`` the path
``/srv/app.db``; ``:memory:``, ``sqlite://`` and ``sqlite:///:memory:`` are
a store for tests that leaves no file behind (``sqlite._memory``).

For an operator's commands (``tinystore status STORE``...), which never make
a store of what they are given: ``open_existing`` opens a store that exists
already, for reading only where asked (it then writes nothing to it), and
``check`` says whether a SQLite store is damaged (a ``CheckReport``). They
pick the backend from the target as ``open_backend`` does. ``shown``,
``scrubbed`` and ``is_url`` (``_targets``) and ``CheckReport`` (``_reports``)
are named here for the core; the backends import them from their modules.
"""

from __future__ import annotations

import os
import re
from typing import Any, Optional

from .._errors import Error, InvalidArgument
from ._base import Backend
from ._reports import CheckReport, UnreadableJob
from ._targets import LOCK_TIMEOUT, URL_SCHEMES, is_url, scrubbed, shown

__all__ = ["CheckReport", "DURABILITY", "LOCK_TIMEOUT", "UnreadableJob", "check", "is_url", "open_backend",
           "open_existing", "scrubbed", "shown"]

DURABILITY = ("full", "normal", "off")  # what tinystore.open(durability=) takes; "full" unless given
SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
MEMORY = ":memory:"
SQLITE_URL = "sqlite://"
IN_MEMORY = (MEMORY, SQLITE_URL, SQLITE_URL + "/" + MEMORY)  # what names a store in memory, as sqlite3 and SQLAlchemy


def open_backend(target: "str | os.PathLike[str]", *, durability: str, lock_timeout: float,
                 schema: Optional[str] = None, direct: Optional[str] = None) -> Backend:
    """The backend for ``target``: a SQLite file path (created where absent), or a PostgreSQL URL
    (``schema``: where tinystore's tables are, ``tinystore`` unless given; ``direct``: a URL of the same
    database that reaches the server itself, where ``target`` reaches it through a pooler)."""
    if isinstance(target, str) and target.startswith(URL_SCHEMES):
        if direct is not None and not is_url(direct):
            # Not shown: text that is no URL may be a connection string with a password in it.
            raise InvalidArgument(f"direct= must be a postgresql:// or postgres:// URL of the store's database; "
                                  f"the {type(direct).__name__} given is not one")
        return _postgres(target, durability, lock_timeout, schema, direct)
    if schema is not None:
        raise InvalidArgument(f"schema={schema!r} is for a PostgreSQL URL; a SQLite store is one file")
    if direct is not None:
        raise InvalidArgument(f"direct= is for a PostgreSQL URL behind a pooler; a SQLite store is one file, "
                              f"opened directly")
    path = _path(target)
    try:
        if path == MEMORY:
            from .sqlite._memory import MemoryBackend
            return MemoryBackend(lock_timeout)
        from .sqlite import SQLiteBackend  # imported here: a backend's driver loads only when it is used
        return SQLiteBackend(path, durability, lock_timeout)
    except OSError as exc:  # what the checks before any write could not foresee: a race, no space, no descriptors
        where = f" ({exc.filename})" if exc.filename and exc.filename != os.path.abspath(path) else ""
        raise Error(f"cannot open the store {os.path.abspath(path)}: {exc.strerror or exc}{where}") from exc


def _postgres(url: str, durability: str, lock_timeout: float, schema: Optional[str],
              direct: Optional[str] = None) -> Backend:
    schema = "tinystore" if schema is None else schema
    if not isinstance(schema, str) or not SCHEMA_NAME.fullmatch(schema):
        raise InvalidArgument(f"schema={schema!r} must match [a-z_][a-z0-9_]{{0,62}}")
    try:
        from .postgres import PostgresBackend  # imported here: psycopg loads only for a PostgreSQL store
    except ImportError as exc:
        raise Error(f"a PostgreSQL store needs psycopg 3 and its pool: pip install \"tinystore[postgres]\" "
                    f"({exc})") from exc
    return PostgresBackend(url, schema, durability, lock_timeout, direct)


def _path(target: Any) -> str:
    """The SQLite file ``target`` names (a path, or a ``sqlite:///`` URL of one), or ``MEMORY``."""
    try:
        path = os.fspath(target)
    except TypeError:
        path = None
    if not isinstance(path, str) or not path or "\0" in path:
        raise InvalidArgument(f"the store's path must be a file path, not {target!r}")
    if path in IN_MEMORY:
        return MEMORY
    if path.startswith(SQLITE_URL):
        return _url_path(path)
    return path


def _url_path(url: str) -> str:
    """The path of a ``sqlite:///`` URL: what follows its third slash (a fourth begins an absolute path)."""
    path = url[len(SQLITE_URL) + 1:]
    if not url.startswith(SQLITE_URL + "/") or not path or "?" in url:
        raise InvalidArgument(f"{url!r} is not a SQLite store's URL: sqlite:///app.db names app.db in the working "
                              f"folder, sqlite:////srv/app.db the file /srv/app.db, and sqlite:// a store in "
                              f"memory; no host, and no ?query")
    return path


def _existing_path(target: Any) -> str:
    """The SQLite file of a store that must exist already: one in memory is no file to open again."""
    path = _path(target)
    if path == MEMORY:
        raise InvalidArgument(f"{os.fspath(target)!r} is a store in memory, which only the process that opened it "
                              f"can reach: give a SQLite file or a PostgreSQL URL")
    return path


# An operator's commands: a store that exists already

def open_existing(target: "str | os.PathLike[str]", read_only: bool = False,
                  schema: Optional[str] = None) -> Backend:
    """The backend of the store at ``target``, which must exist already: never makes one.

    A SQLite file: a missing file, a directory, a file that is not a SQLite
    database or one without tinystore's tables is refused with
    ``InvalidArgument``, before anything writes to it; damage met meanwhile
    is ``StoreCorrupt``. ``read_only``: the backend registers nothing and
    writes nothing (its writes raise ``Error``), so it reads a store this
    process may not write; a store of an earlier version's tables is opened
    writable all the same, as its tables must be migrated first. Else it is
    opened as ``tinystore.open`` opens it, with its defaults.

    A PostgreSQL URL (``schema``: ``tinystore`` unless given; for a URL
    only): a URL that cannot be read, a server that cannot be reached or
    refuses the user, a database that does not exist and a schema without
    tinystore's tables are refused with ``InvalidArgument`` (one line naming
    host, port and database, never the password), after one read of the
    catalog on a connection of its own, which writes and creates nothing
    (``postgres._existing``). The store is then opened as ``tinystore.open``
    opens it, ``read_only`` or not: the database enforces what this user
    may read and write, and the one write of such an open, the process's
    registration (one row), is removed by its close. (So a user who may
    only read the schema is refused by the open, saying it cannot write.)
    """
    if is_url(target):
        schema = _schema_name("tinystore" if schema is None else schema)
        try:
            from .postgres import _existing  # imported here: psycopg loads only for a PostgreSQL store
        except ImportError as exc:
            raise Error(f"a PostgreSQL store needs psycopg 3 and its pool: pip install \"tinystore[postgres]\" "
                        f"({exc})") from exc
        _existing.check_store(target, schema)
        return open_backend(target, durability="full", lock_timeout=LOCK_TIMEOUT, schema=schema)
    if schema is not None:
        raise InvalidArgument(f"schema={schema!r} is for a PostgreSQL URL; a SQLite store is one file")
    path = _existing_path(target)
    from .sqlite import _files, _readonly
    _files.check_store(path)
    if read_only:
        backend = _readonly.open_read_only(path)
        if backend is not None:
            return backend
    return open_backend(path, durability="full", lock_timeout=LOCK_TIMEOUT)


def check(target: "str | os.PathLike[str]", *, quick: bool = False, limit: int = 100) -> CheckReport:
    """Read every page of the SQLite store at ``target`` and each of its jobs, writing nothing: what was found.

    ``quick``: a faster check that does not compare every index with its
    table; ``limit``: at most this many problems are read from the database's
    own check. A target that is not an existing store is ``InvalidArgument``;
    so is a PostgreSQL URL: the server checks its own pages (data checksums,
    ``pg_amcheck``), and reads no page it cannot verify, so there is nothing
    of SQLite's kind to check from here.
    """
    if is_url(target):
        raise InvalidArgument(f"tinystore check reads the pages of a SQLite store file, and {shown(target)} is "
                              f"a PostgreSQL database: the server checks its own pages (enable data checksums; "
                              f"run pg_amcheck)")
    path = _existing_path(target)
    from .sqlite import _check
    return _check.check(path, quick=quick, limit=limit)


def _schema_name(schema: Any) -> str:
    if not isinstance(schema, str) or not SCHEMA_NAME.fullmatch(schema):
        raise InvalidArgument(f"schema {schema!r} must match [a-z_][a-z0-9_]{{0,62}}")
    return schema
